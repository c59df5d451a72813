// PlantStore on an embedded SQLite file through node:sqlite.
// Durability: WAL with synchronous=FULL, so an acknowledged write survives power loss.
// Throughput: writes that arrive in the same turn of the event loop share one transaction
// (group commit), so many writes pay for one fsync. One failing write does not take the others in
// its batch down with it: a write that makes more than one change runs in its own savepoint, and one
// that makes a single change in a single statement needs none, since a failing statement undoes itself.
// Never blocking: the synchronous driver would freeze the whole event loop inside busy_timeout while
// another process holds the write lock, so once open the connection has busy_timeout 0 and a batch that
// finds the lock taken waits on timers (reads meanwhile go on: WAL readers need no lock), up to
// LOCK_WAIT_MS per write, then fails as StoreUnavailableError (503). A full disk (or any I/O error) fails
// the batch as StoreUnavailableError too, and ping() rejects until a write succeeds again.
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { migrations } from './migrations.ts';
import { outboxTrace } from './outbox-trace.ts';
import {
  DELIVERY_COLUMNS,
  SUBSCRIPTION_COLUMNS,
  TOKEN_COLUMNS,
  plantFromTuple,
  toClaimed,
  toDelivery,
  toSubscription,
  toToken,
  type ClaimedRow,
  type DeliveryRow,
  type PlantTuple,
  type SubscriptionRow,
  type TokenRow,
} from './rows.ts';
import {
  eventPayload,
  pageStart,
  plantWith,
  samePlant,
  type AttemptOutcome,
  type ClaimedDelivery,
  type ConditionalWrite,
  type Delivery,
  type NewSubscription,
  type Subscription,
  type WebhookEvent,
  type CreateResult,
  type EveryPlantField,
  type NewTokenRecord,
  type ListedPlant,
  type PageQuery,
  type PlantContent,
  type PlantRecord,
  type PlantStore,
  type Precondition,
  type TokenRecord,
  StoreUnavailableError,
  TokenNameTakenError,
} from './types.ts';

// Timestamps are stored as ISO 8601 text already.
const iso = (time: string): string => time;

interface PendingWrite {
  work: () => unknown;
  /** Run in a savepoint of its own, so that failing part-way undoes its changes and no other write's. */
  isolated: boolean;
  resolve: (result: unknown) => void;
  reject: (error: unknown) => void;
  /** performance.now() after which waiting for another process's lock gives up. */
  deadline: number;
  /** Set by the commit: what the work returned, or the error it threw (its own failure; the batch's other writes stand). */
  value: unknown;
  failed: boolean;
}

/** How long a write waits for a write lock another process holds (documented: README, openapi.yaml's 503). */
export const LOCK_WAIT_MS = 5_000;
/** Waits between tries for the lock: short at first (most holders commit within milliseconds), then capped. */
const FIRST_RETRY_MS = 1;
const MAX_RETRY_MS = 50;
/** At boot, before the service listens, blocking on a lock freezes nothing: migrations may wait this long. */
const BOOT_BUSY_TIMEOUT_MS = 5_000;

export interface SqliteOptions {
  /** Told when writes find the write lock held by another process, once per wait. */
  onLockWait?: (error: Error) => void;
}

const DUE = "status = 'pending' AND next_attempt_at <= :now AND (claimed_until IS NULL OR claimed_until <= :now)";

const COMPACT_ID = `CASE WHEN id BETWEEN ${-Number.MAX_SAFE_INTEGER} AND ${Number.MAX_SAFE_INTEGER} THEN id ELSE CAST(id AS TEXT) END`;

const SQL = {
  insertPlant: 'INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING',
  selectPlant: 'SELECT id, name, tag FROM plants WHERE id = ?',
  updatePlant: 'UPDATE plants SET name = ?, tag = ? WHERE id = ?',
  deletePlant: 'DELETE FROM plants WHERE id = ?',
  // Every LIMIT here takes an expression rather than a bare `?`: SQLite re-prepares a statement whose bare
  // LIMIT parameter is bound (its planner may use the value), which was 7% of the CPU time of a page of 100 (perf).
  pageAll: 'SELECT id, name, tag FROM plants WHERE id >= ? ORDER BY id LIMIT CAST(? AS INTEGER)',
  pageByTag: 'SELECT id, name, tag FROM plants WHERE tag = ? AND id >= ? ORDER BY tag, id LIMIT CAST(? AS INTEGER)',
  // The same pages with compact ids, where some id lies beyond ±(2^53 - 1): those ids come as text (see #compactPage).
  compactPageAll: `SELECT ${COMPACT_ID}, name, tag FROM plants WHERE id >= ? ORDER BY id LIMIT CAST(? AS INTEGER)`,
  compactPageByTag: `SELECT ${COMPACT_ID}, name, tag FROM plants WHERE tag = ? AND id >= ? ORDER BY tag, id LIMIT CAST(? AS INTEGER)`,
  selectTokenByHash: `SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = ?`,
  insertToken: `INSERT INTO api_tokens (name, token_hash, hint, scopes, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (name) DO NOTHING RETURNING ${TOKEN_COLUMNS}`,
  touchToken: 'UPDATE api_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)',
  hasSubscriber: `SELECT 1 FROM webhook_subscriptions
    WHERE disabled_at IS NULL AND instr(' ' || events || ' ', ' ' || ? || ' ') > 0 LIMIT 1`,
  // One outbox row per enabled subscription to the event, written in the plant's own transaction.
  emitEvent: `INSERT INTO webhook_deliveries (message_id, subscription_id, event, payload, created_at, status, next_attempt_at, traceparent)
    SELECT ? || id, id, ?, ?, ?, 'pending', ?, ? FROM webhook_subscriptions
     WHERE disabled_at IS NULL AND instr(' ' || events || ' ', ' ' || ? || ' ') > 0`,
};

/**
 * How a prepared statement reads: integers as BigInt, so that int64 ids stay exact (`bigints`), the
 * same with rows as arrays (`tuples`), rows as arrays with integers as numbers, which node:sqlite refuses
 * with ERR_OUT_OF_RANGE beyond ±(2^53 - 1) (`numberTuples`), or a write whose changes and last row id come
 * as numbers (`counts`).
 */
type StatementReads = 'bigints' | 'tuples' | 'numberTuples' | 'counts';

export class SqliteStore implements PlantStore {
  readonly #db: DatabaseSync;
  /** Statements prepared once per SQL text and way of reading. */
  readonly #prepared: Record<StatementReads, Map<string, StatementSync>> = {
    bigints: new Map(),
    tuples: new Map(),
    numberTuples: new Map(),
    counts: new Map(),
  };
  readonly #options: SqliteOptions;
  #pending: PendingWrite[] = [];
  /** The write loop, while writes are queued or waiting for the lock; close() awaits it. */
  #writer: Promise<void> | undefined;
  #closed = false;
  /** The storage fault (full disk, I/O error) that failed the last batch; cleared by the next commit. */
  #writeFault: unknown;
  /**
   * Whether an enabled subscription wants each event, as read in the batch under way: asked once per batch rather
   * than once per write. Holding the write lock, no other process can change it meanwhile; this one's subscription
   * writes clear it (a stale "no" would lose events; a stale "yes" only costs a savepoint, as the outbox insert
   * selects the subscriptions itself).
   */
  readonly #subscribed = new Map<WebhookEvent, boolean>();
  /** False once a page with compact ids met an id beyond ±(2^53 - 1): see #compactPage. */
  #pageIdsFitNumbers = true;

  constructor(path: string, options: SqliteOptions = {}) {
    this.#options = options;
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.#db = new DatabaseSync(path);
    // busy_timeout first: switching a new file to WAL takes a lock that another process may hold.
    this.#db.exec(`
      PRAGMA busy_timeout = ${BOOT_BUSY_TIMEOUT_MS};
      PRAGMA journal_mode = WAL;
      PRAGMA synchronous = FULL;
    `);
    try {
      applyMigrations(this.#db);
    } catch (error) {
      this.#db.close();
      throw error;
    }
    // From here on a lock is waited for on timers, never inside SQLite (see the top of this file).
    this.#db.exec('PRAGMA busy_timeout = 0');
  }

  createPlant(plant: PlantRecord): Promise<CreateResult> {
    return this.#plantWrite('plant.created', (emit) => {
      const { changes } = this.#countingSql(SQL.insertPlant).run(plant.id, plant.name, plant.tag ?? null);
      if (changes === 1) return { outcome: 'created', stored: plant, eventWritten: emit(plant) };
      const stored = this.#selectPlant(plant.id)!;
      return { outcome: samePlant(stored, plant) ? 'unchanged' : 'conflict', stored };
    });
  }

  listPlants(query: PageQuery & { compactIds: true }): Promise<ListedPlant[]>;
  listPlants(query: PageQuery & { compactIds?: false }): Promise<PlantRecord[]>;
  async listPlants({ after, tag, limit, compactIds }: PageQuery & { compactIds?: boolean }): Promise<ListedPlant[]> {
    // An inclusive bound, so that "from the very first id" needs no value below int64.
    const from = pageStart(after);
    if (from === undefined) return [];
    if (compactIds) return await this.#read(() => this.#compactPage(from, tag, limit));
    const rows = await this.#read(() => this.#pageRows(SQL.pageAll, SQL.pageByTag, 'tuples', from, tag, limit));
    return (rows as PlantTuple[]).map(plantFromTuple);
  }

  getPlant(id: bigint): Promise<PlantRecord | undefined> {
    // Tried once at once, outside #read's async retry loop: a get then costs no async function, closure or
    // clock read (a read fails only in the rare cases #read is for, and then goes through it from the start).
    try {
      return Promise.resolve(this.#selectPlant(id));
    } catch {
      return this.#read(() => this.#selectPlant(id));
    }
  }

  /**
   * A page with compact ids: read with integers as numbers while every id fits (see #numberPage). From the
   * first page that meets an id beyond ±(2^53 - 1), pages select the id through a CASE that hands such ids
   * over as text, made exact BigInts (13k more instructions per page of 100 under callgrind than numbers
   * alone, still 33k fewer than BigInts).
   */
  #compactPage(from: bigint, tag: string | undefined, limit: number): ListedPlant[] {
    if (this.#pageIdsFitNumbers) {
      const plants = this.#numberPage(from, tag, limit);
      if (plants !== undefined) return plants;
      this.#pageIdsFitNumbers = false;
    }
    const rows = this.#pageRows(SQL.compactPageAll, SQL.compactPageByTag, 'numberTuples', from, tag, limit) as [number | string, string, string | null][];
    return rows.map(([id, name, tag]) => plantFromTuple([typeof id === 'string' ? BigInt(id) : id, name, tag]));
  }

  /**
   * The page with its ids as numbers, or undefined when one of them is not exact as a number: node:sqlite
   * refuses integers beyond ±(2^53 - 1) with ERR_OUT_OF_RANGE, but not -2^63, whose magnitude its check
   * cannot compute. Built in place rather than by Array#map (its builtin, a new array and a keyed store per
   * plant were about 3% of a page's instructions under callgrind).
   */
  #numberPage(from: bigint, tag: string | undefined, limit: number): ListedPlant[] | undefined {
    let rows: (PlantTuple<number> | ListedPlant)[];
    try {
      rows = this.#pageRows(SQL.pageAll, SQL.pageByTag, 'numberTuples', from, tag, limit) as PlantTuple<number>[];
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ERR_OUT_OF_RANGE') return undefined;
      throw error;
    }
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i] as PlantTuple<number>;
      if (!Number.isSafeInteger(row[0])) return undefined;
      rows[i] = plantFromTuple(row);
    }
    return rows as ListedPlant[];
  }

  /** A page's rows as arrays, by the query for all plants or the one for a tag, read as `reads` says. */
  #pageRows(all: string, byTag: string, reads: 'tuples' | 'numberTuples', from: bigint, tag: string | undefined, limit: number): unknown[] {
    return tag === undefined ? this.#statement(all, reads).all(from, limit) : this.#statement(byTag, reads).all(tag, from, limit);
  }

  replacePlant(id: bigint, content: PlantContent, precondition?: Precondition): Promise<ConditionalWrite> {
    return this.#plantWrite('plant.replaced', (emit) =>
      this.#conditionally(id, precondition, () => {
        this.#sql(SQL.updatePlant).run(content.name, content.tag ?? null, id);
        const plant = plantWith(id, content);
        return { outcome: 'done', plant, eventWritten: emit(plant) };
      }),
    );
  }

  deletePlant(id: bigint, precondition?: Precondition): Promise<ConditionalWrite> {
    return this.#plantWrite('plant.deleted', (emit) =>
      this.#conditionally(id, precondition, (current) => {
        this.#sql(SQL.deletePlant).run(id);
        return { outcome: 'done', plant: current, eventWritten: emit(current) };
      }),
    );
  }

  async findTokenByHash(hash: string): Promise<TokenRecord | undefined> {
    const row = (await this.#read(() => this.#sql(SQL.selectTokenByHash).get(hash))) as TokenRow<string> | undefined;
    return row && toToken(row, iso);
  }

  createFirstToken(token: NewTokenRecord): Promise<boolean> {
    return this.#write(() => {
      if (this.#sql('SELECT 1 FROM api_tokens LIMIT 1').get()) return false;
      this.#insertToken(token);
      return true;
    });
  }

  createToken(token: NewTokenRecord): Promise<TokenRecord> {
    return this.#write(() => this.#insertToken(token));
  }

  async listTokens(): Promise<TokenRecord[]> {
    const rows = (await this.#read(() => this.#sql(`SELECT ${TOKEN_COLUMNS} FROM api_tokens ORDER BY id`).all())) as unknown as TokenRow<string>[];
    return rows.map((row) => toToken(row, iso));
  }

  revokeToken(nameOrId: string): Promise<TokenRecord | undefined> {
    const column = /^\d+$/.test(nameOrId) ? 'id' : 'name';
    return this.#write(() => {
      const row = this.#sql(
          `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE ${column} = ? RETURNING ${TOKEN_COLUMNS}`,
        )
        .get(new Date().toISOString(), nameOrId) as TokenRow<string> | undefined;
      return row && toToken(row, iso);
    });
  }

  recordTokenUse(uses: ReadonlyMap<number, string>): Promise<void> {
    return this.#write(() => {
      for (const [id, at] of uses) this.#sql(SQL.touchToken).run(at, id, at);
    });
  }

  createSubscription(subscription: NewSubscription): Promise<Subscription> {
    return this.#write(() => {
      const row = this.#sql(
        `INSERT INTO webhook_subscriptions (url, events, secret, created_at) VALUES (?, ?, ?, ?) RETURNING ${SUBSCRIPTION_COLUMNS}`,
      ).get(subscription.url, subscription.events.join(' '), subscription.secret, new Date().toISOString());
      this.#subscribed.clear();
      return toSubscription(row as unknown as SubscriptionRow<string>, iso);
    });
  }

  async listSubscriptions(): Promise<Subscription[]> {
    const rows = await this.#read(() => this.#sql(`SELECT ${SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions ORDER BY id`).all());
    return (rows as unknown as SubscriptionRow<string>[]).map((row) => toSubscription(row, iso));
  }

  deleteSubscription(id: bigint): Promise<boolean> {
    return this.#write(() => {
      this.#sql('DELETE FROM webhook_deliveries WHERE subscription_id = ?').run(id);
      const deleted = Number(this.#sql('DELETE FROM webhook_subscriptions WHERE id = ?').run(id).changes) === 1;
      this.#subscribed.clear();
      return deleted;
    });
  }

  async listDeliveries(subscriptionId: bigint, limit: number): Promise<Delivery[] | undefined> {
    const rows = await this.#read(() => {
      if (!this.#sql('SELECT 1 FROM webhook_subscriptions WHERE id = ?').get(subscriptionId)) return undefined;
      return this.#sql(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE subscription_id = ? ORDER BY id DESC LIMIT CAST(? AS INTEGER)`).all(
        subscriptionId,
        limit,
      );
    });
    if (!rows) return undefined;
    return (rows as unknown as DeliveryRow<string>[]).map((row) => toDelivery(row, iso));
  }

  async claimDueDeliveries(now: Date, leaseMs: number, limit: number): Promise<ClaimedDelivery[]> {
    const at = now.toISOString();
    // A plain read first: an idle dispatcher's polls must not cost a write transaction and an fsync each.
    if (!(await this.#read(() => this.#sql(`SELECT 1 FROM webhook_deliveries WHERE ${DUE} LIMIT 1`).get({ now: at })))) return [];
    return this.#write(() => {
      const claimed = this.#sql(
        `UPDATE webhook_deliveries SET claimed_until = :until WHERE id IN (
           SELECT id FROM webhook_deliveries WHERE ${DUE} ORDER BY next_attempt_at, id LIMIT CAST(:limit AS INTEGER))
         RETURNING id`,
      ).all({ now: at, until: new Date(now.getTime() + leaseMs).toISOString(), limit }) as { id: bigint }[];
      if (claimed.length === 0) return [];
      const rows = this.#sql(
        `SELECT d.id, d.message_id, d.event, d.payload, d.attempts, d.subscription_id, d.traceparent, s.url, s.secret
           FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
          WHERE d.id IN (SELECT value FROM json_each(?)) ORDER BY d.next_attempt_at, d.id`,
      ).all(JSON.stringify(claimed.map((row) => String(row.id))));
      return (rows as unknown as ClaimedRow[]).map(toClaimed);
    });
  }

  recordAttempt(outcome: AttemptOutcome): Promise<void> {
    return this.#write(() => {
      const status = outcome.result === 'retry' ? 'pending' : outcome.result;
      const nextAttemptAt = outcome.result === 'retry' ? outcome.nextAttemptAt : null;
      const error = outcome.result === 'delivered' ? null : (outcome.error ?? null);
      // Only a pending delivery takes an outcome: one failed meanwhile (its subscription disabled) stays failed.
      const row = this.#sql(
        `UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, last_attempt_at = ?, last_response_status = ?,
           last_error = ?, next_attempt_at = ?, claimed_until = NULL WHERE id = ? AND status = 'pending' RETURNING subscription_id`,
      ).get(status, outcome.at, outcome.responseStatus ?? null, error, nextAttemptAt, outcome.id) as
        | { subscription_id: bigint }
        | undefined;
      if (outcome.result !== 'failed' || !outcome.disableSubscription || !row) return;
      this.#sql('UPDATE webhook_subscriptions SET disabled_at = ?, disabled_reason = ? WHERE id = ?')
        .run(outcome.at, outcome.disableSubscription, row.subscription_id);
      this.#subscribed.clear();
      this.#sql(
          `UPDATE webhook_deliveries SET status = 'failed', last_error = 'the subscription was disabled', next_attempt_at = NULL,
             last_attempt_at = coalesce(last_attempt_at, ?) WHERE subscription_id = ? AND status = 'pending'`,
        )
        .run(outcome.at, row.subscription_id);
    });
  }

  async countPendingDeliveries(): Promise<number> {
    const row = (await this.#read(() => this.#sql("SELECT count(*) AS pending FROM webhook_deliveries WHERE status = 'pending'").get())) as {
      pending: bigint;
    };
    return Number(row.pending);
  }

  pruneDeliveries(deliveredBefore: Date, failedBefore: Date): Promise<number> {
    return this.#write(() => {
      const { changes } = this.#sql(
          `DELETE FROM webhook_deliveries
            WHERE (status = 'delivered' AND last_attempt_at < ?) OR (status = 'failed' AND last_attempt_at < ?)`,
        )
        .run(deliveredBefore.toISOString(), failedBefore.toISOString());
      return Number(changes);
    });
  }

  async ping(): Promise<void> {
    this.#sql('SELECT 1').get();
    // After a full disk, ready again only once a write succeeds: a balancer sends no writes to find out.
    if (this.#writeFault !== undefined) await this.#write(() => this.#probeWrite());
  }

  async close(): Promise<void> {
    this.#closed = true;
    // Writes issued before close are settled first (committed, or failed after their wait for the lock).
    await this.#writer;
    if (!this.#db.isOpen) return;
    // Fold the WAL into the database file, so a clean stop leaves one self-contained file. Best effort: with
    // another process's lock held (busy_timeout 0 skips it) or the disk full the WAL stays, and is folded later.
    try {
      this.#db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    } catch (error) {
      if (!isBusy(error) && !isStorageFault(error)) throw error;
    }
    this.#db.close();
  }

  #insertToken(token: NewTokenRecord): TokenRecord {
    const row = this.#sql(SQL.insertToken).get(
      token.name,
      token.hash,
      token.hint,
      (token.scopes ?? ['*']).join(' '),
      token.expiresAt ?? null,
      new Date().toISOString(),
    ) as TokenRow<string> | undefined;
    if (!row) throw new TokenNameTakenError(token.name);
    return toToken(row, iso);
  }

  /** A write that needs new space on disk (WAL frames) yet leaves nothing behind. */
  #probeWrite(): void {
    this.#sql("INSERT INTO schema_migrations (version, name, applied_at) VALUES (-1, 'write probe', '')").run();
    this.#sql('DELETE FROM schema_migrations WHERE version = -1').run();
  }

  #sql(text: string): StatementSync {
    return this.#statement(text, 'bigints');
  }

  /** A write whose counts come as numbers: run() made two BigInts per call for its changes and last row id. */
  #countingSql(text: string): StatementSync {
    return this.#statement(text, 'counts');
  }

  /** A plant query whose rows come as [id, name, tag]: node:sqlite builds arrays in half the time of objects. */
  #plantSql(text: string): StatementSync {
    return this.#statement(text, 'tuples');
  }

  #statement(text: string, reads: StatementReads): StatementSync {
    const made = this.#prepared[reads];
    let statement = made.get(text);
    if (!statement) {
      statement = this.#db.prepare(text);
      statement.setReadBigInts(reads === 'bigints' || reads === 'tuples');
      statement.setReturnArrays(reads === 'tuples' || reads === 'numberTuples');
      made.set(text, statement);
    }
    return statement;
  }

  /**
   * A plant write changes one row in one statement, plus its outbox rows when its event has subscribers. Most
   * writes have none: then the write is that one statement, which undoes itself if it fails, and needs no
   * savepoint; with subscribers, a savepoint keeps the plant and its outbox rows together.
   */
  #plantWrite<T>(event: WebhookEvent, change: (emit: (plant: PlantRecord) => boolean) => T): Promise<T> {
    const trace = outboxTrace();
    return this.#write(() => {
      if (!this.#hasSubscriber(event)) return change(noEvent);
      return this.#inSavepoint(() => change((plant) => this.#emit(event, plant, trace)));
    }, false);
  }

  #hasSubscriber(event: WebhookEvent): boolean {
    let subscribed = this.#subscribed.get(event);
    if (subscribed === undefined) {
      subscribed = this.#sql(SQL.hasSubscriber).get(event) !== undefined;
      this.#subscribed.set(event, subscribed);
    }
    return subscribed;
  }

  /** Writes the event's outbox rows, one per subscription to it; answers whether there were any. */
  #emit(event: WebhookEvent, plant: PlantRecord, traceparent: string | null): boolean {
    const now = new Date().toISOString();
    const { changes } = this.#sql(SQL.emitEvent).run(`msg_${randomUUID().replaceAll('-', '')}_`, event, eventPayload(plant), now, now, traceparent, event);
    return Number(changes) > 0;
  }

  #selectPlant(id: bigint): PlantRecord | undefined {
    const row = this.#plantSql(SQL.selectPlant).get(id) as PlantTuple | undefined;
    return row && plantFromTuple(row);
  }

  #conditionally(id: bigint, precondition: Precondition | undefined, write: (current: PlantRecord) => ConditionalWrite): ConditionalWrite {
    const current = this.#selectPlant(id);
    if (!current) return { outcome: 'missing' };
    if (precondition && !precondition(current)) return { outcome: 'precondition-failed', current };
    return write(current);
  }

  /** Runs a read; in the rare case WAL readers meet SQLITE_BUSY (another process recovering the WAL), retries on timers. */
  async #read<T>(query: () => T): Promise<T> {
    const deadline = performance.now() + LOCK_WAIT_MS;
    for (let delay = FIRST_RETRY_MS; ; delay = Math.min(delay * 2, MAX_RETRY_MS)) {
      try {
        return query();
      } catch (error) {
        if (isStorageFault(error)) throw new StoreUnavailableError(error);
        if (!isBusy(error)) throw error;
        if (performance.now() >= deadline) throw new StoreUnavailableError(error);
      }
      await sleep(delay);
    }
  }

  /**
   * Queues the work for the next group commit; resolves with its result once it is on disk. Only a work that
   * makes at most one change, in one statement, or opens its own savepoint, may pass `isolated` false.
   */
  #write<T>(work: () => T, isolated = true): Promise<T> {
    if (this.#closed) return Promise.reject(new Error('The store is closed.'));
    return new Promise((resolve, reject) => {
      this.#pending.push({
        work,
        isolated,
        resolve: resolve as (result: unknown) => void,
        reject,
        deadline: performance.now() + LOCK_WAIT_MS,
        value: undefined,
        failed: false,
      });
      this.#writer ??= this.#writeLoop();
    });
  }

  /**
   * Commits queued writes batch after batch. A batch that finds the lock taken stays queued, in order, and
   * writes that arrive meanwhile join it; each write gives up once its own deadline has passed.
   */
  async #writeLoop(): Promise<void> {
    // The writes of this turn of the event loop (and of the turns it takes to get here) form one batch.
    await new Promise(setImmediate);
    let delay = FIRST_RETRY_MS;
    let waiting = false;
    while (this.#pending.length > 0) {
      const batch = this.#pending;
      this.#pending = [];
      const busy = this.#commit(batch);
      if (!busy) break;
      if (!waiting) this.#options.onLockWait?.(busy as Error);
      waiting = true;
      const now = performance.now();
      const stillWaiting = batch.filter((write) => write.deadline > now);
      const failure = new StoreUnavailableError(busy);
      for (const write of batch) if (write.deadline <= now) write.reject(failure);
      // Writes issued while this batch waited follow it, so the order of writes is kept.
      this.#pending = stillWaiting.concat(this.#pending);
      if (this.#pending.length === 0) break;
      await sleep(Math.max(FIRST_RETRY_MS, Math.min(delay, this.#pending[0]!.deadline - now)));
      delay = Math.min(delay * 2, MAX_RETRY_MS);
    }
    this.#writer = undefined;
  }

  /** One transaction for the batch, settling each write; returns the SQLITE_BUSY error, the batch untouched, if the lock is taken. */
  #commit(batch: PendingWrite[]): unknown {
    try {
      this.#db.exec('BEGIN IMMEDIATE');
      // Other processes may have changed the subscriptions since the last batch.
      this.#subscribed.clear();
      for (const write of batch) this.#settle(write);
      this.#db.exec('COMMIT');
    } catch (error) {
      this.#rollBack();
      if (isBusy(error)) return error;
      // A full disk or an I/O error is the storage's, not the writes': 503, and not ready until a write succeeds.
      if (isStorageFault(error)) this.#writeFault = error;
      const failure = isStorageFault(error) ? new StoreUnavailableError(error) : error;
      for (const { reject } of batch) reject(failure);
      return undefined;
    }
    this.#writeFault = undefined;
    for (const { failed, value, resolve, reject } of batch) {
      if (failed) reject(value);
      else resolve(value);
    }
    return undefined;
  }

  #rollBack(): void {
    try {
      if (this.#db.isOpen && this.#db.isTransaction) this.#db.exec('ROLLBACK');
    } catch {
      // SQLite already rolled the transaction back (it does after some I/O errors); the batch fails either way.
    }
  }

  /** Runs one write of the batch: its own failure is its outcome, the storage's fails the whole batch. */
  #settle(write: PendingWrite): void {
    try {
      // Kept on the write itself: an array of outcome objects cost two allocations per write.
      write.value = write.isolated ? this.#inSavepoint(write.work) : write.work();
      write.failed = false;
    } catch (error) {
      // The storage failing is no single write's fault, and once SQLite has rolled the transaction back the
      // writes before this one are undone too: the whole batch fails.
      if (isBusy(error) || isStorageFault(error) || !this.#db.isTransaction) throw error;
      write.value = error;
      write.failed = true;
    }
  }

  /** Runs the work in a savepoint: if it throws, its changes are undone and the error passed on. */
  #inSavepoint<T>(work: () => T): T {
    // Prepared rather than exec'd: exec parses its SQL every time, and many writes run these.
    this.#sql('SAVEPOINT write').run();
    try {
      const value = work();
      this.#sql('RELEASE write').run();
      return value;
    } catch (error) {
      if (!isBusy(error) && !isStorageFault(error) && this.#db.isTransaction) {
        this.#sql('ROLLBACK TO write').run();
        this.#sql('RELEASE write').run();
      }
      throw error;
    }
  }
}

// The plant statements in SQL carry each of these fields; a field added to Plant in openapi.yaml fails
// here until they do (and a migration adds its column).
// eslint-disable-next-line @typescript-eslint/no-unused-vars -- a compile-time check, never read at run time
const PLANT_FIELDS_IN_SQL = { name: true, tag: true } satisfies EveryPlantField;

function noEvent(): boolean {
  return false;
}

const SQLITE_BUSY = 5;
const SQLITE_IOERR = 10;
const SQLITE_FULL = 13;

/** The primary result code of a node:sqlite error (its errcode is the extended one); 0 for other errors. */
function resultCode(error: unknown): number {
  return ((error as { errcode?: number })?.errcode ?? 0) & 0xff;
}

function isBusy(error: unknown): boolean {
  return resultCode(error) === SQLITE_BUSY;
}

/** A full disk (SQLITE_FULL) or an I/O error (SQLITE_IOERR_*, which is how some ENOSPC cases surface). */
function isStorageFault(error: unknown): boolean {
  const code = resultCode(error);
  return code === SQLITE_FULL || code === SQLITE_IOERR;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Applies pending migrations in one immediate transaction, so two processes starting together serialize. */
function applyMigrations(db: DatabaseSync): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL
  ) STRICT`);
  db.exec('BEGIN IMMEDIATE');
  try {
    const row = db.prepare('SELECT max(version) AS version FROM schema_migrations').get() as { version: number | null };
    const current = row.version ?? 0;
    const latest = migrations.at(-1)?.version ?? 0;
    if (current > latest) {
      throw new Error(`The database is at schema version ${current}, newer than this release knows (${latest}).`);
    }
    const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    for (const migration of migrations.filter((m) => m.version > current)) {
      db.exec(migration.sqlite);
      record.run(migration.version, migration.name, new Date().toISOString());
    }
    db.exec('COMMIT');
  } catch (error) {
    db.exec('ROLLBACK');
    throw error;
  }
}
