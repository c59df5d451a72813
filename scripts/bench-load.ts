// Health under heavy reads (npm run bench:load). A service process (npm start's Node and entry) on
// a store whose pages of 1,000 plants are about 0.8 MB answers keep-alive readers, each reading its
// GET again as soon as its answer ends (a 503 is not waited out), while a probe opens a new
// connection for GET /healthz every 100 ms, as a Kubernetes liveness probe does. It prints the
// probe's latency, how many probes took over 1 s (a 1 s probe timeout), what the readers got and
// the service's RSS: at rest before the readers, its peak, and for slow readers SETTLE seconds after
// they stop. The readers of a case: READERS clients reading GET /plants?limit=1000 with a token
// (plain, or `foo;br`, which @fastify/compress reads as br), SLOW_READERS such clients reading no
// faster than SLOW_RATE bytes/s each (what a page held for a slow client costs), or 8 anonymous
// clients reading /openapi.json and /openapi.yaml with br. BENCH_BEFORE=<another checkout, with its
// own node_modules> measures its service in the same run. BENCH_OVERLOAD=1 instead measures goodput
// under overload: pages/s and the service's CPU time per page of 256 and 1,024 readers
// (BENCH_OVERLOAD_READERS) with the defaults and with a sweep of the turns' settings, BENCH_ROUNDS
// interleaved rounds of 30 s, and the defaults' median against the best setting's (BENCH_BEFORE: its
// defaults too).
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { freePort } from '../test/harness/ports.ts';
import { cpuMicroseconds, memoryMb } from '../test/harness/proc-figures.ts';
import { integerSetting } from '../test/harness/settings.ts';
import { fillLargePlants, TOKEN } from '../test/harness/large-plants.ts';

const OVERLOAD = process.env.BENCH_OVERLOAD === '1';
const READERS = integerSetting('BENCH_READERS', 64, 1);
// Under overload a setting may stall its loop for seconds: a longer window counts less of the work done before it.
const SECONDS = integerSetting('BENCH_SECONDS', OVERLOAD ? 30 : 15, 1);
const SLOW_READERS = integerSetting('BENCH_SLOW_READERS', 256, 1);
const SLOW_RATE = integerSetting('BENCH_SLOW_RATE', 64 * 1024, 1);
const SETTLE = integerSetting('BENCH_SETTLE', 60, 0);
const ROOT = resolve(import.meta.dirname, '..');
const BEFORE = process.env.BENCH_BEFORE ? resolve(process.env.BENCH_BEFORE) : undefined;
const OVERLOAD_READERS = (process.env.BENCH_OVERLOAD_READERS ?? '256,1024').split(',').map(Number);
const ROUNDS = integerSetting('BENCH_ROUNDS', 3, 1);

/** The overload sweep: the defaults, then settings of the turns one of which may do better (and BENCH_BEFORE's defaults). */
const SWEEP: [string, Record<string, string>, root?: string][] = [
  ['defaults', {}],
  ['queued 64', { PAGE_READS_QUEUED: '64' }],
  ['queued 4096', { PAGE_READS_QUEUED: '4096' }],
  ['1 at once', { PAGE_READS_AT_ONCE: '1', PAGE_READS_QUEUED: '4096' }],
  ['16 at once', { PAGE_READS_AT_ONCE: '16', PAGE_READS_QUEUED: '4096' }],
  ['no turns', { PAGE_READS_AT_ONCE: '0' }],
  ...(BEFORE ? [['before', {}, BEFORE] as [string, Record<string, string>, string]] : []),
];

/** What the readers of a case read: paths taken in turn by reader, its Accept-Encoding, how many, with the token or not, how fast. */
interface Readers {
  paths: string[];
  encoding: string;
  readers: number;
  token: boolean;
  bytesPerSecond?: number;
}

const READER_KINDS: Record<string, Readers> = {
  pages: { paths: ['/plants?limit=1000'], encoding: 'identity', readers: READERS, token: true },
  'pages foo;br': { paths: ['/plants?limit=1000'], encoding: 'foo;br', readers: READERS, token: true },
  'docs br': { paths: ['/openapi.json', '/openapi.yaml'], encoding: 'br', readers: 8, token: false },
  'slow pages': { paths: ['/plants?limit=1000'], encoding: 'identity', readers: SLOW_READERS, token: true, bytesPerSecond: SLOW_RATE },
  'slow pages br': { paths: ['/plants?limit=1000'], encoding: 'br', readers: SLOW_READERS, token: true, bytesPerSecond: SLOW_RATE },
};

// Every slow reader is served: their page reads all wait for a turn at once.
const SLOW_SETTINGS = { PAGE_READS_QUEUED: String(SLOW_READERS) };

/** [service, settings, environment, readers]: the defaults, shedding turned off, and the other readers. */
type Case = [string, string, Record<string, string>, keyof typeof READER_KINDS];
const CASES: Case[] = process.env.BENCH_CASES ? JSON.parse(process.env.BENCH_CASES) : [
  ['this', 'defaults', {}, 'pages'],
  ['this', 'one at once', { PAGE_READS_AT_ONCE: '1' }, 'pages'],
  ['this', 'no shedding', { MAX_EVENT_LOOP_DELAY: '0s', MAX_HEAP_USED_PERCENT: '0', PAGE_READS_AT_ONCE: '0' }, 'pages'],
  ['this', 'defaults', {}, 'pages foo;br'],
  ['this', 'defaults', {}, 'docs br'],
  ...(BEFORE ? (['pages', 'pages foo;br', 'docs br'] as const).map((readers): Case => ['before', 'defaults', {}, readers]) : []),
  // Memory held for slow clients, this service and the one before in turn.
  ...(['slow pages', 'slow pages br'] as const).flatMap((readers): Case[] => [
    ['this', 'all queued', SLOW_SETTINGS, readers],
    ...(BEFORE ? [['before', 'all queued', SLOW_SETTINGS, readers] as Case] : []),
  ]),
];

interface Figures {
  /** How long the readers' answers were counted: SECONDS, and the last probe's wait. */
  seconds: number;
  /** The service's CPU time over those seconds (utime + stime). */
  cpuMs: number;
  probes: number[];
  /** Probes answered other than 200, or not at all. */
  probeFailures: number;
  pages: Map<number, number>;
  failures: number;
  restMb: number;
  peakMb: number;
  /** RSS SETTLE seconds after slow readers stopped. */
  afterMb?: number;
}

const dir = mkdtempSync(join(tmpdir(), 'plants-bench-load-'));
const dbPath = join(dir, 'plants.db');
await fillLargePlants(dbPath);

if (OVERLOAD) await sweep();
else await cases();
rmSync(dir, { recursive: true, force: true });

async function cases(): Promise<void> {
  console.log(
    `GET /healthz (new connection every 100 ms) while keep-alive clients read for ${SECONDS} s: ${READERS} GET /plants?limit=1000 (0.8 MB), ` +
      `${SLOW_READERS} slow ones at ${SLOW_RATE} bytes/s each (RSS ${SETTLE} s after they stop), or 8 anonymous GET /openapi.json|yaml`,
  );
  console.log(
    `${'service'.padEnd(8)} ${'settings'.padEnd(12)} ${'readers'.padEnd(13)} ${'probes'.padStart(6)} ${'p50 ms'.padStart(7)} ${'p95 ms'.padStart(7)} ${'p99 ms'.padStart(7)} ${'max ms'.padStart(7)} ${'>1 s'.padStart(5)} ${'reads/s'.padStart(8)} ${'503s/s'.padStart(7)} ${'failed'.padStart(6)} ${'rest MB'.padStart(8)} ${'peak MB'.padStart(8)} ${'after MB'.padStart(9)} ${'load'.padStart(5)}`,
  );
  for (const [label, settings, env, readers] of CASES) {
    const root = label === 'before' ? BEFORE! : ROOT;
    print(label, settings, readers, await measure(root, env, READER_KINDS[readers]!));
  }
}

/** The quantile q of the sorted figures, as an index into them. */
function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!;
}

function print(label: string, settings: string, readers: string, { seconds, probes, pages, failures, restMb, peakMb, afterMb }: Figures): void {
  const sorted = probes.toSorted((a, b) => a - b);
  const at = (q: number) => quantile(sorted, q).toFixed(0);
  const slow = sorted.filter((ms) => ms > 1000).length;
  const perSecond = (status: number) => ((pages.get(status) ?? 0) / seconds).toFixed(1);
  console.log(
    `${label.padEnd(8)} ${settings.padEnd(12)} ${readers.padEnd(13)} ${String(sorted.length).padStart(6)} ${at(0.5).padStart(7)} ${at(0.95).padStart(7)} ${at(0.99).padStart(7)} ${sorted.at(-1)!.toFixed(0).padStart(7)} ${String(slow).padStart(5)} ${perSecond(200).padStart(8)} ${perSecond(503).padStart(7)} ${String(failures).padStart(6)} ${restMb.toFixed(0).padStart(8)} ${peakMb.toFixed(0).padStart(8)} ${(afterMb?.toFixed(0) ?? '-').padStart(9)} ${loadavg()[0]!.toFixed(1).padStart(5)}`,
  );
  const others = [...pages.keys()].filter((status) => status !== 200 && status !== 503 && status !== 0);
  if (others.length > 0) console.log(`  other statuses: ${others.map((status) => `${status} x${pages.get(status)}`).join(', ')}`);
}

/** Each setting of SWEEP at each count of readers, in interleaved rounds; then the defaults against the best. */
async function sweep(): Promise<void> {
  console.log(`Pages of 1,000 per second, closed-loop readers retrying a 503 at once, ${ROUNDS} rounds of ${SECONDS} s interleaved; /healthz probed every 100 ms`);
  const figures = new Map<string, Figures[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const readers of OVERLOAD_READERS) {
      // Each round starts one setting further on, so that no setting always follows the same one.
      for (const [settings, env, root] of [...SWEEP.slice(round % SWEEP.length), ...SWEEP.slice(0, round % SWEEP.length)]) {
        const key = `${readers} ${settings}`;
        const each = await measure(root ?? ROOT, env, { ...READER_KINDS.pages!, readers });
        figures.set(key, [...(figures.get(key) ?? []), each]);
        console.error(`  round ${round + 1}: ${key}: ${((each.pages.get(200) ?? 0) / each.seconds).toFixed(1)} pages/s, load ${loadavg()[0]!.toFixed(1)}`);
      }
    }
  }
  const median = (values: number[]) => {
    const sorted = values.toSorted((a, b) => a - b);
    return (sorted[Math.floor((sorted.length - 1) / 2)]! + sorted[Math.ceil((sorted.length - 1) / 2)]!) / 2;
  };
  const pagesPerSecond = (each: Figures) => (each.pages.get(200) ?? 0) / each.seconds;
  // A loop that stalls for a good part of the window answers, inside it, pages whose work was done before it: not a rate.
  const stalled = (each: Figures) => Math.max(0, ...each.probes) > (SECONDS * 1000) / 4;
  console.log(
    `${'readers'.padStart(7)} ${'settings'.padEnd(12)} ${'pages/s min'.padStart(11)} ${'median'.padStart(7)} ${'CPU ms/page'.padStart(11)} ${'503s/s'.padStart(7)} ${'failed'.padStart(6)} ${'healthz p95'.padStart(11)} ${'p99 ms'.padStart(7)} ${'unanswered'.padStart(10)} ${'peak MB'.padStart(8)}`,
  );
  for (const readers of OVERLOAD_READERS) {
    const medians = SWEEP.map(([settings]) => {
      const rounds = figures.get(`${readers} ${settings}`)!;
      const pages = rounds.map(pagesPerSecond);
      const probes = rounds.flatMap((each) => each.probes).toSorted((a, b) => a - b);
      const refused = median(rounds.map((each) => (each.pages.get(503) ?? 0) / each.seconds));
      const cpuPerPage = median(rounds.map((each) => each.cpuMs / (each.pages.get(200) ?? 0)));
      const mark = rounds.some(stalled) ? '*' : ' ';
      console.log(
        `${String(readers).padStart(7)} ${settings.padEnd(12)} ${Math.min(...pages).toFixed(1).padStart(11)} ${median(pages).toFixed(1).padStart(6)}${mark} ${cpuPerPage.toFixed(2).padStart(11)} ${refused.toFixed(1).padStart(7)} ${String(median(rounds.map((each) => each.failures))).padStart(6)} ${quantile(probes, 0.95).toFixed(0).padStart(11)} ${quantile(probes, 0.99).toFixed(0).padStart(7)} ${String(rounds.reduce((sum, each) => sum + each.probeFailures, 0)).padStart(10)} ${Math.max(...rounds.map((each) => each.peakMb)).toFixed(0).padStart(8)}`,
      );
      return [settings, mark === '*' ? 0 : median(pages)] as const;
    });
    const [best, bestPages] = medians.reduce((a, b) => (b[1] > a[1] ? b : a));
    console.log(`${String(readers).padStart(7)} defaults / best (${best}), medians: ${(medians[0]![1] / bestPages).toFixed(2)}   load ${loadavg()[0]!.toFixed(1)}`);
  }
  console.log(`* a probe waited over a quarter of the ${SECONDS}-s window: pages counted in it include work done before it; not compared`);
}

async function measure(root: string, env: Record<string, string>, readers: Readers): Promise<Figures> {
  const port = await freePort();
  const copy = join(dir, `copy-${port}.db`);
  copyFileSync(dbPath, copy);
  const child = spawn(join(root, 'node_modules/.bin/node'), [join(root, 'src/entry.js')], {
    env: { ...process.env, PORT: String(port), DATABASE_URL: `sqlite:${copy}`, API_TOKENS: TOKEN, LOG_LEVEL: 'warn', RATE_LIMIT_PER_MINUTE: '', AUTH_FAILURES_PER_MINUTE: '0', ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    while ((await get(port, '/readyz').catch(() => 0)) !== 200) await sleep(100);
    // At rest: after a few reads of each path, so that its code is compiled before the load.
    for (let i = 0; i < 5; i++) for (const path of readers.paths) await get(port, path);
    const restMb = memoryMb(child.pid!, 'VmRSS');
    const { paths, encoding, bytesPerSecond } = readers;
    const workerData = { port, paths, encoding, readers: readers.readers, token: readers.token ? TOKEN : undefined, bytesPerSecond };
    const worker = new Worker(new URL('./load-readers.ts', import.meta.url), { workerData });
    await sleep(2000); // the readers reach their steady state
    worker.postMessage('reset');
    const counted = performance.now();
    const cpuBefore = cpuMicroseconds(child.pid!);
    const probes: number[] = [];
    const probeFailures: string[] = [];
    const until = performance.now() + SECONDS * 1000;
    while (performance.now() < until) {
      const started = performance.now();
      const status = await get(port, '/healthz').catch((error: Error) => error.message);
      if (status === 200) probes.push(performance.now() - started);
      else probeFailures.push(String(status));
      await sleep(100);
    }
    worker.postMessage('stop');
    const seconds = (performance.now() - counted) / 1000;
    const cpu = (cpuMicroseconds(child.pid!) - cpuBefore) / 1000;
    const [statuses] = (await once(worker, 'message')) as [Map<number, number>];
    await worker.terminate();
    const peakMb = memoryMb(child.pid!, 'VmHWM');
    if (bytesPerSecond !== undefined) await sleep(SETTLE * 1000);
    const afterMb = bytesPerSecond === undefined ? undefined : memoryMb(child.pid!, 'VmRSS');
    if (probeFailures.length > 0) console.error(`  /healthz failed ${probeFailures.length} times: ${[...new Set(probeFailures)].join(', ')}`);
    return { seconds, cpuMs: cpu, probes, probeFailures: probeFailures.length, pages: statuses, failures: statuses.get(0) ?? 0, restMb, peakMb, ...(afterMb !== undefined && { afterMb }) };
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
