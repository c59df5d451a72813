// The repositories callers see, by concern, and their records; plants.ts, tokens.ts and webhooks.ts implement them over a driver.
import { isDeepStrictEqual } from 'node:util';
import type { components } from '../generated/openapi.ts';
import { exactJson, INT64_MAX, INT64_MIN } from '../int64.ts';
import type { SqlPlants } from './plants.ts';
import type { SqlStore } from './store.ts';
import type { SqlTokens } from './tokens.ts';
import type { SqlWebhooks } from './webhooks.ts';

/** A plant as stored: the spec's NewPlant, so a field added to openapi.yaml reaches every driver's types. */
export type PlantRecord = components['schemas']['NewPlant'];

export interface CreateResult {
  /** created: new row; unchanged: an identical plant was already stored; conflict: the id holds another plant. */
  outcome: 'created' | 'unchanged' | 'conflict';
  /** The plant as stored after the call (for a conflict: the untouched original). */
  stored: PlantRecord;
  /** Whether the write added webhook deliveries, when the driver knows. */
  eventWritten?: boolean;
}

export type PlantContent = Omit<PlantRecord, 'id'>;

/** A list of every plant field (plant-fields.ts, migrations): a field added to openapi.yaml fails the type check there, named. */
export type EveryPlantField<Value = true> = Record<keyof PlantContent, Value>;

export interface PageQuery {
  /** Only rows whose id is greater (keyset pagination: the page's cost does not grow with depth). */
  after?: bigint;
  limit: number;
  tag?: string;
}

/** A plant as stored, and the version its last change was given (the source of its ETag): never one it or another had before. */
export interface VersionedPlant {
  plant: PlantRecord;
  version: bigint;
}

/** Decides, against the plant as stored and its version, whether a conditional write may proceed. */
export type Precondition = (current: PlantRecord, version: bigint) => boolean;

export type ConditionalWrite =
  | ({ outcome: 'done'; eventWritten?: boolean } & VersionedPlant)
  | { outcome: 'missing' }
  | { outcome: 'precondition-failed'; current: PlantRecord; version: bigint };

/** A token as stored: `hint` is what a person may see of it (`pst_…abcd`); scope `*` grants every scope. */
export interface TokenRecord {
  id: number;
  name: string;
  hint: string;
  scopes: string[];
  createdAt: string;
  lastUsedAt?: string;
  expiresAt?: string;
  revokedAt?: string;
}

/** `hash` is the token's hex SHA-256: the store never holds a usable token. */
export type NewTokenRecord = Pick<TokenRecord, 'name' | 'hint' | 'expiresAt'> & { hash: string; scopes?: string[] };

/** The database cannot be reached right now (connection lost, refused, busy); the request may be retried. */
export class StoreUnavailableError extends Error {
  readonly statusCode = 503;

  constructor(cause: unknown) {
    super(`The store is unavailable: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'StoreUnavailableError';
  }
}

/** Text holding U+0000, which PostgreSQL cannot store: both drivers refuse it alike, so data stays movable between them. */
export class UnstorableTextError extends Error {
  readonly field: string;
  readonly statusCode = 400;

  constructor(field: string) {
    super(`The field "${field}" contains the NUL character (U+0000), which the store cannot hold.`);
    this.name = 'UnstorableTextError';
    this.field = field;
  }
}

/** The refusal for the first field of `fields` whose text holds U+0000; undefined when every one can be stored. */
export function unstorableText(fields: object): UnstorableTextError | undefined {
  // for...in rather than Object.entries: this runs on every write, and needs no array.
  for (const field in fields) {
    const value = (fields as Record<string, unknown>)[field];
    if (typeof value === 'string' && value.includes('\u0000')) return new UnstorableTextError(field);
  }
  return undefined;
}

export type WebhookEvent = components['schemas']['WebhookEvent'];
// Keyed by the contract's events, so that an event added to openapi.yaml fails the type check here.
const EVENTS: Record<WebhookEvent, true> = { 'plant.created': true, 'plant.replaced': true, 'plant.deleted': true };
export const WEBHOOK_EVENTS = Object.keys(EVENTS) as readonly WebhookEvent[];

export interface NewSubscription {
  url: string;
  events: readonly WebhookEvent[];
  /** The signing secret (`whsec_…`): kept, since every delivery is signed with it. */
  secret: string;
}

/** The contract's Webhook, as stored: when it was disabled rather than whether it is enabled. */
export type Subscription = Omit<components['schemas']['Webhook'], 'enabled'> & { disabledAt?: string };

/** The contract's WebhookDelivery; its id is the message id, sent as `webhook-id` on every attempt. */
export type Delivery = Omit<components['schemas']['WebhookDelivery'], 'id'> & { messageId: string };

/** A due delivery leased to one dispatcher, with what sending it needs; `previousSecret` signs too in a rotation. */
export type ClaimedDelivery = Pick<Delivery, 'messageId' | 'event' | 'attempts'> & {
  id: bigint;
  subscriptionId: bigint;
  payload: string;
  url: string;
  secret: string;
  previousSecret?: string;
  /** The W3C traceparent of the request that changed the plant, when it was traced. */
  traceparent?: string;
};

export type AttemptOutcome =
  | { id: bigint; at: string; result: 'delivered'; responseStatus: number }
  | { id: bigint; at: string; result: 'retry'; nextAttemptAt: string; responseStatus?: number; error?: string }
  | { id: bigint; at: string; result: 'failed'; responseStatus?: number; error?: string; disableSubscription?: string };

export class TokenNameTakenError extends Error {
  constructor(name: string) {
    super(`A token named "${name}" already exists; token names are unique.`);
  }
}

export class SubscriptionLimitError extends Error {
  constructor(max: number) {
    super(`The store already holds ${max} subscriptions, its limit.`);
  }
}

// The store's and the repositories' shapes are their implementations' (store.ts, plants.ts, tokens.ts, webhooks.ts), which fakes may stand in for.
export type PlantStore = Pick<SqlStore, keyof SqlStore>;
export type PlantRepository = Pick<SqlPlants, keyof SqlPlants>;
export type TokenRepository = Pick<SqlTokens, keyof SqlTokens>;
export type WebhookRepository = Pick<SqlWebhooks, keyof SqlWebhooks>;

/** The inclusive lowest id of the page after `after`; undefined when no id can follow it. */
export function pageStart(after?: bigint): bigint | undefined {
  if (after === undefined) return INT64_MIN;
  return after === INT64_MAX ? undefined : after + 1n;
}

/** The event body: the plant as JSON, its int64 id (and any int64 field added) written digit for digit. */
export function eventPayload({ id, name, tag, ...added }: PlantRecord): string {
  return exactJson({ id, name, tag, ...inKeyOrder(added) });
}

/** The same fields in the order of their names: the order a client sent them in must not change a payload or an ETag. */
function inKeyOrder<Fields extends object>(fields: Fields): Fields {
  return Object.fromEntries(Object.entries(fields).sort(([a], [b]) => (a < b ? -1 : 1))) as Fields;
}

/** The plant with this id and content; no key for a field it has no value for (so records compare and hash alike). */
export function plantWith(id: bigint, content: PlantContent): PlantRecord {
  const plant: PlantRecord = { id, ...content };
  for (const key of Object.keys(content) as (keyof PlantContent)[]) if (plant[key] === undefined) delete plant[key];
  return plant;
}

/** Equal in every field; a field set to undefined is the same as an absent one. */
export function samePlant(a: PlantRecord, b: PlantRecord): boolean {
  const fields = new Set([...Object.keys(a), ...Object.keys(b)] as (keyof PlantRecord)[]);
  return [...fields].every((field) => isDeepStrictEqual(a[field], b[field]));
}
