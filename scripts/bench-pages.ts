// Page latency at two store sizes (npm run bench:pages). Fills a fresh store with 1,000 and then
// 1,000,000 plants and times, over a real socket, the first page and a deep page of GET /plants,
// unfiltered and filtered by tag. Keyset pagination should make the four figures size-independent.
// A fresh SQLite file by default; BENCH_DATABASE_URL=postgres://... names an empty PostgreSQL
// database (or schema) to fill instead.
import { request, Agent } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { encodeCursor } from '../src/contract/paging.ts';
import { openStore } from '../src/store/factory.ts';
import { integerSetting } from '../test/harness/settings.ts';

const SIZES = [1_000, 1_000_000];
const SAMPLES = integerSetting('BENCH_SAMPLES', 500, 1);
const PAGE = 100;
const TOKEN = 'bench-token-0123456789abcdef';
const FILL_BATCH = 10_000;

const dir = mkdtempSync(join(tmpdir(), 'plants-bench-'));
const databaseUrl = process.env.BENCH_DATABASE_URL ?? `sqlite:${join(dir, 'plants.db')}`;
const store = await openStore(databaseUrl, { poolSize: 20 });
const app = await buildApp({
  config: { ...loadConfig({}), apiTokens: [TOKEN], logLevel: 'warn', authFailuresPerMinute: 0 },
  store,
});
await app.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.server.address() as AddressInfo;
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

console.log(`GET /plants page latency on ${databaseUrl.split(':')[0]}, limit ${PAGE}, ${SAMPLES} sequential requests each, one keep-alive connection`);
console.log(`${'plants'.padStart(10)}  ${'page'.padEnd(28)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)}`);
let filled = 0;
for (const size of SIZES) {
  const started = performance.now();
  filled = await fill(filled, size);
  process.stderr.write(`filled ${size.toLocaleString('en')} plants in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  // Cursors that start the last full page: the last 100 plants, and the last 100 ferns (every tenth id).
  const lastPage = encodeCursor(BigInt(size - PAGE - 1));
  const lastFerns = encodeCursor(BigInt(size - PAGE * 10 - 1));
  const cases: [string, string][] = [
    ['first page', `/plants?limit=${PAGE}`],
    ['last page (cursor)', `/plants?limit=${PAGE}&cursor=${lastPage}`],
    ['first page, tag=fern', `/plants?limit=${PAGE}&tag=fern`],
    ['last page, tag=fern', `/plants?limit=${PAGE}&tag=fern&cursor=${lastFerns}`],
  ];
  await latency(cases[0]![1]); // warm-up, so the first row does not pay for the JIT
  for (const [label, path] of cases) {
    const [p50, p99] = await latency(path);
    console.log(`${size.toLocaleString('en').padStart(10)}  ${label.padEnd(28)} ${p50.toFixed(3).padStart(8)} ${p99.toFixed(3).padStart(8)}`);
  }
}
agent.destroy();
await app.close();
await store.close();
rmSync(dir, { recursive: true, force: true });

/** Ids from..to-1; every tenth plant is tagged "fern". Batches share one transaction (group commit). */
async function fill(from: number, to: number): Promise<number> {
  for (let start = from; start < to; start += FILL_BATCH) {
    const end = Math.min(start + FILL_BATCH, to);
    const creates = [];
    for (let id = start; id < end; id++) {
      creates.push(store.plants.createPlant({ id: BigInt(id), name: `plant ${id}`, ...(id % 10 === 0 && { tag: 'fern' }) }));
    }
    await Promise.all(creates);
  }
  return to;
}

async function latency(path: string): Promise<[number, number]> {
  const timings: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    const { status, body } = await get(path);
    timings.push(performance.now() - started);
    const plants = body.match(/"id":/g)?.length ?? 0;
    if (status !== 200 || plants !== PAGE) throw new Error(`${path} answered ${status} with ${plants} plants: ${body.slice(0, 200)}`);
  }
  timings.sort((a, b) => a - b);
  return [timings[Math.floor(SAMPLES * 0.5)]!, timings[Math.floor(SAMPLES * 0.99)]!];
}

function get(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent, headers: { authorization: `Bearer ${TOKEN}` } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject).end();
  });
}
