// PostgreSQL for tests: the server on 127.0.0.1:5432 (role root, trust auth). Each test process
// creates its own uniquely named database and drops it when it ends; each store opened in it
// gets a fresh schema. With CI=true a missing server is a failure; elsewhere, a visible skip.
// A test process killed before its teardown (a tap timeout) cannot drop its databases: each one is
// marked with its maker, and the next test process to create one drops those whose maker is gone.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import tap, { type Test } from 'tap';

export const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/test';

/** Why PostgreSQL cannot be used here, or undefined when it answers. */
export async function postgresProblem(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (error) {
    return (error as Error).message;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Options for t.test: skip visibly without PostgreSQL, except in CI, where the test runs and fails. */
export async function postgresTestOptions(): Promise<{ skip: string | false }> {
  const problem = await postgresProblem();
  if (problem === undefined || process.env.CI === 'true') return { skip: false };
  return { skip: `PostgreSQL does not answer at ${ADMIN_URL} (${problem}); PostgreSQL tests skipped` };
}

let database: Promise<string> | undefined;

/** The URL of this process's own database, created on first use and dropped at exit. */
export function testDatabaseUrl(): Promise<string> {
  database ??= createDatabase();
  return database;
}

async function createDatabase(): Promise<string> {
  return databaseUrl(await freshDatabase(tap, 'plants_test'));
}

let swept: Promise<unknown> | undefined;

/** A new empty database on the shared server, dropped when `t` ends (or, past a kill, by the next run); its name. */
export async function freshDatabase(t: Pick<Test, 'teardown'>, prefix: string): Promise<string> {
  swept ??= withClient(ADMIN_URL, dropOrphanedDatabases);
  await swept;
  const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  await withClient(ADMIN_URL, async (client) => {
    await client.query(`CREATE DATABASE ${name}`);
    const maker = processIdentity(process.pid);
    if (maker !== undefined) await client.query(`COMMENT ON DATABASE ${name} IS '${MADE_BY}${maker}'`);
  });
  t.teardown(() => withClient(ADMIN_URL, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)));
  return name;
}

const MADE_BY = 'plant-store test database made by ';

/**
 * Drops the test databases whose maker has ended on this machine since this boot (a test process
 * killed before its teardown); answers their names. Those of live processes, of other machines and
 * of other boots are left alone.
 */
export async function dropOrphanedDatabases(client: pg.Client): Promise<string[]> {
  const { rows } = await client.query<{ name: string; maker: string }>(
    `SELECT datname AS name, substr(shobj_description(oid, 'pg_database'), $2) AS maker FROM pg_database WHERE starts_with(shobj_description(oid, 'pg_database'), $1)`,
    [MADE_BY, MADE_BY.length + 1],
  );
  const bootId = processIdentity(process.pid)?.split(' ')[0];
  const orphaned = rows.filter(({ maker }) => {
    const [boot, pid] = maker.split(' ');
    return boot === bootId && processIdentity(Number(pid)) !== maker;
  });
  const dropped: string[] = [];
  for (const { name } of orphaned) {
    // Another test process starting now may be dropping it too: then it is gone either way.
    const gone = await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).then(() => true, () => false);
    if (gone) dropped.push(name);
  }
  return dropped;
}

/** `<boot id> <pid> <start time>`: one process of one boot of this machine, whatever pid is reused later; undefined without Linux's /proc. */
function processIdentity(pid: number): string | undefined {
  try {
    const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22, the start time in clock ticks since boot, counted from the state, field 3, after the command's ')'.
    const startTime = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    return `${bootId} ${pid} ${startTime}`;
  } catch {
    return undefined;
  }
}

/** The shared server's URL for `database`. */
export function databaseUrl(database: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

let schemas = 0;

/**
 * A URL whose connections work in a schema of their own, created now, in this process's database;
 * their commits do not wait for the shared server's disk (a test needs no durability past a crash of
 * PostgreSQL itself, and each store's migrations are a dozen commits).
 */
export async function freshSchemaUrl(): Promise<string> {
  const url = new URL(await testDatabaseUrl());
  const schema = `s${++schemas}_${randomBytes(3).toString('hex')}`;
  await withClient(url.toString(), (client) => client.query(`CREATE SCHEMA ${schema}`));
  url.searchParams.set('options', `-c search_path=${schema} -c synchronous_commit=off`);
  return url.toString();
}

/** `work` on a client of its own connected to `url`, ended whatever happens. */
export async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
