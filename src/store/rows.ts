// Rows as both drivers read them, and their mapping to records. The drivers differ only in how a
// timestamp arrives (SQLite: ISO text; PostgreSQL: Date) and whether small integers are BigInt.
import type { ClaimedDelivery, Delivery, EveryPlantField, PlantRecord, Subscription, TokenRecord, WebhookEvent } from './types.ts';

export const TOKEN_COLUMNS = 'id, name, hint, scopes, created_at, last_used_at, expires_at, revoked_at';
export const SUBSCRIPTION_COLUMNS = 'id, url, events, created_at, disabled_at, disabled_reason';
export const DELIVERY_COLUMNS =
  'message_id, event, status, attempts, created_at, last_attempt_at, last_response_status, last_error, next_attempt_at';

/** Turns a driver's timestamp into ISO 8601 text. */
export type Iso<Time> = (time: Time) => string;
type Int = number | bigint;

// PlantTuple and plantFromTuple carry each of these fields; a field added to Plant in openapi.yaml fails here until they do.
// eslint-disable-next-line @typescript-eslint/no-unused-vars -- a compile-time check, never read at run time
const PLANT_TUPLE_FIELDS = { name: true, tag: true } satisfies EveryPlantField;

/**
 * A plant row read as an array (`id, name, tag`): drivers build arrays for less than objects keyed by column.
 * Its id is a bigint, or a number where the caller asked for compact ids (see ListedPlant).
 */
export type PlantTuple<Id extends bigint | number = bigint> = [id: Id, name: string, tag: string | null];

export interface TokenRow<Time> {
  id: Int;
  name: string;
  hint: string;
  scopes: string;
  created_at: Time;
  last_used_at: Time | null;
  expires_at: Time | null;
  revoked_at: Time | null;
}

export interface SubscriptionRow<Time> {
  id: bigint;
  url: string;
  events: string;
  created_at: Time;
  disabled_at: Time | null;
  disabled_reason: string | null;
}

export interface DeliveryRow<Time> {
  message_id: string;
  event: string;
  status: string;
  attempts: Int;
  created_at: Time;
  last_attempt_at: Time | null;
  last_response_status: Int | null;
  last_error: string | null;
  next_attempt_at: Time | null;
}

export interface ClaimedRow {
  id: bigint;
  message_id: string;
  event: string;
  payload: string;
  attempts: Int;
  subscription_id: bigint;
  traceparent: string | null;
  url: string;
  secret: string;
}

export function plantFromTuple<Id extends bigint | number = bigint>([id, name, tag]: PlantTuple<Id>): Omit<PlantRecord, 'id'> & { id: Id } {
  return tag === null ? { id, name } : { id, name, tag };
}

export function toToken<Time>(row: TokenRow<Time>, iso: Iso<Time>): TokenRecord {
  return {
    id: Number(row.id),
    name: row.name,
    hint: row.hint,
    scopes: row.scopes.split(' '),
    createdAt: iso(row.created_at),
    ...(row.last_used_at !== null && { lastUsedAt: iso(row.last_used_at) }),
    ...(row.expires_at !== null && { expiresAt: iso(row.expires_at) }),
    ...(row.revoked_at !== null && { revokedAt: iso(row.revoked_at) }),
  };
}

export function toSubscription<Time>(row: SubscriptionRow<Time>, iso: Iso<Time>): Subscription {
  return {
    id: row.id,
    url: row.url,
    events: row.events.split(' ') as WebhookEvent[],
    createdAt: iso(row.created_at),
    ...(row.disabled_at !== null && { disabledAt: iso(row.disabled_at) }),
    ...(row.disabled_reason !== null && { disabledReason: row.disabled_reason }),
  };
}

export function toDelivery<Time>(row: DeliveryRow<Time>, iso: Iso<Time>): Delivery {
  return {
    messageId: row.message_id,
    event: row.event as WebhookEvent,
    status: row.status as Delivery['status'],
    attempts: Number(row.attempts),
    createdAt: iso(row.created_at),
    ...(row.last_attempt_at !== null && { lastAttemptAt: iso(row.last_attempt_at) }),
    ...(row.last_response_status !== null && { lastResponseStatus: Number(row.last_response_status) }),
    ...(row.last_error !== null && { lastError: row.last_error }),
    ...(row.next_attempt_at !== null && row.status === 'pending' && { nextAttemptAt: iso(row.next_attempt_at) }),
  };
}

export function toClaimed(row: ClaimedRow): ClaimedDelivery {
  return {
    id: row.id,
    messageId: row.message_id,
    event: row.event as WebhookEvent,
    payload: row.payload,
    attempts: Number(row.attempts),
    subscriptionId: row.subscription_id,
    url: row.url,
    secret: row.secret,
    ...(row.traceparent !== null && { traceparent: row.traceparent }),
  };
}
