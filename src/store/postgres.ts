// PlantStore on PostgreSQL (or a wire-compatible distributed SQL engine) through `pg`.
// Every instance of the service may share one database: uniqueness, identical-replay checks and
// conditional writes are decided by the database inside one statement or transaction, so racing
// instances get exactly one winner. Migrations run under an advisory lock at startup.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { migrations } from './migrations.ts';
import { outboxTrace } from './outbox-trace.ts';
import {
  DELIVERY_COLUMNS,
  SUBSCRIPTION_COLUMNS,
  TOKEN_COLUMNS,
  toClaimed,
  plantFromTuple,
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
  StoreUnavailableError,
  type AttemptOutcome,
  type ClaimedDelivery,
  type Delivery,
  type NewSubscription,
  type Subscription,
  type WebhookEvent,
  TokenNameTakenError,
  type ConditionalWrite,
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
} from './types.ts';

const iso = (time: Date): string => time.toISOString();

export interface PostgresOptions {
  poolSize: number;
  /** Told about each lost or refused connection; at startup, also how long until the next try. */
  onConnectionError?: (error: Error, retryInMs?: number) => void;
  /** Connection attempts at startup before giving up (with backoff from 250 ms to 5 s); default: no limit but time. */
  startupAttempts?: number;
  /** How long a start keeps retrying an unreachable server (DATABASE_STARTUP_TIMEOUT); default 20 s. */
  startupTimeoutMs?: number;
}

/** A start gave up on an unreachable server; says how long it tried. */
export class StartupGaveUpError extends StoreUnavailableError {
  readonly triedForMs: number;
  readonly attempts: number;

  constructor(cause: unknown, triedForMs: number, attempts: number) {
    super(cause);
    this.name = 'StartupGaveUpError';
    this.triedForMs = triedForMs;
    this.attempts = attempts;
  }
}

const DEFAULT_STARTUP_TIMEOUT_MS = 20_000;

// One outbox row per enabled subscription to the event ($1 message-id prefix, $2 event, $3 payload,
// $4 traceparent), written in the same transaction (or statement) as the plant change.
const OUTBOX_ROWS = `INSERT INTO webhook_deliveries (message_id, subscription_id, event, payload, created_at, status, next_attempt_at, traceparent)
  SELECT $1 || id, id, $2, $3, now(), 'pending', now(), $4 FROM webhook_subscriptions
   WHERE disabled_at IS NULL AND position(' ' || $2 || ' ' in ' ' || events || ' ') > 0`;
// The plant statements in SQL and their parameters, and sqlEventPayload, carry each of these fields; a field added to Plant in
// openapi.yaml fails here until they do (and a migration adds its column).
// eslint-disable-next-line @typescript-eslint/no-unused-vars -- a compile-time check, never read at run time
const PLANT_FIELDS_IN_SQL = { name: true, tag: true } satisfies EveryPlantField;

// A create and its event in one statement, one round trip: the outbox rows only when the insert happened.
const CREATE_PLANT = `WITH created AS (
    INSERT INTO plants (id, name, tag) VALUES ($5, $6, $7) ON CONFLICT (id) DO NOTHING RETURNING id),
  events AS (${OUTBOX_ROWS} AND EXISTS (SELECT 1 FROM created) RETURNING 1)
  SELECT count(*)::int AS created, EXISTS (SELECT 1 FROM events) AS wrote_deliveries FROM created`;
// Many creates in one statement (group commit): the rows come as arrays, distinct ids in id order,
// so that two batches racing on the same ids lock them in the same order. Answers the ids inserted,
// each with whether the batch wrote deliveries (every created row joins the same subscriptions).
// The events' message ids and payloads are made here, for the rows that have a subscriber only:
// made in JavaScript for every create and sent as two more arrays, they took 5 of the store's
// 9 µs of CPU per create, and most creates have no subscriber. A message id is "msg_", 32 hex
// digits unique to the event (md5 of the batch's random $4 and the plant's id) and the
// subscription's id, as eventParameters makes; the payload is eventPayload(plant) exactly.
const CREATE_PLANTS = `WITH input AS (
    SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $5::text[]) AS t(id, name, tag, traceparent)),
  created AS (
    INSERT INTO plants (id, name, tag) SELECT id, name, tag FROM input ORDER BY id ON CONFLICT (id) DO NOTHING RETURNING id, name, tag),
  events AS (
    INSERT INTO webhook_deliveries (message_id, subscription_id, event, payload, created_at, status, next_attempt_at, traceparent)
    SELECT 'msg_' || md5($4 || created.id) || '_' || s.id, s.id, 'plant.created', ${sqlEventPayload('created')},
           now(), 'pending', now(), input.traceparent
      FROM created JOIN input USING (id) CROSS JOIN webhook_subscriptions s
     WHERE s.disabled_at IS NULL AND position(' plant.created ' in ' ' || s.events || ' ') > 0
    RETURNING 1)
  SELECT id, EXISTS (SELECT 1 FROM events) AS wrote_deliveries FROM created`;

/**
 * eventPayload(plant) of the plant row `table`, as SQL text: the same keys in the same order, no
 * tag key for a null tag, and strings escaped as JSON.stringify escapes them (to_json escapes the
 * same characters the same way: quote, backslash, \b \f \n \r \t, other controls as \u00xx).
 */
function sqlEventPayload(table: string): string {
  return `'{"id":' || ${table}.id || ',"name":' || to_json(${table}.name)::text ||
    CASE WHEN ${table}.tag IS NULL THEN '' ELSE ',"tag":' || to_json(${table}.tag)::text END || '}'`;
}

const INT8_OID = 20;
/** How long /readyz waits for the database before saying it is not ready. */
const PING_TIMEOUT_MS = 2_000;
// Arbitrary constants naming our advisory locks; only their distinctness matters.
const MIGRATION_LOCK = 7_240_318_001;
const FIRST_TOKEN_LOCK = 7_240_318_002;

// int8 (bigint) columns arrive as BigInt, not as strings or rounded numbers.
const exactTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? int8FromText : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

// For pages with compact ids (see ListedPlant): int8 as a number where that is exact, else as BigInt.
const compactTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? compactInt8FromText : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

const MINUS = 0x2d;
const ZERO = 0x30;

/**
 * PostgreSQL writes an int8 as an optional minus and digits. Within ±(2^53 - 1) it is exact as a
 * double (see compactInt8FromText): BigInt of a number takes a third of BigInt of a string, and a page
 * of 100 parses 101 ids. The digits are read here rather than by Number(text), which left compiled
 * code for V8's runtime on every id: half of the 6 µs per page this parser took in a profile.
 */
function int8FromText(text: string): bigint {
  const value = compactInt8FromText(text);
  return typeof value === 'bigint' ? value : BigInt(value);
}

/**
 * The int8 as a number within ±(2^53 - 1), else as BigInt. Up to 16 digits, every step but the last is
 * below 2^53, so exact; a last step past 2^53 - 1 rounds to a value that is no safe integer.
 */
function compactInt8FromText(text: string): number | bigint {
  const length = text.length;
  if (length > 17) return BigInt(text);
  const negative = text.charCodeAt(0) === MINUS;
  let value = 0;
  for (let i = negative ? 1 : 0; i < length; i++) value = value * 10 + (text.charCodeAt(i) - ZERO);
  return Number.isSafeInteger(value) ? (negative ? -value : value) : BigInt(text);
}

/**
 * A named statement's query config with its fields on its prototype and none of its own (see
 * PostgresStore's #statement for why); pg keeps the prototype when it copies a config. Exported for
 * the test that checks pg still names the statement it is given this way.
 */
export function namedStatement(name: string, text: string, rowMode?: 'array', types?: pg.CustomTypesConfig): pg.QueryConfig {
  const fields = rowMode === undefined ? { name, text } : { name, text, rowMode };
  return Object.create(types === undefined ? fields : { ...fields, types }) as pg.QueryConfig;
}

export class PostgresStore implements PlantStore {
  readonly #pool: pg.Pool;
  #closed = false;
  /**
   * How many operations are under way; close() lets them finish before ending the pool. A count, not
   * a Set of their promises: under load, a Set holding and deleting a promise per query made young
   * objects (whole pages of rows) survive scavenges, which took a third of the CPU time of a page.
   */
  #inFlight = 0;
  /** Called when the last operation under way ends, while close() waits for it. */
  #onIdle: (() => void) | undefined;
  /** Creates waiting for the next turn of the event loop, to be written together. */
  #createBatch: { plants: PlantRecord[]; results: Promise<PromiseSettledResult<CreateResult>[]> } | undefined;
  /** The traceparent of each traced create, read as the call began (a batch mixes requests). */
  readonly #outboxTraces = new WeakMap<PlantRecord, string>();
  /** A name for each SQL text #query has run: see #query. */
  readonly #statementNames = new Map<string, string>();
  /** The query config of each SQL text, by row mode: see #statement. */
  readonly #statements = {
    objects: new Map<string, pg.QueryConfig>(),
    arrays: new Map<string, pg.QueryArrayConfig>(),
    compactArrays: new Map<string, pg.QueryArrayConfig>(),
  };

  private constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  static async open(databaseUrl: string, options: PostgresOptions): Promise<PostgresStore> {
    const pool = new pg.Pool({
      connectionString: databaseUrl,
      max: options.poolSize,
      types: exactTypes,
      connectionTimeoutMillis: 5_000,
      // A peer that vanished without closing (a failover, a partition) is noticed instead of awaited forever.
      keepAlive: true,
    });
    // An idle connection that dies must be reported, never crash the process; the pool replaces it.
    pool.on('error', (error) => options.onConnectionError?.(error));
    // pg-pool listens for errors on idle clients only: one that dies while checked out (inside a
    // transaction, between two queries) would emit 'error' with no listener and end the process.
    // The query it breaks fails (503), and the pool discards the client on release (not queryable).
    pool.on('connect', (client) => client.on('error', ignoreCheckedOutError));
    try {
      await withStartupRetry(() => migrate(pool), options);
    } catch (error) {
      await pool.end();
      throw error;
    }
    return new PostgresStore(pool);
  }

  /**
   * Creates arriving in the same turn of the event loop share one statement and one commit, as on
   * SQLite: one round trip and one WAL flush for the lot instead of one each.
   */
  async createPlant(plant: PlantRecord): Promise<CreateResult> {
    if (!this.#createBatch) {
      const plants: PlantRecord[] = [];
      const results = this.#track(async () => {
        await new Promise(setImmediate);
        this.#createBatch = undefined;
        return this.#createAll(plants);
      });
      this.#createBatch = { plants, results };
    }
    const trace = outboxTrace();
    if (trace !== null) this.#outboxTraces.set(plant, trace);
    const index = this.#createBatch.plants.push(plant) - 1;
    const result = (await this.#createBatch.results)[index]!;
    if (result.status === 'rejected') throw result.reason;
    return result.value;
  }

  async #createAll(plants: PlantRecord[]): Promise<PromiseSettledResult<CreateResult>[]> {
    if (plants.length === 1) return Promise.allSettled([this.#createOne(plants[0]!)]);
    let created: Set<bigint>;
    let wroteDeliveries: boolean;
    try {
      ({ created, wroteDeliveries } = await this.#insertMany(plants));
    } catch (error) {
      if (error instanceof StoreUnavailableError) throw error;
      // Something the database refuses in one plant (or a lost race) must not fail the others.
      return Promise.allSettled(plants.map((plant) => this.#createOne(plant)));
    }
    // Where two creates in the batch share an id, the first one was inserted; the others compare.
    const first = new Map<bigint, PlantRecord>();
    for (const plant of plants) if (!first.has(plant.id)) first.set(plant.id, plant);
    const compare = plants.filter((plant) => !(created.has(plant.id) && first.get(plant.id) === plant));
    const stored = await this.#plantsById(compare.map((plant) => plant.id));
    return Promise.allSettled(
      plants.map(async (plant): Promise<CreateResult> => {
        if (created.has(plant.id) && first.get(plant.id) === plant) return { outcome: 'created', stored: plant, eventWritten: wroteDeliveries };
        const current = stored.get(plant.id);
        // Deleted since the insert found it: create it alone.
        if (!current) return this.#createOne(plant);
        return { outcome: samePlant(current, plant) ? 'unchanged' : 'conflict', stored: current };
      }),
    );
  }

  async #insertMany(plants: PlantRecord[]): Promise<{ created: Set<bigint>; wroteDeliveries: boolean }> {
    const distinct = [...new Map(plants.toReversed().map((plant) => [plant.id, plant])).values()].sort((a, b) =>
      a.id < b.id ? -1 : a.id > b.id ? 1 : 0,
    );
    const { rows } = await this.#query<{ id: bigint; wrote_deliveries: boolean }>(CREATE_PLANTS, [
      distinct.map((plant) => String(plant.id)),
      distinct.map((plant) => plant.name),
      distinct.map((plant) => plant.tag ?? null),
      randomUUID(),
      distinct.map((plant) => this.#outboxTraces.get(plant) ?? null),
    ]);
    return { created: new Set(rows.map((row) => row.id)), wroteDeliveries: rows.some((row) => row.wrote_deliveries) };
  }

  async #plantsById(ids: bigint[]): Promise<Map<bigint, PlantRecord>> {
    if (ids.length === 0) return new Map();
    const plants = await this.#plantQuery('SELECT id, name, tag FROM plants WHERE id = ANY($1::int8[])', [ids.map(String)]);
    return new Map(plants.map((plant) => [plant.id, plant]));
  }

  async #createOne(plant: PlantRecord): Promise<CreateResult> {
    for (;;) {
      const { rows } = await this.#query<{ created: number; wrote_deliveries: boolean }>(CREATE_PLANT, [
        ...eventParameters('plant.created', plant, this.#outboxTraces.get(plant) ?? null),
        String(plant.id),
        plant.name,
        plant.tag ?? null,
      ]);
      if (rows[0]!.created === 1) return { outcome: 'created', stored: plant, eventWritten: rows[0]!.wrote_deliveries };
      // A new statement sees the row that won (READ COMMITTED); if it was deleted meanwhile, insert again.
      const stored = await this.getPlant(plant.id);
      if (stored) return { outcome: samePlant(stored, plant) ? 'unchanged' : 'conflict', stored };
    }
  }

  listPlants(query: PageQuery & { compactIds: true }): Promise<ListedPlant[]>;
  listPlants(query: PageQuery & { compactIds?: false }): Promise<PlantRecord[]>;
  async listPlants({ after, tag, limit, compactIds = false }: PageQuery & { compactIds?: boolean }): Promise<ListedPlant[]> {
    const from = pageStart(after);
    if (from === undefined) return [];
    // Awaited: an async function returning a promise unawaited resolves with it two turns later.
    return await (tag === undefined
      ? this.#plantQuery('SELECT id, name, tag FROM plants WHERE id >= $1 ORDER BY id LIMIT $2', [String(from), limit], compactIds)
      : this.#plantQuery('SELECT id, name, tag FROM plants WHERE tag = $1 AND id >= $2 ORDER BY tag, id LIMIT $3', [tag, String(from), limit], compactIds));
  }

  async getPlant(id: bigint): Promise<PlantRecord | undefined> {
    const [plant] = await this.#plantQuery('SELECT id, name, tag FROM plants WHERE id = $1', [String(id)]);
    return plant;
  }

  replacePlant(id: bigint, content: PlantContent, precondition?: Precondition): Promise<ConditionalWrite> {
    const trace = outboxTrace();
    return this.#conditionally(id, precondition, async (client) => {
      await client.query('UPDATE plants SET name = $1, tag = $2 WHERE id = $3', [content.name, content.tag ?? null, String(id)]);
      const plant = plantWith(id, content);
      await emit(client, 'plant.replaced', plant, trace);
      return plant;
    });
  }

  deletePlant(id: bigint, precondition?: Precondition): Promise<ConditionalWrite> {
    const trace = outboxTrace();
    return this.#conditionally(id, precondition, async (client, current) => {
      await client.query('DELETE FROM plants WHERE id = $1', [String(id)]);
      await emit(client, 'plant.deleted', current, trace);
      return current;
    });
  }

  async findTokenByHash(hash: string): Promise<TokenRecord | undefined> {
    const { rows } = await this.#query<TokenRow<Date>>(`SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = $1`, [hash]);
    return rows[0] && toToken(rows[0], iso);
  }

  createFirstToken(token: NewTokenRecord): Promise<boolean> {
    return this.#transaction(async (client) => {
      // Two instances starting on an empty database must not both create a first token.
      await client.query('SELECT pg_advisory_xact_lock($1)', [FIRST_TOKEN_LOCK]);
      const { rowCount } = await client.query('SELECT 1 FROM api_tokens LIMIT 1');
      if (rowCount) return false;
      await insertToken(client, token);
      return true;
    });
  }

  createToken(token: NewTokenRecord): Promise<TokenRecord> {
    return this.#transaction((client) => insertToken(client, token));
  }

  async listTokens(): Promise<TokenRecord[]> {
    const { rows } = await this.#query<TokenRow<Date>>(`SELECT ${TOKEN_COLUMNS} FROM api_tokens ORDER BY id`);
    return rows.map((row) => toToken(row, iso));
  }

  async revokeToken(nameOrId: string): Promise<TokenRecord | undefined> {
    const column = /^\d+$/.test(nameOrId) ? 'id' : 'name';
    const { rows } = await this.#query<TokenRow<Date>>(
      `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE ${column} = $1 RETURNING ${TOKEN_COLUMNS}`,
      [nameOrId],
    );
    return rows[0] && toToken(rows[0], iso);
  }

  async recordTokenUse(uses: ReadonlyMap<number, string>): Promise<void> {
    if (uses.size === 0) return;
    await this.#query(
      `UPDATE api_tokens AS t SET last_used_at = u.at
         FROM unnest($1::bigint[], $2::timestamptz[]) AS u(id, at)
        WHERE t.id = u.id AND (t.last_used_at IS NULL OR t.last_used_at < u.at)`,
      [[...uses.keys()].map(String), [...uses.values()]],
    );
  }

  async createSubscription(subscription: NewSubscription): Promise<Subscription> {
    const { rows } = await this.#query<SubscriptionRow<Date>>(
      `INSERT INTO webhook_subscriptions (url, events, secret, created_at) VALUES ($1, $2, $3, now()) RETURNING ${SUBSCRIPTION_COLUMNS}`,
      [subscription.url, subscription.events.join(' '), subscription.secret],
    );
    return toSubscription(rows[0]!, iso);
  }

  async listSubscriptions(): Promise<Subscription[]> {
    const { rows } = await this.#query<SubscriptionRow<Date>>(`SELECT ${SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions ORDER BY id`);
    return rows.map((row) => toSubscription(row, iso));
  }

  deleteSubscription(id: bigint): Promise<boolean> {
    return this.#transaction(async (client) => {
      await client.query('DELETE FROM webhook_deliveries WHERE subscription_id = $1', [String(id)]);
      return (await client.query('DELETE FROM webhook_subscriptions WHERE id = $1', [String(id)])).rowCount === 1;
    });
  }

  async listDeliveries(subscriptionId: bigint, limit: number): Promise<Delivery[] | undefined> {
    const exists = await this.#query('SELECT 1 FROM webhook_subscriptions WHERE id = $1', [String(subscriptionId)]);
    if (exists.rowCount === 0) return undefined;
    const { rows } = await this.#query<DeliveryRow<Date>>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE subscription_id = $1 ORDER BY id DESC LIMIT $2`,
      [String(subscriptionId), limit],
    );
    return rows.map((row) => toDelivery(row, iso));
  }

  async claimDueDeliveries(now: Date, leaseMs: number, limit: number): Promise<ClaimedDelivery[]> {
    // SKIP LOCKED: instances claiming at the same moment take disjoint rows instead of waiting.
    const { rows } = await this.#query<ClaimedRow>(
      `WITH due AS (
         SELECT id FROM webhook_deliveries
          WHERE status = 'pending' AND next_attempt_at <= $1 AND (claimed_until IS NULL OR claimed_until <= $1)
          ORDER BY next_attempt_at, id LIMIT $3
          FOR UPDATE SKIP LOCKED),
       claimed AS (
         UPDATE webhook_deliveries d SET claimed_until = $2 FROM due WHERE d.id = due.id
         RETURNING d.id, d.message_id, d.event, d.payload, d.attempts, d.subscription_id, d.traceparent, d.next_attempt_at)
       SELECT c.id, c.message_id, c.event, c.payload, c.attempts, c.subscription_id, c.traceparent, s.url, s.secret
         FROM claimed c JOIN webhook_subscriptions s ON s.id = c.subscription_id
        ORDER BY c.next_attempt_at, c.id`,
      [now, new Date(now.getTime() + leaseMs), limit],
    );
    return rows.map(toClaimed);
  }

  recordAttempt(outcome: AttemptOutcome): Promise<void> {
    return this.#transaction(async (client) => {
      const status = outcome.result === 'retry' ? 'pending' : outcome.result;
      const { rows } = await client.query<{ subscription_id: bigint }>(
        `UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, last_attempt_at = $2, last_response_status = $3,
           last_error = $4, next_attempt_at = $5, claimed_until = NULL WHERE id = $6 AND status = 'pending'
         RETURNING subscription_id`,
        [
          status,
          outcome.at,
          outcome.responseStatus ?? null,
          outcome.result === 'delivered' ? null : (outcome.error ?? null),
          outcome.result === 'retry' ? outcome.nextAttemptAt : null,
          String(outcome.id),
        ],
      );
      if (outcome.result !== 'failed' || !outcome.disableSubscription || !rows[0]) return;
      const subscription = String(rows[0].subscription_id);
      await client.query('UPDATE webhook_subscriptions SET disabled_at = $1, disabled_reason = $2 WHERE id = $3', [
        outcome.at,
        outcome.disableSubscription,
        subscription,
      ]);
      await client.query(
        `UPDATE webhook_deliveries SET status = 'failed', last_error = 'the subscription was disabled', next_attempt_at = NULL,
           last_attempt_at = coalesce(last_attempt_at, $2) WHERE subscription_id = $1 AND status = 'pending'`,
        [subscription, outcome.at],
      );
    });
  }

  async countPendingDeliveries(): Promise<number> {
    const { rows } = await this.#query<{ pending: string }>("SELECT count(*) AS pending FROM webhook_deliveries WHERE status = 'pending'");
    return Number(rows[0]!.pending);
  }

  async pruneDeliveries(deliveredBefore: Date, failedBefore: Date): Promise<number> {
    const { rowCount } = await this.#query(
      `DELETE FROM webhook_deliveries
        WHERE (status = 'delivered' AND last_attempt_at < $1) OR (status = 'failed' AND last_attempt_at < $2)`,
      [deliveredBefore, failedBefore],
    );
    return rowCount ?? 0;
  }

  /** Answers within PING_TIMEOUT_MS or fails: a readiness check must not hang on a database that neither answers nor refuses. */
  async ping(): Promise<void> {
    const ping = this.#track(async () => {
      try {
        // query_timeout also discards the connection that did not answer.
        await this.#pool.query({ text: 'SELECT 1', query_timeout: PING_TIMEOUT_MS } as pg.QueryConfig); // per-query option the types omit
      } catch (error) {
        throw unavailableOr(error);
      }
    });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      // Waiting for a connection has its own, longer bound (connectionTimeoutMillis).
      timer = setTimeout(() => reject(new StoreUnavailableError(new Error(`no answer within ${PING_TIMEOUT_MS} ms`))), PING_TIMEOUT_MS);
    });
    try {
      await Promise.race([ping, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    // Creates already accepted are written first: a batch runs its statements after this point.
    await this.#createBatch?.results.catch(() => undefined);
    this.#closed = true;
    if (this.#inFlight > 0) await new Promise<void>((resolve) => (this.#onIdle = resolve));
    await this.#pool.end();
  }

  // Named, so that each connection parses and plans a statement once and then only binds and
  // executes it: parsing, analysing and planning were 40% of the database's CPU time per create.
  async #query<Row extends object = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<pg.QueryResult<Row>> {
    this.#begin();
    try {
      return await this.#pool.query<Row>(this.#statement(sql, 'objects'), params);
    } catch (error) {
      throw unavailableOr(error);
    } finally {
      this.#end();
    }
  }

  /** Plants selected as `id, name, tag`, read as arrays: building an object keyed by column per row costs pg twice as much. */
  async #plantQuery(sql: string, params: unknown[]): Promise<PlantRecord[]>;
  async #plantQuery(sql: string, params: unknown[], compactIds: boolean): Promise<ListedPlant[]>;
  async #plantQuery(sql: string, params: unknown[], compactIds = false): Promise<ListedPlant[]> {
    this.#begin();
    try {
      const { rows } = await this.#pool.query<PlantTuple<bigint | number>>(this.#statement(sql, compactIds ? 'compactArrays' : 'arrays'), params);
      const plants = rows.map(plantFromTuple);
      // pg-pool resolves a promise it made when the query was asked for, before the wait for a
      // connection; under load that promise has already moved to V8's old generation, and an old
      // object pointing at young ones keeps them through every scavenge until the next full GC.
      // Emptied, the result no longer holds its row arrays: a page of 1,000 was promoted whole.
      rows.length = 0;
      return plants;
    } catch (error) {
      throw unavailableOr(error);
    } finally {
      this.#end();
    }
  }

  /**
   * The config for a named statement, made once per SQL text and row mode, with its fields on its
   * prototype and none of its own; the parameters go beside it. pg copies a config object before
   * each query with Object.getOwnPropertyDescriptors and Object.defineProperties, keeping its
   * prototype: copying name, text, values and rowMode that way took 4-5 µs of the service's
   * CPU time per query in a profile of the list page and the get by id (pg's Client.query, against
   * under 1 µs for the reference's text and values), and a config with no own fields copies for little.
   */
  #statement(sql: string, rows: 'objects'): pg.QueryConfig;
  #statement(sql: string, rows: 'arrays' | 'compactArrays'): pg.QueryArrayConfig;
  #statement(sql: string, rows: 'objects' | 'arrays' | 'compactArrays'): pg.QueryConfig | pg.QueryArrayConfig {
    const made: Map<string, pg.QueryConfig | pg.QueryArrayConfig> = this.#statements[rows];
    let statement = made.get(sql);
    if (statement === undefined) {
      const types = rows === 'compactArrays' ? compactTypes : undefined;
      statement = namedStatement(this.#statementName(sql), sql, rows === 'objects' ? undefined : 'array', types);
      made.set(sql, statement);
    }
    return statement;
  }

  #statementName(sql: string): string {
    let name = this.#statementNames.get(sql);
    if (name === undefined) {
      name = `plant_store_${this.#statementNames.size + 1}`;
      this.#statementNames.set(sql, name);
    }
    return name;
  }

  #transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.#track(() => this.#inTransaction(work));
  }

  /** An operation counted in flight until it settles: close() waits until none is left. */
  async #track<T>(operation: () => Promise<T>): Promise<T> {
    this.#begin();
    try {
      return await operation();
    } finally {
      this.#end();
    }
  }

  // The queries on every request's path call #begin and #end inside their own async functions:
  // wrapped in #track, each query made one more closure, one more promise and its handlers.
  #begin(): void {
    if (this.#closed) throw new Error('The store is closed.');
    this.#inFlight++;
  }

  #end(): void {
    if (--this.#inFlight === 0) this.#onIdle?.();
  }

  async #inTransaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      throw unavailableOr(error);
    }
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      client.release();
      return result;
    } catch (error) {
      const broken = isConnectionError(error);
      if (!broken) await client.query('ROLLBACK').catch(() => undefined);
      client.release(broken ? (error as Error) : undefined); // a broken connection is discarded, not reused
      throw unavailableOr(error);
    }
  }

  #conditionally(
    id: bigint,
    precondition: Precondition | undefined,
    write: (client: pg.PoolClient, current: PlantRecord) => Promise<PlantRecord>,
  ): Promise<ConditionalWrite> {
    return this.#transaction(async (client) => {
      // FOR UPDATE holds the row until commit, so the precondition sees what the write will change.
      const { rows } = await client.query<PlantTuple>({ text: 'SELECT id, name, tag FROM plants WHERE id = $1 FOR UPDATE', values: [String(id)], rowMode: 'array' });
      if (!rows[0]) return { outcome: 'missing' };
      const current = plantFromTuple(rows[0]);
      if (precondition && !precondition(current)) return { outcome: 'precondition-failed', current };
      return { outcome: 'done', plant: await write(client, current) };
    });
  }
}

async function emit(client: pg.PoolClient, event: WebhookEvent, plant: PlantRecord, traceparent: string | null): Promise<void> {
  await client.query(OUTBOX_ROWS, eventParameters(event, plant, traceparent));
}

function eventParameters(event: WebhookEvent, plant: PlantRecord, traceparent: string | null): [string, WebhookEvent, string, string | null] {
  return [`msg_${randomUUID().replaceAll('-', '')}_`, event, eventPayload(plant), traceparent];
}

async function insertToken(client: pg.PoolClient, token: NewTokenRecord): Promise<TokenRecord> {
  const { rows } = await client.query<TokenRow<Date>>(
    `INSERT INTO api_tokens (name, token_hash, hint, scopes, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, now())
     ON CONFLICT (name) DO NOTHING RETURNING ${TOKEN_COLUMNS}`,
    [token.name, token.hash, token.hint, (token.scopes ?? ['*']).join(' '), token.expiresAt ?? null],
  );
  if (!rows[0]) throw new TokenNameTakenError(token.name);
  return toToken(rows[0], iso);
}

/** Applies pending migrations while holding an advisory lock, so instances starting together take turns. */
async function migrate(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM schema_migrations');
    const current = rows[0]?.version ?? 0;
    const latest = migrations.at(-1)?.version ?? 0;
    if (current > latest) {
      throw new Error(`The database is at schema version ${current}, newer than this release knows (${latest}).`);
    }
    for (const migration of migrations.filter((m) => m.version > current)) {
      await client.query('BEGIN');
      try {
        await client.query(migration.postgres);
        await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    client.release();
  }
}

async function withStartupRetry<T>(work: () => Promise<T>, options: PostgresOptions): Promise<T> {
  const attempts = options.startupAttempts ?? Infinity;
  const started = performance.now();
  const giveUpAt = started + (options.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS);
  let delay = 250;
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!isConnectionError(error)) throw error;
      const left = giveUpAt - performance.now();
      if (attempt >= attempts || left <= 0) throw new StartupGaveUpError(error, performance.now() - started, attempt);
      // The last wait is cut short so that the last try falls on the deadline.
      const wait = Math.min(delay, left);
      options.onConnectionError?.(error as Error, Math.round(wait));
      await sleep(wait);
      delay = Math.min(delay * 2, 5_000);
    }
  }
}

function ignoreCheckedOutError(): void {
  // Reported where it matters: by the query it fails, or by the pool's 'error' event once idle.
}

const CONNECTION_ERROR_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

// SQLSTATE class 08 (connection exception), 57P0x (server shutting down), 53300 (too many
// connections), socket errors, and pg's own messages for a dropped or timed-out connection.
function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string' && (code.startsWith('08') || code.startsWith('57P0') || code === '53300' || CONNECTION_ERROR_CODES.has(code))) {
    return true;
  }
  return /Connection terminated|timeout exceeded when trying to connect|connection error|Query read timeout|Cannot use a pool after calling end/i.test(
    (error as Error)?.message ?? '',
  );
}

function unavailableOr(error: unknown): unknown {
  return isConnectionError(error) && !(error instanceof StoreUnavailableError) ? new StoreUnavailableError(error) : error;
}

