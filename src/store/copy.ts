// `npm run store -- copy|backup`: a whole store from one read-only snapshot into a new one, in one target transaction, checked table by table before it commits.
import { createHash } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, realpathSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import pg from 'pg';
import { parse } from 'pg-connection-string';
import { databaseOf } from '../config.ts';
import { migrations, schemaScripts } from './migrations.ts';
import type { Dialect } from './sql.ts';
import { EXACT_TYPES } from './postgres.ts';
import { companionFiles, preparePrivateFiles } from './sqlite-files.ts';

/** A copy or backup refused or failed for a reason its one-line message names, with what to do. */
export class StoreCommandError extends Error {}

type Value = string | number | bigint | Date | null;
type Row = Value[];
type Role = 'source' | 'target';

/** Rows per read and per insert: large enough that round trips do not dominate, small enough to stay a few MB. */
const BATCH = 5_000;
/** The table holding SQLite's version counter; it and every sequence are carried as counters, not rows. */
const COUNTER_TABLE = 'plant_versions';

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

/** One side of a copy; its statements are its dialect's, every table keyed by its first column. */
interface End {
  readonly dialect: Dialect;
  /** How messages name it: never with a password. */
  readonly name: string;
  query(text: string, values?: unknown[]): Promise<Row[]>;
  /** Runs statements that take no values and answer no rows (DDL). */
  script(text: string): Promise<void>;
  tables(): Promise<string[]>;
  columns(table: string): Promise<string[]>;
  insert(table: string, columns: string[], rows: Row[]): Promise<void>;
  /** The last number each counter (plant versions, each table's ids) handed out, by table. */
  counters(): Promise<Map<string, bigint>>;
  setCounters(counters: Map<string, bigint>): Promise<void>;
  begin(snapshot: boolean): Promise<void>;
  /** Commits what it wrote, or (failed) rolls it back and removes a file it created. */
  close(commit: boolean): Promise<void>;
}

/** Copies the store at `fromUrl` into the empty or new store at `toUrl`; commits only when every table's check matches. */
export async function copyStore(fromUrl: string, toUrl: string, onProgress: (progress: Progress) => void): Promise<TableCheck[]> {
  const source = await openEnd(fromUrl, 'source');
  try {
    await source.begin(true);
    const version = await schemaVersion(source);
    const tables = (await source.tables()).filter((table) => table !== COUNTER_TABLE).sort();
    let total = 0;
    for (const table of tables) total += await count(source, table);
    const target = await openEnd(toUrl, 'target', source);
    let committed = false;
    try {
      await target.begin(false);
      await prepareTarget(target, version);
      const checks: TableCheck[] = [];
      const copied = { phase: 'copy' as const, done: 0, total };
      for (const table of tables) {
        const columns = await source.columns(table);
        const [rows, sha256] = await readAll(source, table, columns, async (page) => {
          await target.insert(table, columns, page);
          onProgress({ ...copied, done: (copied.done += page.length) });
        });
        checks.push({ table, rows: [rows, 0], sha256: [sha256, ''] });
      }
      await target.setCounters(await source.counters());
      const verified = { phase: 'verify' as const, done: 0, total };
      for (const check of checks) {
        const columns = await source.columns(check.table);
        [check.rows[1], check.sha256[1]] = await readAll(target, check.table, columns, async (page) => onProgress({ ...verified, done: (verified.done += page.length) }));
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
    await source.query('VACUUM INTO ?', [resolve(file)]);
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
  if (database === 'sqlite') return SqliteEnd.open(url.slice('sqlite:'.length), role, source);
  if (database === 'postgresql') return PostgresEnd.open(url, role, source);
  const scheme = /^[a-z][a-z0-9+.-]*:/i.exec(url)?.[0] ?? 'unrecognised';
  throw new StoreCommandError(`The ${role} URL must look like sqlite:<path> or postgres://user:password@host:5432/database; got a "${scheme}" URL.`);
}

async function count(end: End, table: string): Promise<number> {
  const [[rows]] = (await end.query(`SELECT count(*) FROM ${table}`)) as [[bigint]];
  return Number(rows);
}

async function schemaVersion(end: End): Promise<number> {
  if (!(await end.tables()).includes('schema_migrations')) throw new StoreCommandError(`${end.name} holds no plant store (it has no schema_migrations table): check the URL.`);
  const [[max]] = (await end.query('SELECT max(version) FROM schema_migrations')) as [[Value]];
  const version = Number(max ?? 0);
  const latest = migrations.at(-1)!.version;
  if (version > latest) {
    throw new StoreCommandError(`${end.name} is at schema version ${version}, newer than this code knows (${latest}): run the command from the release that wrote it, or a later one.`);
  }
  return version;
}

/** Builds the source's schema version in a new target; an existing one must hold no data and be at that version. */
async function prepareTarget(target: End, version: number): Promise<void> {
  const present = (await target.tables()).filter((table) => table !== COUNTER_TABLE);
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
  await target.query('DELETE FROM schema_migrations');
}

/** Reads a table page by page in key order (its first column: every table's key), handing each page on; answers its row count and the SHA-256 of its content. */
async function readAll(end: End, table: string, columns: string[], each: (page: Row[]) => Promise<void>): Promise<[number, string]> {
  const hash = createHash('sha256');
  let rows = 0;
  const select = `SELECT ${columns.join(', ')} FROM ${table}`;
  const order = `ORDER BY ${columns[0]} LIMIT ${BATCH}`;
  const after = `${select} WHERE ${columns[0]} > ${end.dialect === 'sqlite' ? '?' : '$1'} ${order}`;
  for (let page = await end.query(`${select} ${order}`); page.length > 0; page = await end.query(after, [page.at(-1)![0]])) {
    // Each value as both stores mean it: times as ISO 8601 text, integers as digits, text as it is.
    for (const row of page) hash.update(JSON.stringify(row.map((value) => (value instanceof Date ? value.toISOString() : typeof value === 'bigint' || typeof value === 'number' ? `#${value}` : value))));
    rows += page.length;
    await each(page);
  }
  return [rows, hash.digest('hex')];
}

function removeDatabase(path: string): void {
  for (const file of [path, ...companionFiles(path)]) rmSync(file, { force: true });
}

class SqliteEnd implements End {
  readonly dialect = 'sqlite';
  readonly name: string;
  readonly #db: DatabaseSync;
  readonly #path: string;
  readonly #created: boolean;
  readonly #inserts = new Map<string, StatementSync>();

  private constructor(name: string, path: string, db: DatabaseSync, created: boolean) {
    this.name = name;
    this.#path = path;
    this.#db = db;
    this.#created = created;
  }

  static open(path: string, role: Role, source?: End): SqliteEnd {
    const name = `The ${role} sqlite:${path}`;
    if (path === '') throw new StoreCommandError(`The ${role} URL sqlite: needs a file path, for example sqlite:./data/plants.db.`);
    const exists = existsSync(path);
    if (role === 'source' && !exists) throw new StoreCommandError(`${name} does not exist: check the path.`);
    if (exists && source instanceof SqliteEnd && realpathSync(path) === realpathSync(source.#path)) {
      throw new StoreCommandError('The source and the target are the same database: give a new file or an empty database as the target.');
    }
    try {
      if (role === 'source') return new SqliteEnd(name, path, new DatabaseSync(path, { readOnly: true }), false);
      // A new file is made 0600, in a directory only this user may change (as the service's own).
      if (!exists) preparePrivateFiles(path);
      const db = new DatabaseSync(path);
      db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;');
      return new SqliteEnd(name, path, db, !exists);
    } catch (error) {
      if (role === 'target' && !exists) removeDatabase(path);
      throw new StoreCommandError(`${name} cannot be opened: ${(error as Error).message}.`, { cause: error });
    }
  }

  async query(text: string, values: unknown[] = []): Promise<Row[]> {
    const statement = this.#db.prepare(text);
    statement.setReadBigInts(true);
    statement.setReturnArrays(true);
    return statement.all(...(values as never[])) as unknown as Row[];
  }

  async script(text: string): Promise<void> {
    this.#db.exec(text);
  }

  async tables(): Promise<string[]> {
    const rows = await this.query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%'");
    return rows.map(([name]) => name as string);
  }

  async columns(table: string): Promise<string[]> {
    return (await this.query('SELECT name FROM pragma_table_info(?) ORDER BY cid', [table])).map(([name]) => name as string);
  }

  async insert(table: string, columns: string[], rows: Row[]): Promise<void> {
    let insert = this.#inserts.get(table);
    if (!insert) {
      insert = this.#db.prepare(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`);
      this.#inserts.set(table, insert);
    }
    // PostgreSQL's times arrive as Dates and its int4 as numbers: SQLite keeps ISO 8601 text and exact integers.
    const bound = (value: Value) => (value instanceof Date ? value.toISOString() : typeof value === 'number' && Number.isInteger(value) ? BigInt(value) : value);
    for (const row of rows) insert.run(...row.map(bound));
  }

  async counters(): Promise<Map<string, bigint>> {
    const tables = await this.tables();
    const rows = [
      ...(tables.includes(COUNTER_TABLE) ? await this.query(`SELECT '${COUNTER_TABLE}', last FROM ${COUNTER_TABLE}`) : []),
      ...(await this.query('SELECT name, seq FROM sqlite_sequence')),
    ];
    return new Map(rows.map(([name, last]) => [name as string, BigInt(last as bigint)]));
  }

  async setCounters(counters: Map<string, bigint>): Promise<void> {
    for (const [name, last] of counters) {
      if (name === COUNTER_TABLE) await this.query(`UPDATE ${COUNTER_TABLE} SET last = max(last, ?)`, [last]);
      else await this.script(`DELETE FROM sqlite_sequence WHERE name = '${name}'; INSERT INTO sqlite_sequence (name, seq) VALUES ('${name}', ${last})`);
    }
  }

  async begin(snapshot: boolean): Promise<void> {
    // Another process's write lock is waited for, as the service does at its start.
    this.#db.exec(`PRAGMA busy_timeout = 5000; BEGIN ${snapshot ? 'DEFERRED' : 'IMMEDIATE'}`);
  }

  async close(commit: boolean): Promise<void> {
    if (this.#db.isTransaction) this.#db.exec(commit ? 'COMMIT' : 'ROLLBACK');
    this.#db.close();
    if (!commit && this.#created) removeDatabase(this.#path);
  }
}

class PostgresEnd implements End {
  readonly dialect = 'postgres';
  readonly name: string;
  readonly identity: string;
  readonly #client: pg.Client;
  /** Each table's column types, by column name: what its arrays are cast to on insert. */
  readonly #types = new Map<string, Map<string, string>>();

  private constructor(name: string, client: pg.Client, identity: string) {
    this.name = name;
    this.#client = client;
    this.identity = identity;
  }

  static async open(url: string, role: Role, source?: End): Promise<PostgresEnd> {
    let parsed: ReturnType<typeof parse>;
    try {
      parsed = parse(url);
    } catch {
      throw new StoreCommandError(`The ${role} URL is not a valid PostgreSQL URL: write it as postgres://user:password@host:5432/database.`);
    }
    const at = `${parsed.host || 'localhost'}:${parsed.port || '5432'}`;
    const name = `The ${role} database ${parsed.database ?? ''} at ${at}`;
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000, types: EXACT_TYPES });
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (error) {
      await client.end().catch(() => undefined);
      const { code, message } = error as { code?: string; message: string };
      if (code === '3D000') throw new StoreCommandError(`${name} does not exist: ${role === 'source' ? 'check the database name' : `create it (createdb -h ${parsed.host || 'localhost'} -p ${parsed.port || '5432'} ${parsed.database})`}.`);
      if (error instanceof pg.DatabaseError) throw new StoreCommandError(`${name} refused the connection: ${message}: fix the user or password in the URL, or the server's access rules.`);
      throw new StoreCommandError(`${name} cannot be reached (${message}): start it, or fix the host and port in the URL.`);
    }
    const [[identity]] = (await client.query({ text: "SELECT concat_ws(' ', inet_server_addr(), inet_server_port(), current_database(), current_schema())", rowMode: 'array' })).rows as [[string]];
    const end = new PostgresEnd(name, client, identity);
    if (source instanceof PostgresEnd && source.identity === identity) {
      await end.close(false);
      throw new StoreCommandError('The source and the target are the same database: give a new, empty database as the target.');
    }
    return end;
  }

  async query(text: string, values: unknown[] = []): Promise<Row[]> {
    return (await this.#client.query({ text, values, rowMode: 'array' })).rows as Row[];
  }

  async script(text: string): Promise<void> {
    await this.#client.query(text);
  }

  async tables(): Promise<string[]> {
    const rows = await this.query("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'");
    return rows.map(([name]) => name as string);
  }

  async columns(table: string): Promise<string[]> {
    const rows = await this.query('SELECT column_name, udt_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position', [table]);
    this.#types.set(table, new Map(rows.map(([name, type]) => [name as string, type as string])));
    return rows.map(([name]) => name as string);
  }

  async insert(table: string, columns: string[], rows: Row[]): Promise<void> {
    if (!this.#types.has(table)) await this.columns(table);
    const types = this.#types.get(table)!;
    // One array per column, unnested into rows: one statement per page. Ids the database numbers are taken as they were.
    const arrays = columns.map((_, at) => rows.map((row) => (typeof row[at] === 'bigint' ? String(row[at]) : row[at])));
    const unnest = columns.map((column, at) => `$${at + 1}::${types.get(column)}[]`).join(', ');
    await this.query(`INSERT INTO ${table} (${columns.join(', ')}) OVERRIDING SYSTEM VALUE SELECT * FROM unnest(${unnest})`, arrays);
  }

  async counters(): Promise<Map<string, bigint>> {
    const sequences = await this.query(`SELECT '${COUNTER_TABLE}', to_regclass('${COUNTER_TABLE}')::text UNION ALL SELECT table_name, pg_get_serial_sequence(quote_ident(table_name), column_name)
      FROM information_schema.columns WHERE table_schema = current_schema() AND is_identity = 'YES'`);
    const counters = new Map<string, bigint>();
    for (const [name, sequence] of sequences) {
      if (sequence === null) continue;
      const [[last]] = (await this.query(`SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ${sequence as string}`)) as [[bigint]];
      counters.set(name as string, last);
    }
    return counters;
  }

  async setCounters(counters: Map<string, bigint>): Promise<void> {
    for (const [name, last] of counters) {
      if (last < 1n) continue;
      const sequence = name === COUNTER_TABLE ? `'${name}'` : `pg_get_serial_sequence('${name}', 'id')`;
      await this.query(`SELECT setval(${sequence}, $1)`, [String(last)]);
    }
  }

  async begin(snapshot: boolean): Promise<void> {
    await this.#client.query(snapshot ? 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY' : 'BEGIN');
  }

  async close(commit: boolean): Promise<void> {
    try {
      if (commit) await this.#client.query('COMMIT');
    } finally {
      await this.#client.end();
    }
  }
}
