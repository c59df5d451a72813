// Health under heavy reads (npm run bench:load). A service process (npm start's Node and entry) on
// a store whose pages of 1,000 plants are about 0.8 MB answers READERS keep-alive clients, each
// reading GET /plants?limit=1000 again as soon as its answer ends (a 503 is not waited out), while
// a probe opens a new connection for GET /healthz every 100 ms, as a Kubernetes liveness probe
// does. It prints the probe's latency, how many probes took over 1 s (a 1 s probe timeout), and
// what the readers got, once per setting in BENCH_CASES. BENCH_BEFORE=<another checkout, with its
// own node_modules> measures its service (with its defaults) in the same run.
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { freePort } from '../test/harness/ports.ts';
import { integerSetting } from '../test/harness/settings.ts';
import { fillLargePlants, TOKEN } from '../test/harness/large-plants.ts';

const READERS = integerSetting('BENCH_READERS', 64, 1);
const SECONDS = integerSetting('BENCH_SECONDS', 15, 1);
const ROOT = resolve(import.meta.dirname, '..');
const BEFORE = process.env.BENCH_BEFORE ? resolve(process.env.BENCH_BEFORE) : undefined;

/** The settings compared: the defaults, and shedding turned off. */
const CASES: [string, string, Record<string, string>][] = process.env.BENCH_CASES ? JSON.parse(process.env.BENCH_CASES) : [
  ['this', 'defaults', {}],
  ['this', 'one at once', { PAGE_READS_AT_ONCE: '1' }],
  ['this', 'no shedding', { MAX_EVENT_LOOP_DELAY: '0s', MAX_HEAP_USED_PERCENT: '0', PAGE_READS_AT_ONCE: '0' }],
  ...(BEFORE ? [['before', 'defaults', {}] as [string, string, Record<string, string>]] : []),
];

interface Figures {
  probes: number[];
  pages: Map<number, number>;
  failures: number;
}

const dir = mkdtempSync(join(tmpdir(), 'plants-bench-load-'));
const dbPath = join(dir, 'plants.db');
await fillLargePlants(dbPath);

console.log(`GET /healthz (new connection every 100 ms) while ${READERS} keep-alive clients read GET /plants?limit=1000 (0.8 MB) for ${SECONDS} s`);
console.log(`${'service'.padEnd(8)} ${'settings'.padEnd(12)} ${'probes'.padStart(6)} ${'p50 ms'.padStart(7)} ${'p99 ms'.padStart(7)} ${'max ms'.padStart(7)} ${'>1 s'.padStart(5)} ${'pages/s'.padStart(8)} ${'503s/s'.padStart(7)} ${'failed'.padStart(6)} ${'load'.padStart(5)}`);
for (const [label, settings, env] of CASES) {
  const root = label === 'before' ? BEFORE! : ROOT;
  print(label, settings, await measure(root, env));
}
rmSync(dir, { recursive: true, force: true });

function print(label: string, settings: string, { probes, pages, failures }: Figures): void {
  const sorted = probes.toSorted((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!.toFixed(0);
  const slow = sorted.filter((ms) => ms > 1000).length;
  const perSecond = (status: number) => ((pages.get(status) ?? 0) / SECONDS).toFixed(1);
  console.log(
    `${label.padEnd(8)} ${settings.padEnd(12)} ${String(sorted.length).padStart(6)} ${at(0.5).padStart(7)} ${at(0.99).padStart(7)} ${sorted.at(-1)!.toFixed(0).padStart(7)} ${String(slow).padStart(5)} ${perSecond(200).padStart(8)} ${perSecond(503).padStart(7)} ${String(failures).padStart(6)} ${loadavg()[0]!.toFixed(1).padStart(5)}`,
  );
  const others = [...pages.keys()].filter((status) => status !== 200 && status !== 503 && status !== 0);
  if (others.length > 0) console.log(`  other statuses: ${others.map((status) => `${status} x${pages.get(status)}`).join(', ')}`);
}

async function measure(root: string, env: Record<string, string>): Promise<Figures> {
  const port = await freePort();
  const copy = join(dir, `copy-${port}.db`);
  copyFileSync(dbPath, copy);
  const child = spawn(join(root, 'node_modules/.bin/node'), [join(root, 'src/entry.js')], {
    env: { ...process.env, PORT: String(port), DATABASE_URL: `sqlite:${copy}`, API_TOKENS: TOKEN, LOG_LEVEL: 'warn', RATE_LIMIT_PER_MINUTE: '', AUTH_FAILURES_PER_MINUTE: '0', ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    while ((await get(port, '/readyz').catch(() => 0)) !== 200) await sleep(100);
    const worker = new Worker(new URL('./load-readers.ts', import.meta.url), { workerData: { port, path: '/plants?limit=1000', readers: READERS, token: TOKEN } });
    await sleep(2000); // the readers reach their steady state
    worker.postMessage('reset');
    const probes: number[] = [];
    const until = performance.now() + SECONDS * 1000;
    while (performance.now() < until) {
      const started = performance.now();
      const status = await get(port, '/healthz');
      if (status !== 200) throw new Error(`/healthz answered ${status}`);
      probes.push(performance.now() - started);
      await sleep(100);
    }
    worker.postMessage('stop');
    const [statuses] = (await once(worker, 'message')) as [Map<number, number>];
    await worker.terminate();
    const figures: Figures = { probes, pages: statuses, failures: statuses.get(0) ?? 0 };
    return figures;
  } finally {
    child.kill('SIGINT');
    await once(child, 'exit');
  }
}

/** The status of a GET on a new connection, whose body is read to its end. */
function get(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers = { 'accept-encoding': 'identity', authorization: `Bearer ${TOKEN}` };
    const outgoing = request({ port, host: '127.0.0.1', path, headers, agent: false }, (incoming) => {
      incoming.resume();
      incoming.on('end', () => resolve(incoming.statusCode ?? 0));
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}
