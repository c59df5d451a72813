// The PlantStore written once, in SQL both databases speak. Every rule lives here: create outcomes,
// conditional writes, the outbox (payloads and message ids), delivery attempts, tokens, subscriptions,
// pruning and the migration runner. Each operation is a generator of statements; a Driver (sqlite.ts,
// postgres.ts) runs it: synchronously inside SQLite's group commit, awaiting each answer on PostgreSQL.
// A driver adds only what its database does differently (locking, batching, placeholders, faults).
import { randomUUID } from 'node:crypto';
import { MIGRATION_TABLE, migrations, spelled, type Dialect } from './migrations.ts';
import { outboxTrace } from './outbox-trace.ts';
import { COLUMN_KINDS, PLANT_FIELD_NAMES, PLANT_FIELDS } from './plant-fields.ts';
import { eventPayload, pageStart, WEBHOOK_EVENTS, plantWith, samePlant, SubscriptionLimitError, TokenNameTakenError, type AttemptOutcome, type ClaimedDelivery, type ConditionalWrite,
  type CreateResult, type Delivery, type KeysetQuery, type NewSubscription, type NewTokenRecord, type PageQuery, type PlantContent,
  type PlantRecord, type PlantStore, type Precondition, type Subscription, type TokenRecord, type WebhookEvent, unstorableText } from './types.ts';

/**
 * One step for a driver: a statement's rows as objects (`all`) or as arrays of column values (`tuples`,
 * which both drivers build for less), its count of changed rows (`run`), a DDL script (`exec`), or
 * whether an event has subscribers (`wanted`).
 */
export type Statement = { kind: 'all' | 'tuples' | 'run' | 'exec'; sql: string; params: unknown[] } | { kind: 'wanted'; event: WebhookEvent };
/** A unit of work: each `yield` hands the driver a statement and receives its answer. */
export type Steps<T> = Generator<Statement, T, unknown>;

/**
 * What a write may change, so that a driver knows what it must make atomic: `statement`, at most one row
 * set in one statement (undone by its own failure); `transaction`, several; an event, one plant change
 * plus that event's outbox rows (atomic only when the event has subscribers).
 */
export type WriteScope = 'statement' | 'transaction' | WebhookEvent;

/**
 * How a database spells what SQL leaves open: `forUpdate` holds the rows a select read until commit, `skipLocked(table)`
 * lets instances claiming together take disjoint deliveries (the rows of `table`, a name in the select), `takeTurns(kind)`
 * makes the writes of a kind that count before they insert wait for each other until commit where the write lock does not
 * (first tokens, subscriptions), `firstDeliveries` joins the row before it to its first deliveries.
 */
export interface Spelling {
  dialect: Dialect;
  forUpdate: string;
  skipLocked: (table: string) => string;
  takeTurns?: (kind: 'first token' | 'subscription') => string;
  /**
   * A join that gives each row before it its first deliveries, as `x`: those `where(alias)` selects (a condition on
   * that row), in the order `order(alias)`, up to a limit given as one more parameter after those of `where`.
   */
  firstDeliveries: (where: (alias: string) => string, order: (alias: string) => string) => string;
}

export interface Driver {
  readonly spelling: Spelling;
  /** Runs reads; each statement sees what is committed. */
  read<T>(work: () => Steps<T>): Promise<T>;
  /** Runs one read statement, answering what `answer` makes of its result: a read without the steps around it. */
  query<T>(statement: Statement, answer: (result: unknown) => T): Promise<T>;
  write<T>(work: () => Steps<T>, scope: WriteScope): Promise<T>;
  /** Writes creates issued together in one statement; `alone` creates one plant by the shared rule. */
  createPlant?(plant: PlantRecord, origin: EventOrigin, alone: () => Promise<CreateResult>): Promise<CreateResult>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Read as a call begins, so that batching moves neither: the event's key (its message ids) and the caller's trace. */
export interface EventOrigin { key: string; traceparent: string | null }

/** Work of a single statement, answering what the driver answers for it. */
export function* only<T>(statement: Statement): Steps<T> {
  return (yield statement) as T;
}

/** A statement whose rows the driver answers, as objects. */
export function all(sql: string, ...params: unknown[]): Statement {
  return { kind: 'all', sql, params };
}

/** A statement whose count of changed rows the driver answers, as a number. */
export function run(sql: string, ...params: unknown[]): Statement {
  return { kind: 'run', sql, params };
}

/** Applies pending migrations; the driver runs it in one transaction that instances starting together take in turns. */
export function* migrate(dialect: Dialect): Steps<void> {
  yield { kind: 'exec', sql: MIGRATION_TABLE[dialect], params: [] };
  const [row] = (yield all('SELECT max(version) AS version FROM schema_migrations')) as { version: number | bigint | null }[];
  const current = Number(row?.version ?? 0);
  const latest = migrations.at(-1)?.version ?? 0;
  if (current > latest) throw new Error(`The database is at schema version ${current}, newer than this release knows (${latest}).`);
  for (const migration of migrations.filter((m) => m.version > current)) {
    yield { kind: 'exec', sql: spelled(migration, dialect), params: [] };
    yield run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', migration.version, migration.name, new Date().toISOString());
  }
}

// Records' names come as aliases (quoted: both databases keep their case), read by `record`.
const TOKEN = 'id, name, hint, scopes, created_at AS "createdAt", last_used_at AS "lastUsedAt", expires_at AS "expiresAt", revoked_at AS "revokedAt"';
const SUBSCRIPTION = `id, url, events, created_at AS "createdAt", disabled_at AS "disabledAt", disabled_reason AS "disabledReason",
  previous_secret_until AS "previousSecretExpiresAt"`;
const DELIVERY = `message_id AS "messageId", event, status, attempts, created_at AS "createdAt", last_attempt_at AS "lastAttemptAt",
  last_response_status AS "lastResponseStatus", last_error AS "lastError", CASE WHEN status = 'pending' THEN next_attempt_at END AS "nextAttemptAt"`;
const CLAIMED = 'id, message_id AS "messageId", event, payload, attempts, subscription_id AS "subscriptionId", traceparent, next_attempt_at AS due';
/** A due delivery `x` whose lease, if any, has ended. Parameters: now, now. */
const dueAs = (x: string) => `${x}.status = 'pending' AND ${x}.next_attempt_at <= ? AND (${x}.claimed_until IS NULL OR ${x}.claimed_until <= ?)`;
/**
 * The due deliveries a claim may take: each subscription's in its due order, up to its share less those it already has
 * leased (in flight here or on another instance). Its share is `perSubscription`, or `unanswered` until its receiver has
 * answered its latest attempt. The first `limit` (the shared slots) are taken round-robin (every subscription's first,
 * then every second…) so that one subscription's backlog never fills a claim; beyond them, a subscription holding no
 * lease always gets its first (its own slot), so receivers that hang cannot hold every slot.
 * `queue` reads a few rows of each subscription along an index, so a claim costs the same whatever the backlog of
 * receivers that are down; `held` is materialized so that it is read through the index of leases.
 * Parameters: unanswered, perSubscription, now, now, perSubscription, now, limit.
 */
function candidates({ firstDeliveries }: Spelling): string {
  const first = firstDeliveries((y) => `${y}.subscription_id = s.id AND ${dueAs(y)}`, (y) => `${y}.next_attempt_at, ${y}.id`);
  return `WITH queue AS (SELECT s.id AS subscription_id, CASE WHEN s.answered_at IS NULL THEN CAST(? AS INTEGER) ELSE CAST(? AS INTEGER) END AS share,
      x.id, x.next_attempt_at AS due, row_number() OVER (PARTITION BY s.id ORDER BY x.next_attempt_at, x.id) AS place
      FROM webhook_subscriptions s ${first}),
    held AS MATERIALIZED (SELECT subscription_id, status FROM webhook_deliveries WHERE claimed_until > ?),
    leases AS (SELECT subscription_id, count(*) AS leased FROM held WHERE status = 'pending' GROUP BY subscription_id),
    allowed AS (SELECT q.id, q.place, coalesce(l.leased, 0) AS leased, row_number() OVER (ORDER BY q.place, q.due, q.id) AS turn
      FROM queue q LEFT JOIN leases l ON l.subscription_id = q.subscription_id WHERE q.place + coalesce(l.leased, 0) <= q.share)
    SELECT id FROM allowed WHERE turn <= CAST(? AS INTEGER) OR (place = 1 AND leased = 0)`;
}
// Whether a subscription's receiver answered its latest attempt (with any status), which a claim's share follows; written
// only when it changes, and before the delivery, so that every writer locks a subscription before its deliveries (no deadlock).
const OF_PENDING = "(SELECT subscription_id FROM webhook_deliveries WHERE id = ? AND status = 'pending')";
const ANSWERED = `UPDATE webhook_subscriptions SET answered_at = ? WHERE id = ${OF_PENDING} AND answered_at IS NULL`;
const UNANSWERED = `UPDATE webhook_subscriptions SET answered_at = NULL WHERE id = ${OF_PENDING} AND answered_at IS NOT NULL`;
// Where a claimed delivery goes and what signs it: the previous secret too while its overlap lasts (parameters: now, id).
const TARGET = `SELECT url, secret, CASE WHEN previous_secret_until > ? THEN previous_secret END AS "previousSecret"
  FROM webhook_subscriptions WHERE id = ?`;
// Every plant statement names the columns of PLANT_FIELDS (plant-fields.ts), in its order.
const PLANTS = `SELECT id, ${PLANT_FIELD_NAMES.join(', ')} FROM plants WHERE `;
const PLANT_BY_ID = `${PLANTS}id = ?`;
// Every LIMIT takes an expression: SQLite re-prepares a statement whose bare LIMIT parameter is bound.
const PAGE = `${PLANTS}id >= ? ORDER BY id LIMIT CAST(? AS INTEGER)`;
const PAGE_BY_TAG = `${PLANTS}tag = ? AND id >= ? ORDER BY tag, id LIMIT CAST(? AS INTEGER)`;
// Stored only while fewer than the limit (the last parameter) are: counted and inserted in one statement.
const INSERT_SUBSCRIPTION = `INSERT INTO webhook_subscriptions (url, events, secret, created_at)
  SELECT ?, ?, ?, ? WHERE (SELECT count(*) FROM webhook_subscriptions) < CAST(? AS INTEGER) RETURNING ${SUBSCRIPTION}`;
const SUBSCRIPTION_PAGE = `SELECT ${SUBSCRIPTION} FROM webhook_subscriptions WHERE id >= ? ORDER BY id LIMIT CAST(? AS INTEGER)`;
const TOKEN_BY_HASH = `SELECT ${TOKEN} FROM api_tokens WHERE token_hash = ?`;
const INSERT_PLANT = `INSERT INTO plants (id, ${PLANT_FIELD_NAMES.join(', ')}) VALUES (?${', ?'.repeat(PLANT_FIELD_NAMES.length)}) ON CONFLICT (id) DO NOTHING`;
const UPDATE_PLANT = `UPDATE plants SET ${PLANT_FIELD_NAMES.map((field) => `${field} = ?`).join(', ')} WHERE id = ?`;
const DELETE_PLANT = 'DELETE FROM plants WHERE id = ?';
const INSERT_TOKEN = `INSERT INTO api_tokens (name, token_hash, hint, scopes, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (name) DO NOTHING RETURNING ${TOKEN}`;

/** The subscriptions (`s`) that want the event. Its name is written into the SQL: SQLite re-prepares a statement whose LIKE pattern is bound. */
export function wanting(event: WebhookEvent): string {
  return `s.disabled_at IS NULL AND (' ' || s.events || ' ') LIKE '% ${event} %'`;
}

/**
 * The outbox rows of an event, one per subscription that wants it. A message id is `msg_`, the event's
 * key (32 hex digits, one per event) and the subscription's id: the same on every attempt and instance.
 */
export function outboxInsert(from: string, event: WebhookEvent, key: string, payload: string, at: string, traceparent: string): string {
  return `INSERT INTO webhook_deliveries (message_id, subscription_id, event, payload, created_at, status, next_attempt_at, traceparent)
    SELECT 'msg_' || ${key} || '_' || s.id, s.id, '${event}', ${payload}, ${at}, 'pending', ${at}, ${traceparent} FROM ${from} WHERE ${wanting(event)}`;
}

const EMIT = new Map(WEBHOOK_EVENTS.map((event) => [event, outboxInsert('webhook_subscriptions s', event, '?', '?', '?', '?')]));

function newOrigin(): EventOrigin {
  return { key: randomUUID().replaceAll('-', ''), traceparent: outboxTrace() };
}

/** Writes the event's outbox rows; answers whether there were any. */
function* emit(event: WebhookEvent, plant: PlantRecord, origin: EventOrigin): Steps<boolean> {
  if (!(yield { kind: 'wanted', event })) return false;
  const at = new Date().toISOString();
  return ((yield run(EMIT.get(event)!, origin.key, eventPayload(plant), at, at, origin.traceparent)) as number) > 0;
}

/** The outcome of a create that found `stored` at its id. */
export function judged(plant: PlantRecord, stored: PlantRecord): CreateResult {
  return { outcome: samePlant(stored, plant) ? 'unchanged' : 'conflict', stored };
}

function* createOne(plant: PlantRecord, origin: EventOrigin): Steps<CreateResult> {
  for (;;) {
    if ((yield run(INSERT_PLANT, plant.id, ...plantColumns(plant))) === 1) {
      return { outcome: 'created', stored: plant, eventWritten: yield* emit('plant.created', plant, origin) };
    }
    // Each statement sees what is committed: if the row that won was deleted meanwhile, insert again.
    const [stored] = toPlants(yield plantsWhere(PLANT_BY_ID, plant.id));
    if (stored) return judged(plant, stored);
  }
}

/** The plants a select (of `id` and PLANT_FIELDS) answers, as rows of column values for toPlants. */
export function plantsWhere(select: string, ...params: unknown[]): Statement {
  return { kind: 'tuples', sql: select, params };
}

/** A select of the plants a condition selects, for plantsWhere; built once per condition, not per call. */
export function selectPlants(condition: string): string {
  return PLANTS + condition;
}

/** The id, then each field's column in PLANT_FIELDS order. */
type PlantRow = [bigint, ...unknown[]];
const READERS = PLANT_FIELD_NAMES.map((field) => COLUMN_KINDS[PLANT_FIELDS[field]].read);

/** A plant's content as the values of its columns, in PLANT_FIELDS order (null for a field it has no value for). */
export function plantColumns(content: PlantContent): unknown[] {
  return PLANT_FIELD_NAMES.map((field) => content[field] ?? null);
}

/** A plant as a record: no key for a null column. */
function toPlant(row: PlantRow): PlantRecord {
  const plant: Record<string, unknown> = { id: row[0] };
  for (let at = 0; at < READERS.length; at++) {
    const value = row[at + 1];
    if (value !== null) plant[PLANT_FIELD_NAMES[at]!] = READERS[at]!(value);
  }
  return plant as PlantRecord;
}

/** Plants as records. */
export function toPlants(rows: unknown): PlantRecord[] {
  return (rows as PlantRow[]).map(toPlant);
}

function firstPlant(rows: unknown): PlantRecord | undefined {
  const row = (rows as PlantRow[])[0];
  return row && toPlant(row);
}

type Row = Record<string, unknown>;
// Integer columns read as BigInt (exact int64 ids) that records hold as numbers.
const COUNTS = new Set(['attempts', 'lastResponseStatus']);

/** A row as a record: no key for a null, times as ISO 8601 text (PostgreSQL reads Dates), counts as numbers. */
function record<T>(row: Row): T {
  const fields: Row = {};
  for (const [name, value] of Object.entries(row)) {
    if (value !== null) fields[name] = value instanceof Date ? value.toISOString() : COUNTS.has(name) ? Number(value) : value;
  }
  return fields as T;
}

function toToken(row: Row): TokenRecord {
  const token = record<TokenRecord & { scopes: string }>(row);
  return { ...token, id: Number(token.id), scopes: token.scopes.split(' ') };
}

function firstToken(rows: unknown): TokenRecord | undefined {
  const row = (rows as Row[])[0];
  return row && toToken(row);
}

function toSubscription(row: Row): Subscription {
  const subscription = record<Subscription & { events: string }>(row);
  return { ...subscription, events: subscription.events.split(' ') as WebhookEvent[] };
}

/** The refusal for a token whose text holds U+0000 (the scopes as the one text they are stored as). */
function unstorableToken({ name, hash, hint, scopes, expiresAt }: NewTokenRecord): Error | undefined {
  return unstorableText({ name, hash, hint, scopes: scopes?.join(' '), expiresAt });
}

/**
 * Why an attempt failed is our own diagnostic, partly quoting the receiver: a NUL in it is shown as U+FFFD
 * rather than refused, since refusing would leave the delivery's outcome unrecorded.
 */
function withStorableDiagnostics(outcome: AttemptOutcome): AttemptOutcome {
  if (outcome.result === 'delivered' || !unstorableText(outcome)) return outcome;
  const readable = (text: string | undefined) => text?.replaceAll('\u0000', '\ufffd');
  if (outcome.result === 'retry') return { ...outcome, error: readable(outcome.error) };
  return { ...outcome, error: readable(outcome.error), disableSubscription: readable(outcome.disableSubscription) };
}

function* insertToken(token: NewTokenRecord): Steps<TokenRecord> {
  const [row] = (yield all(INSERT_TOKEN, token.name, token.hash, token.hint, (token.scopes ?? ['*']).join(' '), token.expiresAt ?? null, new Date().toISOString())) as Row[];
  if (!row) throw new TokenNameTakenError(token.name);
  return toToken(row);
}

/** A plant change whose precondition is decided against the row as the write's transaction holds it. */
function* conditionally(
  event: WebhookEvent,
  origin: EventOrigin,
  [id, precondition, select]: [bigint, Precondition | undefined, string],
  change: (current: PlantRecord) => [Statement, PlantRecord],
): Steps<ConditionalWrite> {
  const [current] = toPlants(yield plantsWhere(select, id));
  if (!current) return { outcome: 'missing' };
  if (precondition && !precondition(current)) return { outcome: 'precondition-failed', current };
  const [statement, plant] = change(current);
  yield statement;
  return { outcome: 'done', plant, eventWritten: yield* emit(event, plant, origin) };
}

export class SqlStore implements PlantStore {
  readonly #driver: Driver;
  /** The select of a plant a conditional write changes, held until commit where the database needs it spelled. */
  readonly #plantForUpdate: string;
  /** The deliveries a claim may take (`candidates`), and the statement that leases them, as the database spells them. */
  readonly #candidates: string;
  readonly #claim: string;

  constructor(driver: Driver) {
    this.#driver = driver;
    this.#plantForUpdate = PLANT_BY_ID + driver.spelling.forUpdate;
    this.#candidates = candidates(driver.spelling);
    // The candidates are chosen without locks (PostgreSQL locks no rows a window reads); the lock and the due test are taken
    // again on each. CROSS JOIN makes SQLite look each candidate up by id, not scan every pending delivery.
    this.#claim = `UPDATE webhook_deliveries SET claimed_until = ? WHERE id IN (
      SELECT w.id FROM (${this.#candidates}) c CROSS JOIN webhook_deliveries w WHERE w.id = c.id AND ${dueAs('w')}${driver.spelling.skipLocked('w')})
      RETURNING ${CLAIMED}`;
  }

  createPlant(plant: PlantRecord): Promise<CreateResult> {
    const refused = unstorableText(plant);
    if (refused) return Promise.reject(refused);
    const origin = newOrigin();
    const alone = () => this.#driver.write(() => createOne(plant, origin), 'plant.created');
    return this.#driver.createPlant ? this.#driver.createPlant(plant, origin, alone) : alone();
  }

  listPlants({ after, tag, limit }: PageQuery): Promise<PlantRecord[]> {
    // A NUL can be no stored tag; PostgreSQL would fail the query rather than find nothing.
    const refused = unstorableText({ tag });
    if (refused) return Promise.reject(refused);
    // An inclusive bound, so that "from the very first id" needs no value below int64.
    const from = pageStart(after);
    if (from === undefined) return Promise.resolve([]);
    return this.#driver.query(tag === undefined ? plantsWhere(PAGE, from, limit) : plantsWhere(PAGE_BY_TAG, tag, from, limit), toPlants);
  }

  getPlant(id: bigint): Promise<PlantRecord | undefined> {
    return this.#driver.query(plantsWhere(PLANT_BY_ID, id), firstPlant);
  }

  replacePlant(id: bigint, content: PlantContent, precondition?: Precondition): Promise<ConditionalWrite> {
    const refused = unstorableText(content);
    if (refused) return Promise.reject(refused);
    const update = () => [run(UPDATE_PLANT, ...plantColumns(content), id), plantWith(id, content)] as [Statement, PlantRecord];
    return this.#conditionally('plant.replaced', id, precondition, update);
  }

  deletePlant(id: bigint, precondition?: Precondition): Promise<ConditionalWrite> {
    return this.#conditionally('plant.deleted', id, precondition, (current) => [run(DELETE_PLANT, id), current]);
  }

  findTokenByHash(hash: string): Promise<TokenRecord | undefined> {
    return this.#driver.query(all(TOKEN_BY_HASH, hash), firstToken);
  }

  createFirstToken(token: NewTokenRecord): Promise<boolean> {
    const refused = unstorableToken(token);
    if (refused) return Promise.reject(refused);
    const lock = this.#driver.spelling.takeTurns?.('first token');
    return this.#driver.write(function* () {
      // Two instances starting on an empty database must not both create a first token.
      if (lock !== undefined) yield all(lock);
      if (((yield all('SELECT 1 AS one FROM api_tokens LIMIT 1')) as Row[]).length > 0) return false;
      yield* insertToken(token);
      return true;
    }, 'transaction');
  }

  createToken(token: NewTokenRecord): Promise<TokenRecord> {
    const refused = unstorableToken(token);
    if (refused) return Promise.reject(refused);
    return this.#driver.write(() => insertToken(token), 'statement');
  }

  async listTokens(): Promise<TokenRecord[]> {
    return (await this.#driver.read(() => only<Row[]>(all(`SELECT ${TOKEN} FROM api_tokens ORDER BY id`)))).map(toToken);
  }

  async revokeToken(nameOrId: string): Promise<TokenRecord | undefined> {
    const refused = unstorableText({ name: nameOrId });
    if (refused) throw refused;
    const column = /^\d+$/.test(nameOrId) ? 'id' : 'name';
    const revoke = all(`UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE ${column} = ? RETURNING ${TOKEN}`, new Date().toISOString(), nameOrId);
    const [row] = await this.#driver.write(() => only<Row[]>(revoke), 'statement');
    return row && toToken(row);
  }

  recordTokenUse(uses: ReadonlyMap<number, string>): Promise<void> {
    return this.#driver.write(function* () {
      for (const [id, at] of uses) yield run('UPDATE api_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)', at, id, at);
    }, 'transaction');
  }

  async createSubscription({ url, events, secret }: NewSubscription, max: number): Promise<Subscription> {
    const refused = unstorableText({ url, secret });
    if (refused) throw refused;
    const lock = this.#driver.spelling.takeTurns?.('subscription');
    const insert = all(INSERT_SUBSCRIPTION, url, events.join(' '), secret, new Date().toISOString(), max);
    const [row] = await this.#driver.write(function* () {
      // Two creates at the limit must not both see room: the second counts after the first commits.
      if (lock !== undefined) yield all(lock);
      return (yield insert) as Row[];
    }, 'transaction');
    if (!row) throw new SubscriptionLimitError(max);
    return toSubscription(row);
  }

  async listSubscriptions({ after, limit }: KeysetQuery): Promise<Subscription[]> {
    const from = pageStart(after);
    if (from === undefined) return [];
    return (await this.#driver.read(() => only<Row[]>(all(SUBSCRIPTION_PAGE, from, limit)))).map(toSubscription);
  }

  async rotateSubscriptionSecret(id: bigint, secret: string, previousUntil: Date): Promise<Subscription | undefined> {
    const refused = unstorableText({ secret });
    if (refused) throw refused;
    const rotate = `UPDATE webhook_subscriptions SET previous_secret = secret, previous_secret_until = ?, secret = ? WHERE id = ? RETURNING ${SUBSCRIPTION}`;
    const [row] = await this.#driver.write(() => only<Row[]>(all(rotate, previousUntil.toISOString(), secret, id)), 'statement');
    return row && toSubscription(row);
  }

  async enableSubscription(id: bigint): Promise<Subscription | undefined> {
    const enable = `UPDATE webhook_subscriptions SET disabled_at = NULL, disabled_reason = NULL WHERE id = ? RETURNING ${SUBSCRIPTION}`;
    const [row] = await this.#driver.write(() => only<Row[]>(all(enable, id)), 'statement');
    return row && toSubscription(row);
  }

  deleteSubscription(id: bigint): Promise<boolean> {
    return this.#driver.write(function* () {
      // The subscription first, as recordAttempt locks it before a delivery.
      const deleted = (yield run('DELETE FROM webhook_subscriptions WHERE id = ?', id)) === 1;
      yield run('DELETE FROM webhook_deliveries WHERE subscription_id = ?', id);
      return deleted;
    }, 'transaction');
  }

  async listDeliveries(subscriptionId: bigint, limit: number): Promise<Delivery[] | undefined> {
    const rows = await this.#driver.read(function* () {
      if (((yield all('SELECT 1 AS one FROM webhook_subscriptions WHERE id = ?', subscriptionId)) as Row[]).length === 0) return undefined;
      return (yield all(`SELECT ${DELIVERY} FROM webhook_deliveries WHERE subscription_id = ? ORDER BY id DESC LIMIT CAST(? AS INTEGER)`, subscriptionId, limit)) as Row[];
    });
    return rows?.map((row) => record<Delivery>(row));
  }

  async claimDueDeliveries(now: Date, leaseMs: number, limit: number, perSubscription = limit, unanswered = perSubscription): Promise<ClaimedDelivery[]> {
    const at = now.toISOString();
    const chosen = [unanswered, perSubscription, at, at, perSubscription, at, limit];
    // A plain read first: an idle dispatcher's polls (or one whose due subscriptions are all at their cap) cost no write.
    if ((await this.#driver.read(() => only<Row[]>(all(this.#candidates, ...chosen)))).length === 0) return [];
    const until = new Date(now.getTime() + leaseMs).toISOString();
    const claim = this.#claim;
    return this.#driver.write(function* () {
      const rows = ((yield all(claim, until, ...chosen, at, at)) as Row[]).map((row) => record<ClaimedDelivery & { due: string }>(row));
      const targets = new Map<bigint, Row | undefined>();
      for (const { subscriptionId: id } of rows) {
        if (!targets.has(id)) targets.set(id, ((yield all(TARGET, at, id)) as Row[])[0]);
      }
      // In due order; a delivery whose subscription was deleted meanwhile went with it.
      rows.sort((a, b) => (a.due !== b.due ? (a.due < b.due ? -1 : 1) : a.id < b.id ? -1 : 1));
      return rows.flatMap(({ due, ...delivery }) => {
        const target = targets.get(delivery.subscriptionId);
        return target ? [{ ...delivery, ...record<{ url: string; secret: string; previousSecret?: string }>(target) }] : [];
      });
    }, 'statement');
  }

  recordAttempt(outcome: AttemptOutcome): Promise<void> {
    outcome = withStorableDiagnostics(outcome);
    return this.#driver.write(function* () {
      if (outcome.responseStatus === undefined) yield run(UNANSWERED, outcome.id);
      else yield run(ANSWERED, outcome.at, outcome.id);
      // Only a pending delivery takes an outcome: one failed meanwhile (its subscription disabled) stays failed.
      const attempt = `UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, last_attempt_at = ?, last_response_status = ?,
        last_error = ?, next_attempt_at = ?, claimed_until = NULL WHERE id = ? AND status = 'pending' RETURNING subscription_id`;
      const [row] = (yield all(
        attempt,
        ...[outcome.result === 'retry' ? 'pending' : outcome.result, outcome.at, outcome.responseStatus ?? null],
        ...[outcome.result === 'delivered' ? null : (outcome.error ?? null), outcome.result === 'retry' ? outcome.nextAttemptAt : null, outcome.id],
      )) as { subscription_id: bigint }[];
      if (outcome.result !== 'failed' || !outcome.disableSubscription || !row) return;
      yield run('UPDATE webhook_subscriptions SET disabled_at = ?, disabled_reason = ? WHERE id = ?', outcome.at, outcome.disableSubscription, row.subscription_id);
      const failRest = `UPDATE webhook_deliveries SET status = 'failed', last_error = 'the subscription was disabled', next_attempt_at = NULL,
        last_attempt_at = coalesce(last_attempt_at, ?) WHERE subscription_id = ? AND status = 'pending'`;
      yield run(failRest, outcome.at, row.subscription_id);
    }, 'transaction');
  }

  async countPendingDeliveries(): Promise<number> {
    const [row] = await this.#driver.read(() => only<{ pending: bigint | number }[]>(all("SELECT count(*) AS pending FROM webhook_deliveries WHERE status = 'pending'")));
    return Number(row!.pending);
  }

  pruneDeliveries(deliveredBefore: Date, failedBefore: Date): Promise<number> {
    const prune = "DELETE FROM webhook_deliveries WHERE (status = 'delivered' AND last_attempt_at < ?) OR (status = 'failed' AND last_attempt_at < ?)";
    return this.#driver.write(() => only<number>(run(prune, deliveredBefore.toISOString(), failedBefore.toISOString())), 'statement');
  }

  ping(): Promise<void> {
    return this.#driver.ping();
  }

  close(): Promise<void> {
    return this.#driver.close();
  }

  #conditionally(event: WebhookEvent, id: bigint, precondition: Precondition | undefined, change: (current: PlantRecord) => [Statement, PlantRecord]): Promise<ConditionalWrite> {
    const origin = newOrigin();
    const context: [bigint, Precondition | undefined, string] = [id, precondition, this.#plantForUpdate];
    return this.#driver.write(() => conditionally(event, origin, context, change), event);
  }
}
