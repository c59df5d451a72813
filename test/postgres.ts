// PostgreSQL for tests: the server on 127.0.0.1:5432 (role root, trust auth). Each test process
// creates its own uniquely named database and drops it when it ends; each store opened in it
// gets a fresh schema. With CI=true a missing server is a failure; elsewhere, a visible skip.
import { randomBytes } from 'node:crypto';
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

/** A new empty database on the shared server, dropped when `t` ends; its name. */
export async function freshDatabase(t: Pick<Test, 'teardown'>, prefix: string): Promise<string> {
  const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  await withClient(ADMIN_URL, (client) => client.query(`CREATE DATABASE ${name}`));
  t.teardown(() => withClient(ADMIN_URL, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)));
  return name;
}

/** The shared server's URL for `database`. */
export function databaseUrl(database: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

let schemas = 0;

/** A URL whose connections work in a schema of their own, created now, in this process's database. */
export async function freshSchemaUrl(): Promise<string> {
  const url = new URL(await testDatabaseUrl());
  const schema = `s${++schemas}_${randomBytes(3).toString('hex')}`;
  await withClient(url.toString(), (client) => client.query(`CREATE SCHEMA ${schema}`));
  url.searchParams.set('options', `-c search_path=${schema}`);
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
