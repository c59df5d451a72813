// PostgreSQL for tests: the server on 127.0.0.1:5432 (role root, trust auth). Each test process
// creates its own uniquely named database and drops it when it ends; each store opened in it
// gets a fresh schema. With CI=true a missing server is a failure; elsewhere, a visible skip.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import tap from 'tap';

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
  const name = `plants_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await admin((client) => client.query(`CREATE DATABASE ${name}`));
  tap.teardown(() => admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)));
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

let schemas = 0;

/** A URL whose connections work in a schema of their own, created now, in this process's database. */
export async function freshSchemaUrl(): Promise<string> {
  const url = new URL(await testDatabaseUrl());
  const schema = `s${++schemas}_${randomBytes(3).toString('hex')}`;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await client.end();
  }
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
