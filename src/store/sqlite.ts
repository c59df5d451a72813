// The SQLite driver (node:sqlite, WAL, synchronous=FULL): a group commit per event-loop turn; another process's lock is waited for on timers, never blocking.
import { statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { preparePrivateFiles } from './sqlite-files.ts';
import { migrate } from './migrations.ts';
import { only, raw, sql, type Driver, type Spelling, type Statement, type Steps, type WriteScope } from './sql.ts';
import { SqlStore } from './store.ts';
import { StoreUnavailableError, WEBHOOK_EVENTS, type WebhookEvent } from './types.ts';
import { wanting } from './webhooks.ts';

/** How long a write waits for a write lock another process holds (documented: docs/operations.md, openapi.yaml's 503). */
export const LOCK_WAIT_MS = 5_000;
const FIRST_RETRY_MS = 1;
const MAX_RETRY_MS = 50;
/** Free space on the database's filesystem that lets a storage fault's ping answer ready again: a batch's WAL frames fit. */
const ROOM_TO_WRITE = 1024 * 1024;

const WANTED = new Map(WEBHOOK_EVENTS.map((event) => [event, sql`SELECT 1 FROM webhook_subscriptions s WHERE ${wanting(event)} LIMIT 1`.sql]));

export interface SqliteOptions {
  /** Told when writes find the write lock held by another process, once per wait. */
  onLockWait?: (error: Error) => void;
}

interface PendingWrite {
  work: () => Steps<unknown>;
  scope: WriteScope;
  resolve: (result: unknown) => void;
  reject: (error: unknown) => void;
  /** performance.now() after which waiting for another process's lock gives up. */
  deadline: number;
}

export class SqliteStore extends SqlStore {
  constructor(path: string, options: SqliteOptions = {}) {
    super(new SqliteDriver(path, options));
  }
}

class SqliteDriver implements Driver {
  readonly spelling: Spelling = {
    dialect: 'sqlite',
    forUpdate: raw(''),
    skipLocked: () => raw(''),
    // No LATERAL: the ids of each row's first deliveries, looked up by id.
    firstDeliveries: (where, order, limit) => sql`JOIN webhook_deliveries x ON x.id IN (
      SELECT y.id FROM webhook_deliveries y WHERE ${where('y')} ORDER BY ${order('y')} LIMIT CAST(${limit} AS INTEGER))`,
    nextVersion: raw('(SELECT last + 1 FROM plant_versions)'),
  };
  readonly #db: DatabaseSync;
  /** Statements prepared once per SQL text, reading integers as BigInt so that int64 ids stay exact. */
  readonly #prepared = new Map<string, StatementSync>();
  readonly #preparedTuples = new Map<string, StatementSync>();
  readonly #options: SqliteOptions;
  readonly #path: string;
  #pending: PendingWrite[] = [];
  /** The write loop, while writes are queued or waiting for the lock; close() awaits it. */
  #writer: Promise<void> | undefined;
  #closed = false;
  /** The storage fault (full disk, I/O error) that failed the last batch; cleared by the next commit. */
  #writeFault: unknown;
  /** Whether an enabled subscription wants each event, read once per batch (under the write lock); other writes clear it. */
  readonly #subscribed = new Map<WebhookEvent, boolean>();

  constructor(path: string, options: SqliteOptions) {
    this.#options = options;
    this.#path = path;
    if (path !== ':memory:') for (const line of preparePrivateFiles(path)) process.emitWarning(line);
    this.#db = new DatabaseSync(path);
    // Before listening, blocking on a lock freezes nothing; busy_timeout first, as switching a new file to WAL takes a lock.
    this.#db.exec(`PRAGMA busy_timeout = ${LOCK_WAIT_MS}; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;`);
    try {
      // One immediate transaction, so that two processes starting together take turns.
      this.#db.exec('BEGIN IMMEDIATE');
      this.#steps(migrate('sqlite'));
      this.#db.exec('COMMIT');
    } catch (error) {
      this.#rollBack();
      this.#db.close();
      throw error;
    }
    // From here on a lock is waited for on timers, never inside SQLite (see the top of this file).
    this.#db.exec('PRAGMA busy_timeout = 0');
  }

  /** Runs the reads at once, outside the retry loop (no async function or clock read for what nearly always succeeds). */
  read<T>(work: () => Steps<T>): Promise<T> {
    try {
      return Promise.resolve(this.#steps(work()));
    } catch {
      return this.#readAgain(work);
    }
  }

  query<T>(statement: Statement, answer: (result: unknown) => T): Promise<T> {
    let result: unknown;
    try {
      result = this.#execute(statement);
    } catch {
      return this.#readAgain(() => only(statement)).then(answer);
    }
    return Promise.resolve(answer(result));
  }

  /** In the rare case WAL readers meet SQLITE_BUSY (another process recovering the WAL), reads are retried on timers. */
  async #readAgain<T>(work: () => Steps<T>): Promise<T> {
    const deadline = performance.now() + LOCK_WAIT_MS;
    for (let delay = FIRST_RETRY_MS; ; delay = Math.min(delay * 2, MAX_RETRY_MS)) {
      try {
        return this.#steps(work());
      } catch (error) {
        if (isStorageFault(error) || (isBusy(error) && performance.now() >= deadline)) throw new StoreUnavailableError(error);
        if (!isBusy(error)) throw error;
      }
      await sleep(delay);
    }
  }

  /** Queues the work for the next group commit; resolves with its result once it is on disk. */
  write<T>(work: () => Steps<T>, scope: WriteScope): Promise<T> {
    if (this.#closed) return Promise.reject(new Error('The store is closed.'));
    return new Promise((resolve, reject) => {
      this.#pending.push({ work, scope, resolve: resolve as (result: unknown) => void, reject, deadline: performance.now() + LOCK_WAIT_MS });
      this.#writer ??= this.#writeLoop();
    });
  }

  /** Never writes: after a storage fault, ready again once the filesystem has room for writes (or a write has committed). */
  async ping(): Promise<void> {
    this.#statement('SELECT 1').get();
    if (this.#writeFault === undefined) return;
    const room = this.#path === ':memory:' ? 0 : await statfs(dirname(this.#path)).then(({ bavail, bsize }) => bavail * bsize);
    if (room < ROOM_TO_WRITE) throw new StoreUnavailableError(this.#writeFault);
  }

  async close(): Promise<void> {
    this.#closed = true;
    // Writes issued before close are settled first (committed, or failed after their wait for the lock).
    await this.#writer;
    if (!this.#db.isOpen) return;
    // A clean stop leaves one self-contained file; best effort, as another process's lock or a full disk leaves the WAL for later.
    try {
      this.#db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    } catch (error) {
      if (!isBusy(error) && !isStorageFault(error)) throw error;
    }
    this.#db.close();
  }

  /** Runs the work's statements one after the other, synchronously: nothing else touches the connection meanwhile. */
  #steps<T>(steps: Steps<T>): T {
    for (let step = steps.next(); ; step = steps.next(this.#execute(step.value))) {
      if (step.done) return step.value;
    }
  }

  #execute(statement: Statement): unknown {
    if (statement.kind === 'wanted') return this.#wanted(statement.event);
    if (statement.kind === 'exec') return this.#db.exec(statement.script);
    const prepared = this.#statement(statement.sql.sql, statement.kind === 'tuples');
    const values = statement.sql.values as never[];
    return statement.kind === 'run' ? Number(prepared.run(...values).changes) : prepared.all(...values);
  }

  #statement(sql: string, tuples = false): StatementSync {
    const prepared = tuples ? this.#preparedTuples : this.#prepared;
    let statement = prepared.get(sql);
    if (!statement) {
      statement = this.#db.prepare(sql);
      statement.setReadBigInts(true);
      statement.setReturnArrays(tuples);
      prepared.set(sql, statement);
    }
    return statement;
  }

  #wanted(event: WebhookEvent): boolean {
    let subscribed = this.#subscribed.get(event);
    if (subscribed === undefined) {
      subscribed = this.#statement(WANTED.get(event)!).get() !== undefined;
      this.#subscribed.set(event, subscribed);
    }
    return subscribed;
  }

  /** Commits queued writes batch after batch; one that finds the lock taken stays queued, in order, each write until its deadline. */
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
      const outcomes = batch.map((write) => this.#settle(write));
      this.#db.exec('COMMIT');
      this.#writeFault = undefined;
      for (const tell of outcomes) tell();
    } catch (error) {
      this.#rollBack();
      if (isBusy(error)) return error;
      // A full disk or an I/O error is the storage's, not the writes': 503, and not ready until there is room again.
      if (isStorageFault(error)) this.#writeFault = error;
      const failure = isStorageFault(error) ? new StoreUnavailableError(error) : error;
      for (const { reject } of batch) reject(failure);
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

  /** Runs one write of the batch; answers how its caller is told after the commit. Its own failure is its outcome. */
  #settle({ work, scope, resolve, reject }: PendingWrite): () => void {
    try {
      const isolated = scope === 'transaction' || (scope !== 'statement' && this.#wanted(scope));
      const value = isolated ? this.#inSavepoint(work) : this.#steps(work());
      return () => resolve(value);
    } catch (error) {
      // The storage's failure, or a transaction SQLite rolled back, fails the whole batch.
      if (isBusy(error) || isStorageFault(error) || !this.#db.isTransaction) throw error;
      return () => reject(error);
    } finally {
      // Any write but a plant's may have changed the subscriptions.
      if (scope === 'statement' || scope === 'transaction') this.#subscribed.clear();
    }
  }

  /** Runs the work in a savepoint: if it throws, its changes are undone and the error passed on. */
  #inSavepoint<T>(work: () => Steps<T>): T {
    // Prepared rather than exec'd: exec parses its SQL every time, and many writes run these.
    this.#statement('SAVEPOINT write').run();
    try {
      const value = this.#steps(work());
      this.#statement('RELEASE write').run();
      return value;
    } catch (error) {
      if (!isBusy(error) && !isStorageFault(error) && this.#db.isTransaction) {
        this.#statement('ROLLBACK TO write').run();
        this.#statement('RELEASE write').run();
      }
      throw error;
    }
  }
}

/** The primary result code of a node:sqlite error (its errcode is the extended one); 0 for other errors. */
function resultCode(error: unknown): number {
  return ((error as { errcode?: number })?.errcode ?? 0) & 0xff;
}

const SQLITE_BUSY = 5;
const SQLITE_IOERR = 10;
const SQLITE_FULL = 13;

/** Another connection holds the lock. */
function isBusy(error: unknown): boolean {
  return resultCode(error) === SQLITE_BUSY;
}

/** A full disk, or an I/O error (SQLITE_IOERR_*, how some ENOSPC cases surface). */
function isStorageFault(error: unknown): boolean {
  const code = resultCode(error);
  return code === SQLITE_FULL || code === SQLITE_IOERR;
}
