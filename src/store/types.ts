// The repositories callers see, by concern, and their records; plants.ts, tokens.ts and webhooks.ts implement them over a driver.
import { isDeepStrictEqual } from 'node:util';
import type { components } from '../generated/openapi.ts';
import { exactJson, INT64_MAX, INT64_MIN } from '../int64.ts';

/** A plant as stored: the spec's NewPlant, so a field added to openapi.yaml reaches every driver's types. */
export type PlantRecord = components['schemas']['NewPlant'];

/** created: new row; unchanged: an identical plant was already stored; conflict: the id holds another plant. */
export type CreateOutcome = 'created' | 'unchanged' | 'conflict';

export interface CreateResult {
  outcome: CreateOutcome;
  /** The plant as stored after the call (for a conflict: the untouched original). */
  stored: PlantRecord;
  /** Set by a driver that knows it: whether the write added webhook deliveries (none without a subscriber). */
  eventWritten?: boolean;
}

/** The content of a plant: everything but its identity. */
export type PlantContent = Omit<PlantRecord, 'id'>;

/** A list of every plant field (plant-fields.ts, migrations): a field added to openapi.yaml fails the type check there, named. */
export type EveryPlantField<Value = true> = Record<keyof PlantContent, Value>;

export interface KeysetQuery {
  /** Only rows whose id is greater (keyset pagination: the page's cost does not grow with depth). */
  after?: bigint;
  limit: number;
}

export interface PageQuery extends KeysetQuery {
  tag?: string;
}

/** Decides, against the plant as stored right now, whether a conditional write may proceed. */
export type Precondition = (current: PlantRecord) => boolean;

export type ConditionalWrite =
  | { outcome: 'done'; plant: PlantRecord; eventWritten?: boolean }
  | { outcome: 'missing' }
  | { outcome: 'precondition-failed'; current: PlantRecord };

export interface NewTokenRecord {
  name: string;
  /** Hex SHA-256 of the token: the store never holds a usable token. */
  hash: string;
  /** What a person may see to recognise the token, e.g. `pst_…abcd`. */
  hint: string;
  /** Scopes granted; `*` grants every scope, present and future. Defaults to `*`. */
  scopes?: string[];
  /** ISO 8601 instant after which the token no longer works. */
  expiresAt?: string;
}

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

/** The database cannot be reached right now (connection lost, refused, busy); the request may be retried. */
export class StoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`The store is unavailable: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'StoreUnavailableError';
  }
}

/** Text holding U+0000, which PostgreSQL cannot store: both drivers refuse it alike, so data stays movable between them. */
export class UnstorableTextError extends Error {
  readonly field: string;

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

export const WEBHOOK_EVENTS = ['plant.created', 'plant.replaced', 'plant.deleted'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

export interface NewSubscription {
  url: string;
  events: readonly WebhookEvent[];
  /** The signing secret (`whsec_…`): kept, since every delivery is signed with it. */
  secret: string;
}

export interface Subscription {
  id: bigint;
  url: string;
  events: WebhookEvent[];
  createdAt: string;
  disabledAt?: string;
  disabledReason?: string;
  /** After a rotation: until when the previous secret signs alongside the current one. */
  previousSecretExpiresAt?: string;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface Delivery {
  /** The message id, sent as `webhook-id` on every attempt. */
  messageId: string;
  event: WebhookEvent;
  status: DeliveryStatus;
  attempts: number;
  createdAt: string;
  lastAttemptAt?: string;
  lastResponseStatus?: number;
  lastError?: string;
  nextAttemptAt?: string;
}

/** A due delivery, leased to one dispatcher until `claimedUntil`, with what sending it needs. */
export interface ClaimedDelivery {
  id: bigint;
  messageId: string;
  event: WebhookEvent;
  payload: string;
  attempts: number;
  url: string;
  secret: string;
  /** The secret a rotation replaced, while its overlap lasts: deliveries are signed by both. */
  previousSecret?: string;
  subscriptionId: bigint;
  /** The W3C traceparent of the request that changed the plant, when it was traced. */
  traceparent?: string;
}

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
  readonly max: number;

  constructor(max: number) {
    super(`The store already holds ${max} subscriptions, its limit.`);
    this.max = max;
  }
}

export interface PlantRepository {
  /** Inserts the plant unless its id exists; the database's uniqueness decides, never check-then-insert. */
  createPlant(plant: PlantRecord): Promise<CreateResult>;
  /** Plants in ascending id order. */
  listPlants(query: PageQuery): Promise<PlantRecord[]>;
  getPlant(id: bigint): Promise<PlantRecord | undefined>;
  /** Replaces the content; the precondition is checked in the same transaction as the write. */
  replacePlant(id: bigint, content: PlantContent, precondition?: Precondition): Promise<ConditionalWrite>;
  /** Deletes the plant; `plant` in the result is what was deleted. */
  deletePlant(id: bigint, precondition?: Precondition): Promise<ConditionalWrite>;
}

export interface TokenRepository {
  findTokenByHash(hash: string): Promise<TokenRecord | undefined>;
  /** Stores the token only when the store holds no token at all; answers whether it did. */
  createFirstToken(token: NewTokenRecord): Promise<boolean>;
  /** Rejects with TokenNameTakenError when the name is in use. */
  createToken(token: NewTokenRecord): Promise<TokenRecord>;
  /** Every token, revoked and expired ones included, oldest first. */
  listTokens(): Promise<TokenRecord[]>;
  /** Revokes the token with this name, or this id when `nameOrId` is all digits; undefined when none. */
  revokeToken(nameOrId: string): Promise<TokenRecord | undefined>;
  /** Records when tokens were last used; called in batches, never once per request. */
  recordTokenUse(uses: ReadonlyMap<number, string>): Promise<void>;
}

export interface WebhookRepository {
  /** Stores the subscription unless `max` are stored (SubscriptionLimitError), decided in the write: racing creates never store more. */
  createSubscription(subscription: NewSubscription, max: number): Promise<Subscription>;
  /** Subscriptions in ascending id order. */
  listSubscriptions(query: KeysetQuery): Promise<Subscription[]>;
  /** Makes `secret` the signing secret; the one it replaces signs too until `previousUntil`. Undefined when there is no such subscription. */
  rotateSubscriptionSecret(id: bigint, secret: string, previousUntil: Date): Promise<Subscription | undefined>;
  /** Enables the subscription again (events from now on are delivered); undefined when it does not exist. */
  enableSubscription(id: bigint): Promise<Subscription | undefined>;
  /** Removes the subscription and its deliveries; false when there was none. */
  deleteSubscription(id: bigint): Promise<boolean>;
  /** Newest first; undefined when the subscription does not exist. */
  listDeliveries(subscriptionId: bigint, limit: number): Promise<Delivery[] | undefined>;
  /** Leases due deliveries until `now + leaseMs` (never one to two instances), each subscription up to its share (webhooks.ts). */
  claimDueDeliveries(now: Date, leaseMs: number, limit: number, perSubscription?: number, unanswered?: number): Promise<ClaimedDelivery[]>;
  /** Records an attempt's outcome, and whether the receiver answered it (a `responseStatus`), for the subscription's share. */
  recordAttempt(outcome: AttemptOutcome): Promise<void>;
  /** Deliveries waiting to be sent or retried. */
  countPendingDeliveries(): Promise<number>;
  /** Deletes delivered deliveries last attempted before `deliveredBefore`, failed ones before `failedBefore`. */
  pruneDeliveries(deliveredBefore: Date, failedBefore: Date): Promise<number>;
}

/** The store: a repository per concern over one database. */
export interface PlantStore {
  readonly plants: PlantRepository;
  readonly tokens: TokenRepository;
  readonly webhooks: WebhookRepository;
  /** Resolves when the store answers a trivial query, and never writes; a driver whose storage failed a write rejects until it can take one. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

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
export function inKeyOrder<Fields extends object>(fields: Fields): Fields {
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
