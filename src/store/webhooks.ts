// The webhooks repository: subscriptions, and the outbox of deliveries that plant changes write and dispatchers lease.
import { all, only, raw, record, Repository, run, sql, type EventOrigin, type Row, type Spelling, type Sql, type Steps } from './sql.ts';
import { eventPayload, pageStart, SubscriptionLimitError, unstorableText, type AttemptOutcome, type ClaimedDelivery, type Delivery, type PageQuery,
  type NewSubscription, type PlantRecord, type Subscription, type WebhookEvent } from './types.ts';

/** The subscriptions (`s`) that want the event. Its name is written into the SQL: SQLite re-prepares a statement whose LIKE pattern is bound. */
export function wanting(event: WebhookEvent): Sql {
  return raw(`s.disabled_at IS NULL AND (' ' || s.events || ' ') LIKE '% ${event} %'`);
}

/** An event's outbox rows, one per subscription that wants it; a message id (`msg_`, the event's key, the subscription's id) is the same on every attempt. */
export function outboxInsert(from: Sql, event: WebhookEvent, key: Sql, payload: Sql, at: Sql, traceparent: Sql): Sql {
  return sql`INSERT INTO webhook_deliveries (message_id, subscription_id, event, payload, created_at, status, next_attempt_at, traceparent)
    SELECT 'msg_' || ${key} || '_' || s.id, s.id, ${raw(`'${event}'`)}, ${payload}, ${at}, 'pending', ${at}, ${traceparent} FROM ${from} WHERE ${wanting(event)}`;
}

/** Writes the event's outbox rows; answers whether there were any. */
export function* emit(event: WebhookEvent, plant: PlantRecord, origin: EventOrigin): Steps<boolean> {
  if (!(yield { kind: 'wanted', event })) return false;
  const at = sql`${new Date().toISOString()}`;
  const insert = outboxInsert(raw('webhook_subscriptions s'), event, sql`${origin.key}`, sql`${eventPayload(plant)}`, at, sql`${origin.traceparent}`);
  return ((yield run(insert)) as number) > 0;
}

const SUBSCRIPTION = sql`id, url, events, created_at AS "createdAt", disabled_at AS "disabledAt", disabled_reason AS "disabledReason",
  previous_secret_until AS "previousSecretExpiresAt"`;
const DELIVERY = sql`message_id AS "messageId", event, status, attempts, created_at AS "createdAt", last_attempt_at AS "lastAttemptAt",
  last_response_status AS "lastResponseStatus", last_error AS "lastError", CASE WHEN status = 'pending' THEN next_attempt_at END AS "nextAttemptAt"`;
const CLAIMED = sql`id, message_id AS "messageId", event, payload, attempts, subscription_id AS "subscriptionId", traceparent, next_attempt_at AS due`;

/** A due delivery `x` whose lease, if any, has ended at `now`. */
function dueAs(x: string, now: string): Sql {
  const [status, due, until] = ['status', 'next_attempt_at', 'claimed_until'].map((column) => raw(`${x}.${column}`));
  return sql`${status} = 'pending' AND ${due} <= ${now} AND (${until} IS NULL OR ${until} <= ${now})`;
}

/** The due deliveries a claim may take, by the rules of docs/webhooks.md ("Sharing the sending slots"); `held` is materialized to read the index of leases. */
function candidates({ firstDeliveries }: Spelling, now: string, limit: number, perSubscription: number, unanswered: number): Sql {
  const first = firstDeliveries((y) => sql`${raw(y)}.subscription_id = s.id AND ${dueAs(y, now)}`, (y) => raw(`${y}.next_attempt_at, ${y}.id`), perSubscription);
  return sql`WITH queue AS (SELECT s.id AS subscription_id,
      CASE WHEN s.answered_at IS NULL THEN CAST(${unanswered} AS INTEGER) ELSE CAST(${perSubscription} AS INTEGER) END AS share,
      x.id, x.next_attempt_at AS due, row_number() OVER (PARTITION BY s.id ORDER BY x.next_attempt_at, x.id) AS place
      FROM webhook_subscriptions s ${first}),
    held AS MATERIALIZED (SELECT subscription_id, status FROM webhook_deliveries WHERE claimed_until > ${now}),
    leases AS (SELECT subscription_id, count(*) AS leased FROM held WHERE status = 'pending' GROUP BY subscription_id),
    allowed AS (SELECT q.id, q.place, coalesce(l.leased, 0) AS leased, row_number() OVER (ORDER BY q.place, q.due, q.id) AS turn
      FROM queue q LEFT JOIN leases l ON l.subscription_id = q.subscription_id WHERE q.place + coalesce(l.leased, 0) <= q.share)
    SELECT id FROM allowed WHERE turn <= CAST(${limit} AS INTEGER) OR (place = 1 AND leased = 0)`;
}

function toSubscription(row: Row): Subscription {
  const subscription = record<Subscription & { events: string }>(row);
  return { ...subscription, events: subscription.events.split(' ') as WebhookEvent[] };
}

/** Why an attempt failed partly quotes the receiver: a NUL in it is shown as U+FFFD rather than refused, which would leave the outcome unrecorded. */
function withStorableDiagnostics(outcome: AttemptOutcome): AttemptOutcome {
  if (outcome.result === 'delivered' || !unstorableText(outcome)) return outcome;
  const readable = (text: string | undefined) => text?.replaceAll('\u0000', '\ufffd');
  if (outcome.result === 'retry') return { ...outcome, error: readable(outcome.error) };
  return { ...outcome, error: readable(outcome.error), disableSubscription: readable(outcome.disableSubscription) };
}

export class SqlWebhooks extends Repository {
  async createSubscription({ url, events, secret }: NewSubscription, max: number): Promise<Subscription> {
    const refused = unstorableText({ url, secret });
    if (refused) throw refused;
    const lock = this.driver.spelling.takeTurns?.('subscription');
    // Stored only while fewer than `max` are: counted and inserted in one statement.
    const insert = all(sql`INSERT INTO webhook_subscriptions (url, events, secret, created_at)
      SELECT ${url}, ${events.join(' ')}, ${secret}, ${new Date().toISOString()} WHERE (SELECT count(*) FROM webhook_subscriptions) < CAST(${max} AS INTEGER)
      RETURNING ${SUBSCRIPTION}`);
    const [row] = await this.driver.write(function* () {
      // Two creates at the limit must not both see room: the second counts after the first commits.
      if (lock !== undefined) yield all(lock);
      return (yield insert) as Row[];
    }, 'transaction');
    if (!row) throw new SubscriptionLimitError(max);
    return toSubscription(row);
  }

  listSubscriptions({ after, limit }: Omit<PageQuery, 'tag'>): Promise<Subscription[]> {
    const from = pageStart(after);
    if (from === undefined) return Promise.resolve([]);
    const page = sql`SELECT ${SUBSCRIPTION} FROM webhook_subscriptions WHERE id >= ${from} ORDER BY id LIMIT CAST(${limit} AS INTEGER)`;
    return this.query(page, (rows) => (rows as Row[]).map(toSubscription));
  }

  async rotateSubscriptionSecret(id: bigint, secret: string, previousUntil: Date): Promise<Subscription | undefined> {
    const refused = unstorableText({ secret });
    if (refused) throw refused;
    return this.#changeSubscription(sql`previous_secret = secret, previous_secret_until = ${previousUntil.toISOString()}, secret = ${secret}`, id);
  }

  enableSubscription(id: bigint): Promise<Subscription | undefined> {
    return this.#changeSubscription(sql`disabled_at = NULL, disabled_reason = NULL`, id);
  }

  deleteSubscription(id: bigint): Promise<boolean> {
    return this.driver.write(function* () {
      // The subscription first, as recordAttempt locks it before a delivery.
      const deleted = (yield run(sql`DELETE FROM webhook_subscriptions WHERE id = ${id}`)) === 1;
      yield run(sql`DELETE FROM webhook_deliveries WHERE subscription_id = ${id}`);
      return deleted;
    }, 'transaction');
  }

  async listDeliveries(subscriptionId: bigint, limit: number): Promise<Delivery[] | undefined> {
    const rows = await this.driver.read(function* () {
      if (((yield all(sql`SELECT 1 AS one FROM webhook_subscriptions WHERE id = ${subscriptionId}`)) as Row[]).length === 0) return undefined;
      return (yield all(sql`SELECT ${DELIVERY} FROM webhook_deliveries WHERE subscription_id = ${subscriptionId} ORDER BY id DESC LIMIT CAST(${limit} AS INTEGER)`)) as Row[];
    });
    return rows?.map((row) => record<Delivery>(row));
  }

  /** Leases due deliveries until `now + leaseMs` (never one to two instances), each subscription up to its share. */
  async claimDueDeliveries(now: Date, leaseMs: number, limit: number, perSubscription = limit, unanswered = perSubscription): Promise<ClaimedDelivery[]> {
    const at = now.toISOString();
    const { spelling } = this.driver;
    const chosen = candidates(spelling, at, limit, perSubscription, unanswered);
    // A plain read first: an idle dispatcher's polls (or one whose due subscriptions are all at their cap) cost no write.
    if (await this.query(chosen, (rows) => (rows as Row[]).length === 0)) return [];
    const until = new Date(now.getTime() + leaseMs).toISOString();
    // Chosen without locks (a window locks no rows), so each is locked and tested again; CROSS JOIN makes SQLite look it up by id.
    const claim = all(sql`UPDATE webhook_deliveries SET claimed_until = ${until} WHERE id IN (
      SELECT w.id FROM (${chosen}) c CROSS JOIN webhook_deliveries w WHERE w.id = c.id AND ${dueAs('w', at)}${spelling.skipLocked('w')}) RETURNING ${CLAIMED}`);
    return this.driver.write(function* () {
      const rows = ((yield claim) as Row[]).map((row) => record<ClaimedDelivery & { due: string }>(row));
      const targets = new Map<bigint, Row | undefined>();
      for (const { subscriptionId: id } of rows) {
        // Where it goes and what signs it: the previous secret too while its overlap lasts.
        const target = sql`SELECT url, secret, CASE WHEN previous_secret_until > ${at} THEN previous_secret END AS "previousSecret" FROM webhook_subscriptions WHERE id = ${id}`;
        if (!targets.has(id)) targets.set(id, ((yield all(target)) as Row[])[0]);
      }
      // In due order; a delivery whose subscription was deleted meanwhile went with it.
      rows.sort((a, b) => (a.due !== b.due ? (a.due < b.due ? -1 : 1) : a.id < b.id ? -1 : 1));
      return rows.flatMap(({ due, ...delivery }) => {
        const target = targets.get(delivery.subscriptionId);
        return target ? [{ ...delivery, ...record<{ url: string; secret: string; previousSecret?: string }>(target) }] : [];
      });
    }, 'statement');
  }

  recordAttempt(attempt: AttemptOutcome): Promise<void> {
    const outcome = withStorableDiagnostics(attempt);
    const { id, at, result } = outcome;
    // Whether the receiver answered (a claim's share follows it), written before the delivery: subscriptions are locked first (no deadlock).
    const ofPending = sql`(SELECT subscription_id FROM webhook_deliveries WHERE id = ${id} AND status = 'pending')`;
    const answered = outcome.responseStatus === undefined
      ? sql`UPDATE webhook_subscriptions SET answered_at = NULL WHERE id = ${ofPending} AND answered_at IS NOT NULL`
      : sql`UPDATE webhook_subscriptions SET answered_at = ${at} WHERE id = ${ofPending} AND answered_at IS NULL`;
    const error = result === 'delivered' ? null : (outcome.error ?? null);
    // Only a pending delivery takes an outcome: one failed meanwhile (its subscription disabled) stays failed.
    const record = all(sql`UPDATE webhook_deliveries SET status = ${result === 'retry' ? 'pending' : result}, attempts = attempts + 1, last_attempt_at = ${at},
      last_response_status = ${outcome.responseStatus ?? null}, last_error = ${error}, next_attempt_at = ${result === 'retry' ? outcome.nextAttemptAt : null},
      claimed_until = NULL WHERE id = ${id} AND status = 'pending' RETURNING subscription_id`);
    return this.driver.write(function* () {
      yield run(answered);
      const [row] = (yield record) as { subscription_id: bigint }[];
      if (result !== 'failed' || !outcome.disableSubscription || !row) return;
      const subscription = row.subscription_id;
      yield run(sql`UPDATE webhook_subscriptions SET disabled_at = ${at}, disabled_reason = ${outcome.disableSubscription} WHERE id = ${subscription}`);
      yield run(sql`UPDATE webhook_deliveries SET status = 'failed', last_error = 'the subscription was disabled', next_attempt_at = NULL,
        last_attempt_at = coalesce(last_attempt_at, ${at}) WHERE subscription_id = ${subscription} AND status = 'pending'`);
    }, 'transaction');
  }

  countPendingDeliveries(): Promise<number> {
    const pending = sql`SELECT count(*) AS pending FROM webhook_deliveries WHERE status = 'pending'`;
    return this.query(pending, (rows) => Number((rows as { pending: bigint | number }[])[0]!.pending));
  }

  pruneDeliveries(deliveredBefore: Date, failedBefore: Date): Promise<number> {
    const prune = sql`DELETE FROM webhook_deliveries
      WHERE (status = 'delivered' AND last_attempt_at < ${deliveredBefore.toISOString()}) OR (status = 'failed' AND last_attempt_at < ${failedBefore.toISOString()})`;
    return this.driver.write(() => only<number>(run(prune)), 'statement');
  }

  async #changeSubscription(change: Sql, id: bigint): Promise<Subscription | undefined> {
    const [row] = await this.driver.write(() => only<Row[]>(all(sql`UPDATE webhook_subscriptions SET ${change} WHERE id = ${id} RETURNING ${SUBSCRIPTION}`)), 'statement');
    return row && toSubscription(row);
  }
}
