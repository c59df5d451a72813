// Peak memory of a burst of large compressed reads (npm run bench:compression). For each encoding
// (none, gzip, br) a fresh service process (npm start's Node and entry) on a store whose pages of
// 1,000 plants are over 1 MB answers BURST concurrent GET /plants?limit=1000; the script prints
// the process's peak RSS (VmHWM), its RSS 2 s after the burst, and how many requests were answered.
// `foo;br` and `x-gzip` are odd spellings that @fastify/compress reads as br and gzip.
// Then anonymous /metrics, after a flood of odd methods and paths, read METRICS_BURST times at
// once with br and with foo;br.
// PAGE_READS_QUEUED and MAX_CONNECTIONS are raised past the bursts: every read is served, compressed or not.
// BENCH_BEFORE=<another checkout, with its own node_modules> measures its service in the same run.
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../test/harness/ports.ts';
import { memoryMb } from '../test/harness/proc-figures.ts';
import { integerSetting } from '../test/harness/settings.ts';
import { fillLargePlants, TOKEN } from '../test/harness/large-plants.ts';

const BURST = integerSetting('BENCH_BURST', 256, 1);
const METRICS_BURST = integerSetting('BENCH_METRICS_BURST', 1024, 1);
const ROOT = resolve(import.meta.dirname, '..');
const BEFORE = process.env.BENCH_BEFORE ? resolve(process.env.BENCH_BEFORE) : undefined;

const dir = mkdtempSync(join(tmpdir(), 'plants-bench-compression-'));
const dbPath = join(dir, 'plants.db');
await fillLargePlants(dbPath);

interface Figures {
  peakMb: number;
  afterMb: number;
  answered: number;
  /** Statuses other than 200, with their counts (0: the connection failed). */
  others: string;
  wireMb: number;
}

console.log(`Peak RSS of one service process answering ${BURST} concurrent GET /plants?limit=1000 (pages of over 1 MB), and ${METRICS_BURST} concurrent GET /metrics`);
console.log(`${'service'.padEnd(10)} ${'case'.padEnd(18)} ${'peak MB'.padStart(8)} ${'after MB'.padStart(9)} ${'answered'.padStart(9)} ${'wire MB'.padStart(8)}`);
for (const [label, root] of [['this', ROOT], ...(BEFORE ? [['before', BEFORE]] : [])] as [string, string][]) {
  for (const encoding of ['identity', 'gzip', 'br', 'foo;br', 'x-gzip']) print(label, `page ${encoding}`, await measure(root, '/plants?limit=1000', encoding, BURST, true));
  for (const encoding of ['br', 'foo;br']) print(label, `metrics ${encoding}`, await measure(root, '/metrics', encoding, METRICS_BURST, false));
}
rmSync(dir, { recursive: true, force: true });

function print(label: string, what: string, f: Figures): void {
  console.log(`${label.padEnd(10)} ${what.padEnd(18)} ${f.peakMb.toFixed(0).padStart(8)} ${f.afterMb.toFixed(0).padStart(9)} ${`${f.answered}`.padStart(9)} ${f.wireMb.toFixed(0).padStart(8)}`);
  if (f.others !== '') console.log(`  other statuses: ${f.others}`);
}

async function measure(root: string, path: string, encoding: string, burst: number, auth: boolean): Promise<Figures> {
  const port = await freePort();
  const copy = join(dir, `copy-${port}.db`);
  // Each run on its own copy of the store: the services never share a file.
  copyFileSync(dbPath, copy);
  const child = spawn(join(root, 'node_modules/.bin/node'), [join(root, 'src/entry.js')], {
    env: { ...process.env, PORT: String(port), DATABASE_URL: `sqlite:${copy}`, API_TOKENS: TOKEN, LOG_LEVEL: 'warn', RATE_LIMIT_PER_MINUTE: '', AUTH_FAILURES_PER_MINUTE: '0', PAGE_READS_QUEUED: '1000', MAX_CONNECTIONS: '2000' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    await ready(port);
    if (path === '/metrics') await growMetrics(port);
    const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
    const results = await Promise.all(Array.from({ length: burst }, () => get(port, path, encoding, auth, agent)));
    await sleep(2000);
    return {
      peakMb: memoryMb(child.pid!, 'VmHWM'),
      afterMb: memoryMb(child.pid!, 'VmRSS'),
      answered: results.filter((r) => r.status === 200).length,
      others: otherStatuses(results.map((r) => r.status)),
      wireMb: results.reduce((sum, r) => sum + r.bytes, 0) / 2 ** 20,
    };
  } finally {
    child.kill('SIGINT');
    await new Promise((resolve) => child.once('exit', resolve));
  }
}

function otherStatuses(statuses: number[]): string {
  const counts = new Map<number, number>();
  for (const status of statuses) if (status !== 200) counts.set(status, (counts.get(status) ?? 0) + 1);
  return [...counts].map(([status, count]) => `${status} x${count}`).join(', ');
}

async function ready(port: number): Promise<void> {
  for (;;) {
    const ok = await get(port, '/readyz', 'identity', false).then((r) => r.status === 200, () => false);
    if (ok) return;
    await sleep(100);
  }
}

/** Anonymous requests of many methods and statuses: each new (operation, method, status) adds a histogram. */
async function growMetrics(port: number): Promise<void> {
  const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'TRACE', 'PROPFIND', 'MKCOL', 'LOCK', 'COPY', 'MOVE', 'UNLOCK', 'SEARCH', 'REPORT', 'PURGE', 'QUERY'];
  const paths = ['/plants', '/plants/1', '/plants/x', '/webhooks', '/webhooks/1', '/nowhere', '/healthz', '/plants?limit=x', '/metrics', '/openapi.json'];
  await Promise.all(methods.flatMap((method) => paths.map((path) => send(port, method, path))));
  const size = (await get(port, '/metrics', 'identity', false)).bytes;
  process.stderr.write(`/metrics grown to ${size} bytes\n`);
}

function send(port: number, method: string, path: string): Promise<void> {
  return new Promise((resolve) => {
    const outgoing = request({ port, host: '127.0.0.1', method, path, headers: { 'content-type': 'application/json' } }, (incoming) => {
      incoming.resume();
      incoming.on('end', resolve);
    });
    outgoing.on('error', () => resolve());
    outgoing.end(method === 'POST' || method === 'PUT' ? '{' : undefined);
  });
}

function get(port: number, path: string, encoding: string, auth: boolean, agent?: Agent): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const headers = { 'accept-encoding': encoding, ...(auth && { authorization: `Bearer ${TOKEN}` }) };
    const outgoing = request({ port, host: '127.0.0.1', path, headers, ...(agent && { agent }) }, (incoming) => {
      let bytes = 0;
      incoming.on('data', (chunk: Buffer) => (bytes += chunk.length));
      incoming.on('end', () => resolve({ status: incoming.statusCode ?? 0, bytes }));
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}
