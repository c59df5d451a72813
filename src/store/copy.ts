// `npm run store -- copy|backup`: a whole store from one read-only snapshot into a new one, in one target transaction, checked table by table before it commits.
import { createHash } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, realpathSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import pg from 'pg';
import { parse } from 'pg-connection-string';
import { databaseOf } from '../config.ts';
import { migrations, schemaScripts } from './migrations.ts';
import { raw, sql, type Dialect, type Sql } from './sql.ts';
import { exact, EXACT_TYPES, unnest } from './postgres.ts';
import { companionFiles, preparePrivateFiles } from './sqlite-files.ts';
import { LOCK_WAIT_MS } from './sqlite.ts';

/** A copy or backup refused or failed for a reason its one-line message names, with what to do. */
export class StoreCommandError extends Error {}

type Value = string | number | bigint | Date | null;
type Row = Value[];
type Role = 'source' | 'target';

/** Rows per read and per insert: large enough that round trips do not dominate, small enough to stay a few MB. */
const BATCH_LIMIT = raw('5000');
/** The table holding SQLite's version counter; it and every sequence are carried as counters, not rows. */
const COUNTER_TABLE = 'plant_versions';
const SAME = 'The source and the target are the same database:';
const POSTGRES_URL = 'postgres://user:password@host:5432/database';

export interface Progress {
  phase: 'copy' | 'verify';
  done: number;
  total: number;
}

/** One table on both sides: row counts and a SHA-256 of the content, row by row in key order. */
export interface TableCheck {
  table: string;
  rows: [number, number];
  sha256: [string, string];
}

// Another process's write lock is waited for, as the service does at its start.
const WAIT_FOR_LOCK = `PRAGMA busy_timeout = ${LOCK_WAIT_MS};`;

/** What a copy reads and runs that each dialect spells its own way; every table is keyed by its first column. */
const SPELLED = {
  sqlite: {
    tables: sql`SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%'`,
    columns: (table: string) => sql`SELECT name FROM pragma_table_info(${table}) ORDER BY cid`,
    begin: { snapshot: `${WAIT_FOR_LOCK} BEGIN`, write: `${WAIT_FOR_LOCK} BEGIN IMMEDIATE` },
  },
  postgres: {
    tables: sql`SELECT table_name FROM information_schema.tables
      WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`,
    columns: (table: string) => sql`SELECT column_name, udt_name FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = ${table} ORDER BY ordinal_position`,
    begin: { snapshot: 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', write: 'BEGIN' },
  },
} satisfies Record<Dialect, unknown>;

/** One side of a copy; `name` says which in messages, never with a password. */
interface End {
  readonly dialect: Dialect;
  readonly name: string;
  /** Where its data lives, so that a copy onto its own source is refused. */
  readonly identity: string;
  query(statement: Sql): Promise<Row[]>;
  /** Runs statements that take no values and answer no rows (DDL, BEGIN). */
  script(text: string): Promise<void>;
  insert(table: string, columns: string[], rows: Row[]): Promise<void>;
  /** The last number each counter (plant versions, each table's ids) handed out, by table. */
  counters(): Promise<Map<string, bigint>>;
  setCounters(counters: Map<string, bigint>): Promise<void>;
  /** Commits what it wrote, or (failed) rolls it back and removes a file it created. */
  close(commit: boolean): Promise<void>;
}

/** Copies the store at `fromUrl` into the empty or new store at `toUrl`; commits only when every table's check matches. */
export async function copyStore(fromUrl: string, toUrl: string, onProgress: (progress: Progress) => void): Promise<TableCheck[]> {
  const source = await openEnd(fromUrl, 'source');
  try {
    await source.script(SPELLED[source.dialect].begin.snapshot);
    const version = await schemaVersion(source);
    const tables = (await tablesOf(source)).filter((table) => table !== COUNTER_TABLE).sort();
    let total = 0;
    for (const table of tables) total += await count(source, table);
    const counting = (phase: Progress['phase'], done = 0) => async (page: Row[]) =>
      onProgress({ phase, done: (done += page.length), total });
    const target = await openEnd(toUrl, 'target', source);
    let committed = false;
    try {
      await target.script(SPELLED[target.dialect].begin.write);
      await prepareTarget(target, version);
      const checks: TableCheck[] = [];
      const copied = counting('copy');
      for (const table of tables) {
        const columns = await columnsOf(source, table);
        const [rows, sha256] = await readAll(source, table, columns, async (page) => {
          await target.insert(table, columns, page);
          await copied(page);
        });
        checks.push({ table, rows: [rows, 0], sha256: [sha256, ''] });
      }
      await target.setCounters(await source.counters());
      const verified = counting('verify');
      for (const check of checks) {
        const columns = await columnsOf(source, check.table);
        [check.rows[1], check.sha256[1]] = await readAll(target, check.table, columns, verified);
      }
      committed = checks.every(matches);
      await target.close(committed);
      return checks;
    } catch (error) {
      if (!committed) await target.close(false).catch(() => undefined);
      throw error;
    }
  } finally {
    await source.close(false);
  }
}

export function matches({ rows, sha256 }: TableCheck): boolean {
  return rows[0] === rows[1] && sha256[0] === sha256[1];
}

/** Writes a snapshot of the store at `databaseUrl` into the new SQLite file `file`: VACUUM INTO from SQLite, a copy from PostgreSQL. */
export async function backupStore(databaseUrl: string, file: string, onProgress: (progress: Progress) => void): Promise<TableCheck[] | undefined> {
  if (existsSync(file)) throw new StoreCommandError(`${file} exists: a backup never overwrites a file; name a new one.`);
  if (databaseOf(databaseUrl) !== 'sqlite') return copyStore(databaseUrl, `sqlite:${file}`, onProgress);
  const source = await openEnd(databaseUrl, 'source');
  let written = false;
  try {
    await schemaVersion(source);
    preparePrivateFiles(file);
    written = true;
    // One statement, one read transaction: a consistent snapshot, while the service's writes go on (WAL).
    await source.query(sql`VACUUM INTO ${resolve(file)}`);
    // VACUUM INTO leaves the flush to the caller.
    const fd = openSync(file, 'r');
    fsyncSync(fd);
    closeSync(fd);
    return undefined;
  } catch (error) {
    if (written) removeDatabase(file);
    throw error;
  } finally {
    await source.close(false);
  }
}

async function openEnd(url: string, role: Role, source?: End): Promise<End> {
  const database = databaseOf(url);
  if (database === 'sqlite') return openSqlite(url.slice('sqlite:'.length), role, source);
  if (database === 'postgresql') return openPostgres(url, role, source);
  const scheme = /^[a-z][a-z0-9+.-]*:/i.exec(url)?.[0] ?? 'unrecognised';
  const got = `got a "${scheme}" URL`;
  throw new StoreCommandError(`The ${role} URL must look like sqlite:<path> or ${POSTGRES_URL}; ${got}.`);
}

/** The first value of each row. */
async function firstValues(end: End, statement: Sql): Promise<string[]> {
  return (await end.query(statement)).map(([name]) => name as string);
}

function tablesOf(end: End): Promise<string[]> {
  return firstValues(end, SPELLED[end.dialect].tables);
}

function columnsOf(end: End, table: string): Promise<string[]> {
  return firstValues(end, SPELLED[end.dialect].columns(table));
}

async function count(end: End, table: string): Promise<number> {
  const [[rows]] = (await end.query(sql`SELECT count(*) FROM ${raw(table)}`)) as [[bigint]];
  return Number(rows);
}

async function schemaVersion(end: End): Promise<number> {
  if (!(await tablesOf(end)).includes('schema_migrations')) {
    throw new StoreCommandError(`${end.name} holds no plant store (it has no schema_migrations table): check the URL.`);
  }
  const [[max]] = (await end.query(sql`SELECT max(version) FROM schema_migrations`)) as [[Value]];
  const version = Number(max ?? 0);
  const latest = migrations.at(-1)!.version;
  if (version > latest) {
    throw new StoreCommandError(`${end.name} is at schema version ${version}, newer than this code knows (${latest}): run the command from the release that wrote it, or a later one.`);
  }
  return version;
}

/** Builds the source's schema version in a new target; an existing one must hold no data and be at that version. */
async function prepareTarget(target: End, version: number): Promise<void> {
  const present = (await tablesOf(target)).filter((table) => table !== COUNTER_TABLE);
  if (present.length === 0) {
    for (const script of schemaScripts(target.dialect, version)) await target.script(script);
    return;
  }
  for (const table of present) {
    if (table !== 'schema_migrations' && (await count(target, table)) > 0) {
      throw new StoreCommandError(`${target.name} holds data (table ${table}): the target must be new or empty; it was left untouched.`);
    }
  }
  const existing = await schemaVersion(target);
  if (existing !== version) {
    throw new StoreCommandError(`${target.name} holds an empty store at schema version ${existing}, not the source's ${version}: give a new database or file; it was left untouched.`);
  }
  await target.query(sql`DELETE FROM schema_migrations`);
}

/** Reads a table page by page in key order, handing each page on; answers its row count and its content's SHA-256. */
async function readAll(end: End, table: string, columns: string[], each: (page: Row[]) => Promise<void>): Promise<[number, string]> {
  const hash = createHash('sha256');
  let rows = 0;
  const [key, select] = [raw(columns[0]!), raw(`SELECT ${columns.join(', ')} FROM ${table}`)];
  const after = (last?: Value) => (last === undefined ? raw('') : sql`WHERE ${key} > ${last}`);
  const pageAfter = (last?: Value) => end.query(sql`${select} ${after(last)} ORDER BY ${key} LIMIT ${BATCH_LIMIT}`);
  for (let page = await pageAfter(); page.length > 0; page = await pageAfter(page.at(-1)![0])) {
    // Each value as both stores mean it: times as ISO 8601 text, integers as digits, text as it is.
    for (const row of page) hash.update(JSON.stringify(row.map(canonical)));
    rows += page.length;
    await each(page);
  }
  return [rows, hash.digest('hex')];
}

function canonical(value: Value): string | null {
  if (value instanceof Date) return value.toISOString();
  return typeof value === 'bigint' || typeof value === 'number' ? `#${value}` : value;
}

function removeDatabase(path: string): void {
  for (const file of [path, ...companionFiles(path)]) rmSync(file, { force: true });
}

function openSqlite(path: string, role: Role, source?: End): End {
  const name = `The ${role} sqlite:${path}`;
  if (path === '') {
    throw new StoreCommandError(`The ${role} URL sqlite: needs a file path, for example sqlite:./data/plants.db.`);
  }
  const exists = existsSync(path);
  if (role === 'source' && !exists) throw new StoreCommandError(`${name} does not exist: check the path.`);
  const identity = exists ? realpathSync(path) : resolve(path);
  if (source?.dialect === 'sqlite' && source.identity === identity) {
    throw new StoreCommandError(`${SAME} give a new file or an empty database as the target.`);
  }
  let db: DatabaseSync;
  try {
    // A new file is made 0600, in a directory only this user may change (as the service's own).
    if (!exists) preparePrivateFiles(path);
    db = new DatabaseSync(path, { readOnly: role === 'source' });
    if (role === 'target') db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;');
  } catch (error) {
    if (!exists) removeDatabase(path);
    throw new StoreCommandError(`${name} cannot be opened: ${(error as Error).message}.`, { cause: error });
  }
  const query = async ({ sql: text, values }: Sql) => {
    const statement = db.prepare(text);
    statement.setReadBigInts(true);
    statement.setReturnArrays(true);
    return statement.all(...(values as never[])) as unknown as Row[];
  };
  const inserts = new Map<string, StatementSync>();
  return {
    dialect: 'sqlite',
    name,
    identity,
    query,
    script: async (text) => db.exec(text),
    async insert(table, columns, rows) {
      let insert = inserts.get(table);
      if (!insert) {
        insert = db.prepare(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join()})`);
        inserts.set(table, insert);
      }
      // PostgreSQL's times arrive as Dates and its int4 as numbers: SQLite keeps ISO 8601 text and exact integers.
      const bound = (value: Value) =>
        (value instanceof Date ? value.toISOString() : Number.isInteger(value) ? BigInt(value as number) : value);
      for (const row of rows) insert.run(...row.map(bound));
    },
    async counters() {
      const versions = (await query(SPELLED.sqlite.tables)).some(([table]) => table === COUNTER_TABLE);
      const rows = [
        ...(versions ? await query(raw(`SELECT '${COUNTER_TABLE}', last FROM ${COUNTER_TABLE}`)) : []),
        ...(await query(sql`SELECT name, seq FROM sqlite_sequence`)),
      ];
      return new Map(rows.map(([name, last]) => [name as string, BigInt(last as bigint)]));
    },
    async setCounters(counters) {
      for (const [name, last] of counters) {
        if (name === COUNTER_TABLE) {
          await query(sql`UPDATE ${raw(COUNTER_TABLE)} SET last = max(last, ${last})`);
          continue;
        }
        await query(sql`DELETE FROM sqlite_sequence WHERE name = ${name}`);
        await query(sql`INSERT INTO sqlite_sequence (name, seq) VALUES (${name}, ${last})`);
      }
    },
    async close(commit) {
      if (db.isTransaction) db.exec(commit ? 'COMMIT' : 'ROLLBACK');
      db.close();
      if (!commit && !exists) removeDatabase(path);
    },
  };
}

async function openPostgres(url: string, role: Role, source?: End): Promise<End> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(url);
  } catch {
    throw new StoreCommandError(`The ${role} URL is not a valid PostgreSQL URL: write it as ${POSTGRES_URL}.`);
  }
  const [host, port] = [parsed.host || 'localhost', parsed.port || '5432'];
  const [database, name] = [parsed.database, `The ${role} database ${parsed.database ?? ''} at ${host}:${port}`];
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000, types: EXACT_TYPES });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    const { code, message } = error as { code?: string; message: string };
    const createdb = `createdb -h ${host} -p ${port} ${database}`;
    const create = role === 'source' ? 'check the database name' : `create it (${createdb})`;
    if (code === '3D000') throw new StoreCommandError(`${name} does not exist: ${create}.`);
    const fix = error instanceof pg.DatabaseError
      ? `refused the connection: ${message}: fix the user or password in the URL, or the server's access rules.`
      : `cannot be reached (${message}): start it, or fix the host and port in the URL.`;
    throw new StoreCommandError(`${name} ${fix}`);
  }
  const query = async ({ text, values }: Sql) => (await client.query({ text, values, rowMode: 'array' })).rows as Row[];
  const where = raw(`SELECT
    concat_ws(' ', inet_server_addr(), inet_server_port(), current_database(), current_schema())`);
  const [[identity]] = (await query(where)) as [[string]];
  if (source?.dialect === 'postgres' && source.identity === identity) {
    await client.end();
    throw new StoreCommandError(`${SAME} give a new, empty database as the target.`);
  }
  /** Each table's column types, by column name: what its arrays are cast to on insert. */
  const types = new Map<string, Map<string, string>>();
  return {
    dialect: 'postgres',
    name,
    identity,
    query,
    async script(text) {
      await client.query(text);
    },
    async insert(table, columns, rows) {
      if (!types.has(table)) {
        types.set(table, new Map((await query(SPELLED.postgres.columns(table))) as [string, string][]));
      }
      const typeOf = types.get(table)!;
      const input = unnest(columns.map((column, at) => [rows.map((row) => exact(row[at])), `${typeOf.get(column)}[]`]));
      // Ids the database numbers are kept as they were.
      const into = raw(`${table} (${columns.join(', ')})`);
      await query(sql`INSERT INTO ${into} OVERRIDING SYSTEM VALUE SELECT * FROM ${input}`);
    },
    async counters() {
      const sequences = await query(raw(`SELECT '${COUNTER_TABLE}', to_regclass('${COUNTER_TABLE}')::text
        UNION ALL SELECT table_name, pg_get_serial_sequence(quote_ident(table_name), column_name)
        FROM information_schema.columns WHERE table_schema = current_schema() AND is_identity = 'YES'`));
      const counters = new Map<string, bigint>();
      for (const [name, sequence] of sequences) {
        if (sequence === null) continue;
        const lastValue = raw(`SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ${sequence}`);
        const [[last]] = (await query(lastValue)) as [[bigint]];
        counters.set(name as string, last);
      }
      return counters;
    },
    async setCounters(counters) {
      for (const [name, last] of counters) {
        if (last < 1n) continue;
        const sequence = name === COUNTER_TABLE ? `'${name}'` : `pg_get_serial_sequence('${name}', 'id')`;
        await query(sql`SELECT setval(${raw(sequence)}, ${String(last)})`);
      }
    },
    async close(commit) {
      try {
        if (commit) await client.query('COMMIT');
      } finally {
        await client.end();
      }
    },
  };
}
