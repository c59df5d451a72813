// The PostgreSQL driver (pg) for instances sharing one database: plain queries and transaction-scoped locks, so a transaction-mode pooler fits.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { storeOptions } from '../config.ts';
import { migrate } from './migrations.ts';
import { COLUMN_KINDS, PLANT_FIELD_NAMES, PLANT_FIELDS } from './plant-fields.ts';
import { judged, plantsWhere, toPlants } from './plants.ts';
import { all, joined, raw, Sql, sql, type Driver, type EventOrigin, type Spelling, type Statement, type Steps, type WriteScope } from './sql.ts';
import { SqlStore } from './store.ts';
import { eventPayload, StoreUnavailableError, type CreateResult, type PlantRecord } from './types.ts';
import { outboxInsert } from './webhooks.ts';

/** The configuration's store options (pool size, DATABASE_STARTUP_TIMEOUT, DATABASE_QUERY_TIMEOUT), and who hears of connection errors. */
export type PostgresOptions = ReturnType<typeof storeOptions> & {
  /** Told about each lost or refused connection; at startup, also how long until the next try. */
  onConnectionError?: (error: Error, retryInMs?: number) => void;
  /** Connection attempts at startup before giving up; default: no limit but time. */
  startupAttempts?: number;
};

/** The longest /readyz waits for the database (less when DATABASE_QUERY_TIMEOUT is less): a probe's own timeout is short. */
const PING_TIMEOUT_MS = 2_000;
// Arbitrary constants naming our advisory locks; only their distinctness matters.
const MIGRATION_LOCK = 7_240_318_001;
const TURN_LOCKS = { 'first token': 7_240_318_002, subscription: 7_240_318_003 } as const;
const INT8_OID = 20;

// Creates and their events in one statement (group commit), in id order so racing batches lock alike; answers the ids inserted.
const FIELD_LIST = raw(PLANT_FIELD_NAMES.join(', '));
const PG_ARRAYS = PLANT_FIELD_NAMES.map((field) => COLUMN_KINDS[PLANT_FIELDS[field]].pgArray);
const BATCH_COLUMNS = raw(['id', ...PLANT_FIELD_NAMES, 'key', 'payload', 'traceparent'].join(', '));
const NEW_EVENTS = raw('created JOIN input USING (id) CROSS JOIN webhook_subscriptions s');
const NEXT_VERSION = raw("nextval('plant_versions')");

/** Rows given as one array per column, each with its array type: one statement for any number of rows. */
export function unnest(columns: (readonly [values: unknown[], arrayType: string])[]): Sql {
  return sql`unnest(${joined(columns.map(([values, type]) => sql`${values}::${raw(type)}`))})`;
}

/** A value as pg should bind it: int64 as text, which pg writes exactly; no value as NULL. */
export function exact(value: unknown): unknown {
  return typeof value === 'bigint' ? String(value) : (value ?? null);
}

function createPlants(creates: PendingCreate[]): Sql {
  const input = unnest([
    [creates.map(({ plant }) => String(plant.id)), 'int8[]'],
    ...PLANT_FIELD_NAMES.map((field, at) => [creates.map(({ plant }) => exact(plant[field])), PG_ARRAYS[at]!] as const),
    [creates.map(({ origin }) => origin.key), 'text[]'],
    [creates.map(({ plant }) => eventPayload(plant)), 'text[]'],
    [creates.map(({ origin }) => origin.traceparent), 'text[]'],
  ]);
  const events = outboxInsert(NEW_EVENTS, 'plant.created', raw('input.key'), raw('input.payload'), sql`${new Date().toISOString()}::timestamptz`, raw('input.traceparent'));
  return sql`WITH input AS (SELECT * FROM ${input} AS t(${BATCH_COLUMNS})),
    created AS (INSERT INTO plants (id, ${FIELD_LIST}, version) SELECT id, ${FIELD_LIST}, ${NEXT_VERSION} FROM input ORDER BY id
      ON CONFLICT (id) DO NOTHING RETURNING id),
    events AS (${events} RETURNING 1)
    SELECT id, EXISTS (SELECT 1 FROM events) AS wrote_deliveries FROM created`;
}

interface PendingCreate {
  plant: PlantRecord;
  origin: EventOrigin;
  alone: () => Promise<CreateResult>;
}

export class PostgresStore extends SqlStore {
  /** Migrates, retrying an unreachable server (backoff 250 ms to 5 s) until startup time or attempts run out; then opens the pool. */
  static async open(databaseUrl: string, options: PostgresOptions): Promise<PostgresStore> {
    const { queryTimeoutMs, startupTimeoutMs, startupAttempts = Infinity } = options;
    // The migration may rightly take long (DDL, another instance's turn): its statements have DATABASE_STARTUP_TIMEOUT.
    const migrator = new PostgresDriver(newPool(databaseUrl, options, 1), startupTimeoutMs, queryTimeoutMs);
    // Under a lock held until commit, so that instances starting together migrate in turns.
    const migration = function* () {
      yield all(raw(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`));
      yield* migrate('postgres');
    };
    const giveUpAt = performance.now() + startupTimeoutMs;
    try {
      for (let attempt = 1, delay = 250; ; attempt++, delay = Math.min(delay * 2, 5_000)) {
        try {
          await migrator.write(migration, 'transaction');
          break;
        } catch (failure) {
          const left = giveUpAt - performance.now();
          if (!(failure instanceof StoreUnavailableError) || attempt >= startupAttempts || left <= 0) throw failure;
          // The last wait is cut short so that the last try falls on the deadline.
          const wait = Math.min(delay, left);
          options.onConnectionError?.(failure.cause as Error, Math.round(wait));
          await sleep(wait);
        }
      }
    } finally {
      await migrator.close();
    }
    const pool = newPool(databaseUrl, options, options.poolSize);
    return new PostgresStore(new PostgresDriver(pool, queryTimeoutMs, Math.min(PING_TIMEOUT_MS, queryTimeoutMs)));
  }
}

class PostgresDriver implements Driver {
  readonly spelling: Spelling = {
    dialect: 'postgres',
    forUpdate: raw(' FOR UPDATE'),
    skipLocked: (table) => raw(` FOR UPDATE OF ${table} SKIP LOCKED`),
    takeTurns: (kind) => raw(`SELECT pg_advisory_xact_lock(${TURN_LOCKS[kind]})`),
    firstDeliveries: (where, order, limit) =>
      sql`CROSS JOIN LATERAL (SELECT * FROM webhook_deliveries y WHERE ${where('y')} ORDER BY ${order('y')} LIMIT CAST(${limit} AS INTEGER)) x`,
    nextVersion: NEXT_VERSION,
  };
  readonly #pool: pg.Pool;
  #closed = false;
  /** How many operations are under way; close() lets them finish before ending the pool. */
  #inFlight = 0;
  #onIdle: (() => void) | undefined;
  /** The longest wait for one statement's answer; a connection that misses it is discarded. */
  readonly #answerTimeoutMs: number;
  readonly #pingTimeoutMs: number;
  /** Creates waiting for the next turn of the event loop, to be written together. */
  #batch: { creates: PendingCreate[]; results: Promise<PromiseSettledResult<CreateResult>[]> } | undefined;

  constructor(pool: pg.Pool, answerTimeoutMs: number, pingTimeoutMs: number) {
    this.#pool = pool;
    this.#answerTimeoutMs = answerTimeoutMs;
    this.#pingTimeoutMs = pingTimeoutMs;
  }

  read<T>(work: () => Steps<T>): Promise<T> {
    return this.#track(() => this.#withClient((client) => this.#steps(work(), client)));
  }

  query<T>(statement: Statement, answer: (result: unknown) => T): Promise<T> {
    return this.#track(async () => answer(await this.#withClient((client) => this.#execute(statement, client))));
  }

  /** A write of one statement commits on its own; any other runs in a transaction. */
  write<T>(work: () => Steps<T>, scope: WriteScope): Promise<T> {
    return scope === 'statement' ? this.read(work) : this.#track(() => this.#transaction(work));
  }

  /** Creates arriving in the same turn of the event loop share one statement and one commit, as on SQLite. */
  async createPlant(plant: PlantRecord, origin: EventOrigin, alone: () => Promise<CreateResult>): Promise<CreateResult> {
    if (!this.#batch) {
      const creates: PendingCreate[] = [];
      const results = this.#track(async () => {
        await new Promise(setImmediate);
        this.#batch = undefined;
        return this.#createAll(creates);
      });
      this.#batch = { creates, results };
    }
    const index = this.#batch.creates.push({ plant, origin, alone }) - 1;
    const result = (await this.#batch.results)[index]!;
    if (result.status === 'rejected') throw result.reason;
    return result.value;
  }

  /** Answers within PING_TIMEOUT_MS (or DATABASE_QUERY_TIMEOUT if less) or fails: a readiness check must not hang. */
  async ping(): Promise<void> {
    const timeoutMs = this.#pingTimeoutMs;
    const ping = this.#track(() => this.#withClient((client) => answerWithin(client, { text: 'SELECT 1' }, timeoutMs).catch(rethrown)));
    // The wait for a connection and the query together; each alone is bounded by DATABASE_QUERY_TIMEOUT.
    const late = await Promise.race([ping.then(() => false), sleep(timeoutMs, true, { ref: false })]);
    if (late) throw new StoreUnavailableError(new Error(`no answer within ${timeoutMs} ms`));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    // Creates already accepted are written first: a batch runs its statements after this point.
    await this.#batch?.results.catch(() => undefined);
    this.#closed = true;
    if (this.#inFlight > 0) await new Promise<void>((resolve) => (this.#onIdle = resolve));
    await this.#pool.end();
  }

  async #createAll(creates: PendingCreate[]): Promise<PromiseSettledResult<CreateResult>[]> {
    // Where two creates in the batch share an id, the first one is inserted; the others compare.
    const first = new Map<bigint, PendingCreate>();
    for (const create of creates) if (!first.has(create.plant.id)) first.set(create.plant.id, create);
    const distinct = [...first.values()].sort((a, b) => (a.plant.id < b.plant.id ? -1 : 1));
    let rows: { id: bigint; wrote_deliveries: boolean }[];
    try {
      rows = (await this.#withClient((client) => this.#execute(all(createPlants(distinct)), client))) as typeof rows;
    } catch (error) {
      if (error instanceof StoreUnavailableError) throw error;
      // Something the database refuses in one plant (or a lost race) must not fail the others.
      return Promise.allSettled(creates.map((create) => create.alone()));
    }
    const created = new Set(rows.map((row) => row.id));
    const eventWritten = rows.some((row) => row.wrote_deliveries);
    const isCreated = (create: PendingCreate) => created.has(create.plant.id) && first.get(create.plant.id) === create;
    const others = creates.filter((create) => !isCreated(create)).map((create) => String(create.plant.id));
    const stored = others.length === 0 ? [] : await this.query(plantsWhere(sql`id = ANY(${others}::int8[])`), toPlants);
    const byId = new Map(stored.map((plant) => [plant.id, plant]));
    return Promise.allSettled(
      creates.map(async (create): Promise<CreateResult> => {
        if (isCreated(create)) return { outcome: 'created', stored: create.plant, eventWritten };
        const current = byId.get(create.plant.id);
        // Deleted since the insert found it: create it alone.
        return current ? judged(create.plant, current) : create.alone();
      }),
    );
  }

  async #steps<T>(steps: Steps<T>, on: pg.PoolClient): Promise<T> {
    let step = steps.next();
    while (!step.done) step = steps.next(await this.#execute(step.value, on));
    return step.value;
  }

  async #execute(statement: Statement, on: pg.PoolClient): Promise<unknown> {
    // The statement that writes the outbox rows finds the subscribers itself.
    if (statement.kind === 'wanted') return true;
    const within = this.#answerTimeoutMs;
    try {
      if (statement.kind === 'exec') return await answerWithin(on, { text: statement.script }, within);
      // Unnamed: a named statement lives in its server session, which a pooler in transaction mode shares between clients.
      const text = statement.sql.text;
      const values = statement.sql.values;
      const config = statement.kind === 'tuples' ? { text, values, rowMode: 'array' as const } : { text, values };
      const { rows, rowCount } = await answerWithin(on, config, within);
      return statement.kind === 'run' ? (rowCount ?? 0) : rows;
    } catch (error) {
      return rethrown(error);
    }
  }

  /** Runs `use` on a connection of the pool; one that `broke` finds broken (by default: it missed a deadline) is discarded, not reused. */
  async #withClient<T>(
    use: (client: pg.PoolClient) => Promise<T>,
    broke: (error: unknown, client: pg.PoolClient) => boolean | Promise<boolean> = unavailable,
  ): Promise<T> {
    const client = await this.#pool.connect().catch(rethrown);
    try {
      const result = await use(client);
      client.release();
      return result;
    } catch (error) {
      client.release((await broke(error, client)) ? (error as Error) : undefined);
      throw error;
    }
  }

  #transaction<T>(work: () => Steps<T>): Promise<T> {
    const exec = (script: string, client: pg.PoolClient) => this.#execute({ kind: 'exec', script }, client);
    return this.#withClient(
      async (client) => {
        await exec('BEGIN', client);
        const result = await this.#steps(work(), client);
        await exec('COMMIT', client);
        return result;
      },
      // A ROLLBACK that failed (its deadline passed) leaves the connection unusable too.
      (error, client) => unavailable(error) || exec('ROLLBACK', client).then(() => false, () => true),
    );
  }

  /** An operation counted in flight until it settles: close() waits until none is left. */
  async #track<T>(operation: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new Error('The store is closed.');
    this.#inFlight++;
    try {
      return await operation();
    } finally {
      if (--this.#inFlight === 0) this.#onIdle?.();
    }
  }
}

/** int8 (bigint) columns arrive as BigInt, not as strings or rounded numbers. */
export const EXACT_TYPES = { getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === INT8_OID ? BigInt : pg.types.getTypeParser(oid, format))) as typeof pg.types.getTypeParser };

/** Every wait for the server is bounded (a stopped server enforces no statement_timeout); a connection that missed one is discarded. */
function newPool(databaseUrl: string, options: PostgresOptions, max: number): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max,
    types: EXACT_TYPES,
    connectionTimeoutMillis: options.queryTimeoutMs,
    // A peer that vanished without closing (a failover, a partition) is noticed instead of awaited forever.
    keepAlive: true,
  });
  // An idle connection that dies must be reported, never crash the process; the pool replaces it.
  pool.on('error', (error) => options.onConnectionError?.(error));
  // pg-pool listens on idle clients only: one dying while checked out would end the process. The query it breaks fails instead.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** The server's errors by SQLSTATE (08: connection, 57P0x: shutting down, 53300: too many connections); any other failure of pg means no answer came. */
export function isConnectionError(error: unknown): boolean {
  if (error instanceof pg.DatabaseError) return error.code !== undefined && (error.code.startsWith('08') || error.code.startsWith('57P0') || error.code === '53300');
  return error instanceof Error && !(error instanceof TypeError);
}

const unavailable = (error: unknown): boolean => error instanceof StoreUnavailableError;

/** A failure of pg, thrown as StoreUnavailableError when no answer came. */
function rethrown(error: unknown): never {
  throw isConnectionError(error) ? new StoreUnavailableError(error) : error;
}

/** The statement's answer, or a failure once `ms` pass without one (rethrown makes it a StoreUnavailableError; the connection is then discarded). */
function answerWithin(client: pg.PoolClient, config: pg.QueryConfig, ms: number): Promise<pg.QueryResult> {
  // pg's callback form and a timer of our own: its promise form and its query_timeout keep each answer's rows alive into the
  // old generation (docs/performance.md, "PostgreSQL").
  return new Promise((resolve, reject) => {
    // The timer reaches the caller only through this box, emptied by the answer: a timer the GC has moved to the old generation
    // then keeps no rows alive.
    const pending: Pending = { reject };
    const timer = setTimeout(expire, ms, pending, ms);
    client.query(config, (error: Error | undefined, result: pg.QueryResult) => {
      clearTimeout(timer);
      pending.reject = undefined;
      if (error) reject(error);
      else resolve(result);
    });
  });
}

interface Pending { reject: ((error: Error) => void) | undefined }

function expire(pending: Pending, ms: number): void {
  pending.reject?.(new Error(`no answer within ${ms} ms`));
}
