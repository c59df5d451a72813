// npm run bench:store: rows per second of `npm run store -- copy` for 100,000 and 1,000,000 plants, SQLite to
// PostgreSQL and back (each copy includes its verification, which reads the target back), and of `backup` from
// SQLite; then how long a running service's creates wait while a backup runs, against interleaved rounds of the
// same creates with no backup (the reference). PostgreSQL: TEST_POSTGRES_URL or the local test server.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { backupStore, copyStore } from '../src/store/copy.ts';
import { SqliteStore } from '../src/store/sqlite.ts';
import { Cleanup, serverEnv, startServer } from '../test/harness/process.ts';

const SIZES = [100_000, 1_000_000];
const ROUNDS = 3;
const CLIENTS = 4;
const TOKEN = 'bench-store-token-0123456789abcdef';
const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/test';

/** A store of `plants` plants (ids past 2^53, names of some length, every other one tagged), written in one transaction. */
async function seeded(file: string, plants: number): Promise<void> {
  await new SqliteStore(file).close();
  const db = new DatabaseSync(file);
  const insert = db.prepare('INSERT INTO plants (id, name, tag, version) VALUES (?, ?, ?, ?)');
  db.exec('BEGIN');
  for (let at = 1; at <= plants; at++) insert.run(2n ** 53n + BigInt(at), `Plant number ${at}, a Monstera deliciosa`, at % 2 ? 'tropical' : null, at);
  db.exec('COMMIT');
  db.close();
}

/** Runs the statement on the server's admin database (the test harness's, which would set tap's timeout here). */
async function admin(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

async function newDatabase(name: string): Promise<string> {
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

function dropDatabase(name: string): Promise<void> {
  return admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return (performance.now() - started) / 1000;
}

const rate = (rows: number, seconds: number) => `${Math.round(rows / seconds).toLocaleString('en')} rows/s (${seconds.toFixed(1)} s)`;

async function copies(dir: string): Promise<void> {
  for (const plants of SIZES) {
    const file = join(dir, `plants-${plants}.db`);
    await seeded(file, plants);
    const name = `bench_store_${process.pid}_${plants}`;
    const url = await newDatabase(name);
    const rows = plants + 8; // and the schema's versions
    const there = await timed(() => copyStore(`sqlite:${file}`, url, () => undefined));
    const back = join(dir, `back-${plants}.db`);
    const again = await timed(() => copyStore(url, `sqlite:${back}`, () => undefined));
    const backup = await timed(() => backupStore(`sqlite:${file}`, join(dir, `backup-${plants}.db`), () => undefined));
    console.log(`${plants.toLocaleString('en')} plants: copy SQLite -> PostgreSQL ${rate(rows, there)}; PostgreSQL -> SQLite ${rate(rows, again)}; backup (VACUUM INTO) ${rate(rows, backup)}`);
    await dropDatabase(name);
    for (const each of [back, join(dir, `backup-${plants}.db`)]) rmSync(each);
  }
}

interface Waits { creates: number; p50: number; p99: number; max: number }

function summary(latencies: number[]): Waits {
  const sorted = latencies.toSorted((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { creates: sorted.length, p50: at(0.5), p99: at(0.99), max: sorted.at(-1)! };
}

/** Create latencies of CLIENTS clients on the service while `during` runs. */
async function createsDuring(url: string, next: { id: number }, during: () => Promise<unknown>): Promise<number[]> {
  const latencies: number[] = [];
  const state = { running: true };
  const clients = Array.from({ length: CLIENTS }, async () => {
    while (state.running) {
      const id = ++next.id;
      const started = performance.now();
      const response = await fetch(`${url}/plants`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: `{"id":${id},"name":"live ${id}"}` });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`create answered ${response.status}`);
      latencies.push(performance.now() - started);
    }
  });
  await during();
  state.running = false;
  await Promise.all(clients);
  return latencies;
}

/** A backup as an operator runs it: its own process. Answers its duration. */
function backupProcess(file: string, backup: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['scripts/store.ts', 'backup', backup], { env: { ...process.env, DATABASE_URL: `sqlite:${file}` }, stdio: 'ignore' });
    child.once('exit', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`backup exited ${code}`))));
  });
}

async function writesDuringBackup(dir: string): Promise<void> {
  const plants = SIZES.at(-1)!;
  const file = join(dir, 'live.db');
  await seeded(file, plants);
  const cleanup = new Cleanup();
  try {
    const server = await startServer(cleanup, serverEnv(dir, { DATABASE_URL: `sqlite:${file}`, API_TOKENS: TOKEN }));
    const next = { id: 0 };
    const reference: number[] = [];
    const during: number[] = [];
    let backupMs = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const took = { ms: 0 };
      during.push(...(await createsDuring(server.url, next, async () => (took.ms = await backupProcess(file, join(dir, `live-backup-${round}.db`))))));
      backupMs += took.ms;
      // The reference: the same clients for as long as that backup took.
      reference.push(...(await createsDuring(server.url, next, () => new Promise((resolve) => setTimeout(resolve, took.ms)))));
    }
    const show = ({ creates, p50, p99, max }: Waits) => `${creates} creates, wait p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${max.toFixed(1)} ms`;
    console.log(`Writes of a running service (${CLIENTS} clients, ${plants.toLocaleString('en')} plants), ${ROUNDS} interleaved rounds; a backup process took ${(backupMs / ROUNDS / 1000).toFixed(1)} s on average:`);
    console.log(`  while a backup runs: ${show(summary(during))}`);
    console.log(`  reference, no backup: ${show(summary(reference))}`);
  } finally {
    await cleanup.run();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'bench-store-'));
try {
  await copies(dir);
  await writesDuringBackup(dir);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
