// build(t): a real app on a real SQLite file in a per-test directory, closed when the test ends;
// with CORS_ORIGINS and a rate limit set, so that every answer carries the headers they add.
// api(): app.inject from that origin, plus a check that the response is exactly what openapi.yaml documents.
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { PassThrough } from 'node:stream';
import type { FastifyInstance, InjectOptions } from 'fastify';
import type { Test } from 'tap';
import { buildApp, type AppDependencies } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { parseJson } from '../../src/contract/json.ts';
import { openStore } from '../../src/store/factory.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { PlantStore } from '../../src/store/types.ts';
import { contractProblems } from './contract.ts';
import { freshSchemaUrl } from './postgres.ts';

export const TOKEN = 'test-token-0123456789abcdef';
export const AUTH = { authorization: `Bearer ${TOKEN}` };
/** The page origin build()'s apps allow (CORS_ORIGINS) and api() sends requests from. */
export const TEST_ORIGIN = 'https://app.plants.test';
/** build()'s RATE_LIMIT_PER_MINUTE: every authenticated answer carries X-RateLimit-*, and no test reaches it. */
export const TEST_RATE_LIMIT_PER_MINUTE = 1_000_000;

/** Which driver build() opens: `sqlite` (the default) or `postgres` (see test/http-postgres.test.ts). */
export const TEST_DRIVER = process.env.PLANT_STORE_TEST_DRIVER === 'postgres' ? 'postgres' : 'sqlite';

export interface Built {
  app: FastifyInstance;
  store: PlantStore;
  /** The store's file, when build opened the store itself. */
  dbPath: string;
  /** Every log line written so far. */
  logs: () => string;
}

export type TestConfig = Partial<AppDependencies['config']>;

// Production defaults, but a short retry schedule and timeout so webhook tests finish quickly, and no
// event-loop-delay shedding: on a busy machine the loop lags whatever the test does (test/system/load-shedding sets it to test it).
const DEFAULTS = { ...loadConfig({}), WEBHOOK_RETRY_SCHEDULE: [50, 50, 50], WEBHOOK_TIMEOUT: 2_000, MAX_EVENT_LOOP_DELAY: 0 };

export async function build(t: Test, options: TestConfig = {}, deps: { store?: PlantStore; clock?: () => number } = {}): Promise<Built> {
  // t.testdir() empties the test's directory, so it is made only for a store of our own.
  const dbPath = deps.store || TEST_DRIVER === 'postgres' ? '' : join(t.testdir(), 'plants.db');
  const store = deps.store ?? (TEST_DRIVER === 'postgres' ? await openStore(await freshSchemaUrl(), { poolSize: 4 }) : new SqliteStore(dbPath));
  let logText = '';
  const logStream = new PassThrough();
  logStream.on('data', (chunk: Buffer) => (logText += chunk.toString()));
  const app = await buildApp({
    config: {
      ...DEFAULTS,
      API_TOKENS: [TOKEN],
      LOG_LEVEL: 'silent',
      CORS_ORIGINS: [TEST_ORIGIN],
      RATE_LIMIT_PER_MINUTE: TEST_RATE_LIMIT_PER_MINUTE,
      ...options,
    },
    store,
    logStream,
    ...(deps.clock && { clock: deps.clock }),
  });
  t.teardown(async () => {
    await app.close();
    await store.close();
  });
  return { app, store, dbPath, logs: () => logText };
}

export interface ApiResponse {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
  /** The body parsed like the service parses bodies: integers are BigInt. */
  json: () => unknown;
}

/**
 * Injects the request, from TEST_ORIGIN unless its headers name an Origin (`origin: undefined`: none),
 * and fails the test when the response is not documented in openapi.yaml.
 */
export async function api(t: Test, app: FastifyInstance, request: InjectOptions & { url: string }): Promise<ApiResponse> {
  const response = await app.inject({ ...request, headers: fromTestOrigin(request.headers) });
  const method = request.method ?? 'GET';
  t.same(contractProblems(method, request.url, response), [], `${method} ${request.url} ${response.statusCode} matches openapi.yaml`);
  return {
    statusCode: response.statusCode,
    headers: response.headers,
    body: response.body,
    json: () => parseJson(response.body),
  };
}

/** The headers with `Origin: TEST_ORIGIN` added unless they name an Origin; those set to undefined left out. */
export function fromTestOrigin(headers: InjectOptions['headers'] = {}): NonNullable<InjectOptions['headers']> {
  const given = Object.entries(headers);
  const origin = given.some(([name]) => name.toLowerCase() === 'origin') ? [] : [['origin', TEST_ORIGIN]];
  return Object.fromEntries([...origin, ...given.filter(([, value]) => value !== undefined)]);
}

/** POST /plants with a raw JSON text body, so tests can send what JSON.stringify cannot (int64, 1e3). */
export function createPlant(t: Test, app: FastifyInstance, body: string, headers: Record<string, string> = AUTH) {
  return api(t, app, {
    method: 'POST',
    url: '/plants',
    headers: { 'content-type': 'application/json', ...headers },
    payload: body,
  });
}

/** The rows a query answers on the SQLite file at `path`, read through a connection of its own. */
export function readRows<T = Record<string, unknown>>(path: string, sql: string): T[] {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}
