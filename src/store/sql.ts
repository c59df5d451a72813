// Statements written once for both databases, and the Driver that runs an operation's generator of them (in SQLite's group commit, or awaited).
import { Sql } from 'sql-template-tag';
import type { CreateResult, PlantRecord, WebhookEvent } from './types.ts';

// A statement's text around its values, kept apart: `.sql` writes SQLite's `?` between the parts, `.text` PostgreSQL's `$1`, `$2`…
export { default as sql, join as joined, raw, Sql } from 'sql-template-tag';

export type Dialect = 'sqlite' | 'postgres';

/** A step: rows as objects (`all`) or arrays (`tuples`), the count of changed rows (`run`), a DDL script, or whether an event has subscribers. */
export type Statement = { kind: 'all' | 'tuples' | 'run'; sql: Sql } | { kind: 'exec'; script: string } | { kind: 'wanted'; event: WebhookEvent };
/** A unit of work: each `yield` hands the driver a statement and receives its answer. */
export type Steps<T> = Generator<Statement, T, unknown>;

/** What a write may change, so a driver knows what to make atomic: one statement, several, or a plant change and its event's outbox rows. */
export type WriteScope = 'statement' | 'transaction' | WebhookEvent;

/** How a database spells what SQL leaves open (row locks, turns, a lateral join); every other text is shared. */
export interface Spelling {
  dialect: Dialect;
  /** Holds the rows a select read until commit. */
  forUpdate: Sql;
  /** Lets instances claiming together take disjoint rows of `table`. */
  skipLocked: (table: string) => Sql;
  /** Makes writes of a kind that count before they insert wait for each other until commit, where the write lock does not. */
  takeTurns?: (kind: 'first token' | 'subscription') => Sql;
  /** A join giving each row before it its first `limit` deliveries as `x`: those `where(alias)` selects, in the order `order(alias)`. */
  firstDeliveries: (where: (alias: string) => Sql, order: (alias: string) => Sql, limit: number) => Sql;
  /** A plant version never handed out before in this store (migration 8), for the write that sets it. */
  nextVersion: Sql;
}

/** Read as a call begins, so that batching moves neither: the event's key (its message ids) and the caller's trace. */
export interface EventOrigin { key: string; traceparent: string | null }

/** The operations of one concern (plants.ts, tokens.ts, webhooks.ts), written once over either driver. */
export abstract class Repository {
  protected readonly driver: Driver;

  constructor(driver: Driver) {
    this.driver = driver;
  }

  protected query<T>(read: Statement | Sql, answer: (result: unknown) => T): Promise<T> {
    return this.driver.query(read instanceof Sql ? all(read) : read, answer);
  }
}

export interface Driver {
  readonly spelling: Spelling;
  /** Runs reads; each statement sees what is committed. */
  read<T>(work: () => Steps<T>): Promise<T>;
  /** Runs one read statement, answering what `answer` makes of its result: a read without steps around it. */
  query<T>(statement: Statement, answer: (result: unknown) => T): Promise<T>;
  write<T>(work: () => Steps<T>, scope: WriteScope): Promise<T>;
  /** Writes creates issued together in one statement; `alone` creates one plant by the shared rule. */
  createPlant?(plant: PlantRecord, origin: EventOrigin, alone: () => Promise<CreateResult>): Promise<CreateResult>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export function* only<T>(statement: Statement): Steps<T> {
  return (yield statement) as T;
}

export const all = (statement: Sql): Statement => ({ kind: 'all', sql: statement });
export const run = (statement: Sql): Statement => ({ kind: 'run', sql: statement });

export type Row = Record<string, unknown>;
// Integer columns read as BigInt (exact int64 ids) that records hold as numbers.
const COUNTS = new Set(['attempts', 'lastResponseStatus']);

/** A row as a record: no key for a null, times as ISO 8601 text (PostgreSQL reads Dates), counts as numbers. */
export function record<T>(row: Row): T {
  const fields: Row = {};
  for (const [name, value] of Object.entries(row)) {
    if (value !== null) fields[name] = value instanceof Date ? value.toISOString() : COUNTS.has(name) ? Number(value) : value;
  }
  return fields as T;
}
