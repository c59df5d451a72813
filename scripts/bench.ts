// npm run bench: the service against the Node ceiling, side by side, on this machine.
// Starts (1) a bare node:http server, (2) a bare Fastify route, (3) the real service on a fresh
// SQLite file, and (4) on PostgreSQL when BENCH_DATABASE_URL names an empty database. All run side
// by side; autocannon drives each scenario against one target after the other, at the same
// concurrency and duration, so a ratio compares rows measured moments apart. Scenarios: create
// (unique ids), get by id, a list page of 100 and an unauthenticated request (401); for the service
// only, a page of 1,000 plain, with `Accept-Encoding: gzip` and with `br`; then, for the service,
// it fills the store to 1,000,000 plants and runs the create row again. Each row prints
// requests/s, p50, p99, errors, the ratio to the ceiling (the faster of the two bare servers: on a
// shared 2-core machine either can come out ahead), the server's CPU time per request and the
// share of CPU time the hypervisor gave other guests (steal) and the bytes received per answer,
// headers included. Every answer is checked for its status. The service runs as `npm start` runs
// it (the same Node flags), and so do the baselines and references, the compile cache on. Starts are
// measured first: after one unrecorded start each (it fills the compile cache), BENCH_STARTS rounds (5)
// start every target in turn to its first answer on /healthz; the starts table gives min and median,
// wall and CPU time, against the bare Fastify route's. The peak RSS is the VmHWM of the process over the
// whole run.
// Each row's time is split into BENCH_ROUNDS rounds (5), and each scenario runs round by round, every
// target in turn within a round: a service and its reference are measured seconds apart, several times,
// and the work-ratio table gives the median of the rounds' ratios with their range, so one slow moment
// of the machine moves one round, not the whole ratio.
// Settings: BENCH_CONNECTIONS (64), BENCH_DURATION seconds (10), BENCH_ROUNDS (5), BENCH_DATABASE_URL, BENCH_LOG_LEVEL
// (the services' LOG_LEVEL, warn; their lines go to a file the run removes; at another level the SQLite service runs at
// warn too, as "service, sqlite, warn", and a last table gives each row against it), and BENCH_ONLY:
// run only the rows whose scenario name contains it, or one of its |-separated texts (e.g. "page of 1,000", "create|get";
// no store fill unless it names that row;
// a text no row contains measures the starts alone).
// BENCH_TRACING=1 adds one more target, "service, traced": on SQLite with OpenTelemetry traces on, every
// span exported (OTLP/HTTP) to a receiver in this process that accepts each batch.
// References for the cost of the work itself (scripts/bench-targets.ts): bare Fastify routes doing the
// service's store work (read by primary key, a page of 100, inserts with the same group commit) on
// node:sqlite, and on PostgreSQL through pg with BENCH_DATABASE_URL. A second table gives each service
// row's CPU time per request against its reference measured in the same run (the 401 against the
// bare Fastify answer); on PostgreSQL both count the CPU time of their database backends too.
// BENCH_LARGE_STORE (1000000 plants for the last create row; 0 skips that row and the fill).
// Garbage collection: the measured processes (not the starts) run with V8's --trace-gc-nvp, one line on stdout after
// each collection, which the bench reads from the file their stdout goes to: each row prints the bytes promoted to the
// old generation per request and the mark-compacts per 10,000 requests, so that a process that flips into promoting
// what should die young shows.
// A burst on a fresh process can flip it, so last, BENCH_BURSTS times (4; 0 skips them), the bare Fastify route and each
// service are started afresh, met by BENCH_CONNECTIONS connections at once asking for the 401 (1 s, unrecorded, from an
// autocannon process of its own), then measured for 2 s: the bytes promoted per request of each process, and its CPU time.
// BENCH_BEFORE=<another checkout, with its own node_modules> adds the target "service (before)": that
// checkout's service started as this one's is (its own Node, the flags of its npm start, a fresh SQLite
// file), measured in the same rounds, and a last table of each service row's CPU time per request
// against it; its large store is filled through that checkout's own store. With BENCH_BEFORE_DATABASE_URL
// (another empty database) and BENCH_DATABASE_URL, "service, postgres (before)" too.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { openStore } from '../src/store/factory.ts';
import { linesAdded } from '../test/harness/file-lines.ts';
import { REPO_ROOT } from '../test/harness/paths.ts';
import { freePort } from '../test/harness/ports.ts';
import { cpuMicroseconds, memoryMb } from '../test/harness/proc-figures.ts';
import { integerSetting } from '../test/harness/settings.ts';

const CONNECTIONS = integerSetting('BENCH_CONNECTIONS', 64, 1);
const DURATION = integerSetting('BENCH_DURATION', 10, 1);
// Whole seconds per round: autocannon stops at its next one-second tick, so a fraction would run on anyway.
const ROUND_SECONDS = Math.max(1, Math.round(DURATION / integerSetting('BENCH_ROUNDS', 5, 1)));
const ROUNDS = Math.max(1, Math.round(DURATION / ROUND_SECONDS));
const TOKEN = 'bench-token-0123456789abcdef';
const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const ONLY = (process.env.BENCH_ONLY ?? '').split('|');
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'warn';
const STARTS = integerSetting('BENCH_STARTS', 5, 1);
const BURSTS = integerSetting('BENCH_BURSTS', 4, 0);
const BURST_NAME = 'fresh process, burst';

interface Scenario {
  name: string;
  expected: number;
  request: () => autocannon.Request[];
  /** Not run against the bare servers, whose constant answer says nothing of it. */
  serviceOnly?: boolean;
}

interface Row {
  target: string;
  scenario: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** The server's own CPU time (user + system, all threads) per answered request, in µs. */
  cpuUs: number;
  /** The share of the machine's CPU time the hypervisor gave to other guests during the row, in %. */
  stealPercent: number;
  /** Bytes received per answer, headers included. */
  bytesPerAnswer: number;
  /** CPU time of the target's PostgreSQL backends per answered request, in µs (PostgreSQL targets only). */
  backendCpuUs?: number;
  /** The machine's load average (1 minute) at the end of the row. */
  load: number;
  /** CPU µs per request of each round, database backends included: the rounds' ratios are taken from these. */
  roundCpuUs: number[];
  /** Bytes promoted to V8's old generation per answered request. */
  promotedPerRequest: number;
  /** Full (mark-compact) collections per 10,000 answered requests. */
  markCompactsPer10k: number;
}

/** One round of one row: an autocannon run's own result, and the CPU time the target spent meanwhile. */
interface Round {
  result: RawResult;
  cpuUs: number;
  gc: GcTotals;
  backendCpuUs?: number;
  machine: { before: MachineTicks; after: MachineTicks };
}

/** What autocannon answers with `skipAggregateResult`: its counts, and its latency histogram still encoded. */
interface RawResult {
  totalCompletedRequests: number;
  totalBytes: number;
  errors: number;
  timeouts: number;
  duration: number;
  statusCodeStats: Record<string, { count: number }>;
}

// autocannon's merge of runs (their latency histograms included), which its types do not declare.
const aggregateResult = (autocannon as unknown as { aggregateResult: (results: RawResult[], opts: object) => autocannon.Result }).aggregateResult;

const BASELINES = ['node:http', 'fastify route'];
/** Each service's ratio is taken against the reference doing the same store work; the 401 against the bare answer. */
const TARGETS: Record<string, number> = { 'get by id': 1.4, 'list page of 100': 1.1, 'create (unique ids)': 1.3, 'unauthenticated (401)': 1.2 };
/** Against fastify + pg (service and backend CPU together), every store row's target is the same. */
const POSTGRES_TARGET = 1.3;
const POSTGRES_REFERENCE = 'fastify + pg';
// And with Node's compile cache on, which the service's entry.js turns on: without it each start of
// the TypeScript bench-targets.ts would load Node's type stripper, which no start of the service does.
// In the run's own directory (mkdtemp: 0700, this user's), never a shared one another user could fill.
const dir = mkdtempSync(join(tmpdir(), 'plants-bench-'));
let outputs = 0;
const REFERENCE_ENV = { NODE_COMPILE_CACHE: join(dir, 'compile-cache') };
const WARM_UP_SECONDS = 1;
const STEAL_WARNING_PERCENT = 2;
const LARGE_STORE = integerSetting('BENCH_LARGE_STORE', 1_000_000, 0);
// The large store holds even ids from LARGE_BASE on; its create row adds odd ids among them, so
// inserts land inside the filled key range rather than after it.
const LARGE_BASE = 10_000_000_000;

/** Creates with unique ids: odd ids from `firstId`, two apart. */
function creates(name: string, firstId: number): Scenario {
  let nextId = firstId;
  const body = () => `{"id":${(nextId += 2)},"name":"bench plant","tag":"bench"}`;
  return {
    name,
    expected: 200,
    request: () => [{ method: 'POST', path: '/plants', headers: AUTH, setupRequest: (request) => ({ ...request, body: body() }) }],
  };
}

/** The first 1,000 plants (the seeded ones) in one page, with the given Accept-Encoding. */
function pageOf1000(encoding?: string): Scenario {
  const headers = encoding === undefined ? AUTH : { ...AUTH, 'accept-encoding': encoding };
  const name = `page of 1,000, ${encoding ?? 'plain'}`;
  return { name, expected: 200, serviceOnly: true, request: () => [{ method: 'GET', path: '/plants?limit=1000', headers }] };
}

const createRow = creates('create (unique ids)', 1_000_001);
const allScenarios: Scenario[] = [
  createRow,
  { name: 'get by id', expected: 200, request: () => [{ method: 'GET', path: '/plants/500', headers: AUTH }] },
  { name: 'list page of 100', expected: 200, request: () => [{ method: 'GET', path: '/plants?limit=100', headers: AUTH }] },
  { name: 'unauthenticated (401)', expected: 401, request: () => [{ method: 'GET', path: '/plants/500' }] },
  pageOf1000(),
  pageOf1000('gzip'),
  pageOf1000('br'),
];
const chosen = (name: string) => ONLY.some((text) => name.includes(text));
const scenarios = allScenarios.filter((scenario) => chosen(scenario.name));
const createAtLarge = creates(`create at ${LARGE_STORE.toLocaleString('en')} plants`, LARGE_BASE + 1);
const runsAtLarge = chosen(createAtLarge.name);
// Its reference answers 200 to an unauthenticated request: the 401's reference is the bare Fastify answer.
const UNAUTHENTICATED = allScenarios[3]!;

interface Target {
  name: string;
  args: string[];
  /** The Node binary and the directory it runs in: this process's and this checkout's unless said. */
  node?: string;
  cwd?: string;
  /** The plant store service (of this checkout or of BENCH_BEFORE's), not a bare server or a reference. */
  service?: boolean;
  env: Record<string, string>;
  /** A bare server: answers 200 to everything, nothing to seed. */
  baseline: boolean;
  /** A reference doing the store work only: seeded, and driven by every scenario but the 401. */
  reference?: boolean;
  /** For a service: the reference its CPU time per request is compared with. */
  referenceName?: string;
  /** Its PostgreSQL backends carry this application_name, so that their CPU time is counted too. */
  applicationName?: string;
  /** For a service of this checkout: the same service of BENCH_BEFORE's checkout, on the same database. */
  beforeName?: string;
  /** For the SQLite service at a LOG_LEVEL other than warn: the same service at warn, measured in the same rounds. */
  atWarnName?: string;
}

interface Running extends Target {
  child: ChildProcess;
  port: number;
  /** Its --trace-gc-nvp lines so far. */
  gc: () => GcTotals;
}

interface GcTotals {
  /** Bytes moved from the young generation to the old. */
  promoted: number;
  markCompacts: number;
}

const BEFORE = process.env.BENCH_BEFORE ? resolve(process.env.BENCH_BEFORE) : undefined;
const BEFORE_NAME = 'service (before)';
const AT_WARN_NAME = 'service, sqlite, warn';
// An empty database of its own for BENCH_BEFORE's service on PostgreSQL (its schema is that checkout's).
const BEFORE_DATABASE_URL = process.env.BENCH_BEFORE_DATABASE_URL;
const BEFORE_POSTGRES_NAME = 'service, postgres (before)';
const rows: Row[] = [];
const notes: string[] = [];
const targets: Target[] = [
  { name: 'node:http', args: referenceArgs('node'), env: REFERENCE_ENV, baseline: true },
  { name: 'fastify route', args: referenceArgs('fastify'), env: REFERENCE_ENV, baseline: true },
  {
    name: 'fastify + node:sqlite',
    args: referenceArgs('sqlite-reference'),
    env: { ...REFERENCE_ENV, DATABASE_URL: `sqlite:${join(dir, 'reference.db')}` },
    baseline: false,
    reference: true,
  },
  {
    name: 'service, sqlite',
    args: serviceArgs(),
    env: { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` },
    baseline: false,
    service: true,
    referenceName: 'fastify + node:sqlite',
    ...(BEFORE !== undefined && { beforeName: BEFORE_NAME }),
    ...(LOG_LEVEL !== 'warn' && { atWarnName: AT_WARN_NAME }),
  },
];
if (LOG_LEVEL !== 'warn') {
  targets.push({
    name: AT_WARN_NAME,
    args: serviceArgs(),
    env: { DATABASE_URL: `sqlite:${join(dir, 'at-warn.db')}`, LOG_LEVEL: 'warn' },
    baseline: false,
    service: true,
    referenceName: 'fastify + node:sqlite',
  });
}
if (BEFORE !== undefined) targets.push(beforeTarget(BEFORE_NAME, `sqlite:${join(dir, 'before.db')}`, 'fastify + node:sqlite'));
const BENCH_DATABASE_URL = process.env.BENCH_DATABASE_URL;
if (BENCH_DATABASE_URL) {
  targets.push(
    {
      name: POSTGRES_REFERENCE,
      args: referenceArgs('pg-reference'),
      env: { ...REFERENCE_ENV, DATABASE_URL: withApplicationName(BENCH_DATABASE_URL, 'bench-reference') },
      baseline: false,
      reference: true,
      applicationName: 'bench-reference',
    },
    {
      name: 'service, postgres',
      args: serviceArgs(),
      env: { DATABASE_URL: withApplicationName(BENCH_DATABASE_URL, 'bench-service') },
      baseline: false,
      service: true,
      referenceName: POSTGRES_REFERENCE,
      applicationName: 'bench-service',
      ...(BEFORE !== undefined && BEFORE_DATABASE_URL && { beforeName: BEFORE_POSTGRES_NAME }),
    },
  );
  if (BEFORE !== undefined && BEFORE_DATABASE_URL) {
    targets.push({
      ...beforeTarget(BEFORE_POSTGRES_NAME, withApplicationName(BEFORE_DATABASE_URL, 'bench-before'), POSTGRES_REFERENCE),
      applicationName: 'bench-before',
    });
  }
}
if (process.env.BENCH_TRACING) {
  const OTEL_EXPORTER_OTLP_ENDPOINT = await startSpanSink();
  targets.push({ name: 'service, traced', args: serviceArgs(), env: { DATABASE_URL: `sqlite:${join(dir, 'traced.db')}`, OTEL_EXPORTER_OTLP_ENDPOINT }, baseline: false, service: true });
}
const backends = BENCH_DATABASE_URL ? new pg.Client({ connectionString: BENCH_DATABASE_URL }) : undefined;
await backends?.connect();
const running: Running[] = [];
try {
  const startups = await measureStartups();
  for (const target of targets) {
    running.push(await startMeasured(target));
  }
  for (const target of running) if (!target.baseline) await seed(target.port);
  // Scenario by scenario, each target in turn: on a shared host the machine's speed drifts over
  // minutes, and a row should be compared with ceilings measured seconds, not minutes, apart.
  // A second of each first, unrecorded: the figures are for warmed-up (JIT-compiled) servers.
  for (const [scenario, targets] of pairs()) for (const target of targets) await drive(target, scenario, WARM_UP_SECONDS);
  for (const [scenario, targets] of pairs()) rows.push(...(await driveInRounds(targets, scenario)));
  // Every service filled first, then measured in the same rounds, as the other rows are.
  const large = running.filter((target) => !target.baseline && !target.reference && LARGE_STORE > 0 && runsAtLarge);
  for (const target of large) await fillTo(target, LARGE_STORE);
  if (large.length > 0) rows.push(...(await driveInRounds(large, createAtLarge)));
  for (const target of running) notes.push(`${target.name}: peak RSS ${memoryMb(target.child.pid!, 'VmHWM').toFixed(0)} MB`);
  if (BEFORE !== undefined) notes.push(`${BEFORE_NAME}: the checkout at ${BEFORE}, run by ${targets.find((target) => target.name === BEFORE_NAME)!.node}`);
  print();
  printStartups(startups);
  if (BURSTS > 0 && chosen(BURST_NAME)) printBursts(await measureBursts());
} finally {
  await Promise.all(running.map((target) => stop(target.child)));
  await backends?.end();
  rmSync(dir, { recursive: true, force: true });
}

/** Scenario by scenario, the targets that run it. */
function pairs(): [Scenario, Running[]][] {
  return scenarios.map((scenario) => [
    scenario,
    running.filter((target) => !(scenario.serviceOnly && (target.baseline || target.reference)) && !(target.reference && scenario === UNAUTHENTICATED)),
  ]);
}

/** An OTLP/HTTP receiver that reads and accepts every batch; unref'd, so it never keeps the bench running. */
async function startSpanSink(): Promise<string> {
  const sink = createHttpServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  sink.unref();
  return `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
}

function withApplicationName(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('application_name', name);
  return parsed.toString();
}

/** The service's command line as `npm start` has it in the checkout at `root`, Node flags included, so both run the same. */
function serviceArgs(root = REPO_ROOT): string[] {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } };
  // `exec` only makes the shell npm starts give way to Node, so that Node receives the signals.
  const [command, ...args] = pkg.scripts.start.replace(/^exec\s+/, '').split(/\s+/);
  if (command !== 'node') throw new Error(`npm start runs "${command}", not node: update the bench`);
  return args;
}

/** A baseline or reference run as the service runs: with its Node flags (the young generation's size is one). */
function referenceArgs(kind: string): string[] {
  const flags = serviceArgs().filter((arg) => arg.startsWith('-'));
  return [...flags, 'scripts/bench-targets.ts', kind];
}

interface Startup {
  wallMs: number;
  /** The process's user + system CPU time at its first answer (clock ticks of 10 ms). */
  cpuMs: number;
}

/** One unrecorded start of each target (the first start of a checkout fills Node's compile cache), then STARTS rounds of each in turn. */
async function measureStartups(): Promise<Map<string, Startup[]>> {
  const startups = new Map(targets.map((target) => [target.name, [] as Startup[]]));
  for (let round = 0; round <= STARTS; round++) {
    for (const target of targets) {
      const { child, startupMs } = await startTarget(target);
      const cpuMs = cpuMicroseconds(child.pid!) / 1000;
      await stop(child);
      if (round > 0) startups.get(target.name)!.push({ wallMs: startupMs, cpuMs });
    }
  }
  return startups;
}

/** Min and median of each target's starts, and the medians against the bare Fastify route's, measured in the same rounds. */
function printStartups(startups: Map<string, Startup[]>): void {
  const stats = (name: string, pick: (startup: Startup) => number) => {
    const sorted = startups.get(name)!.map(pick).sort((a, b) => a - b);
    return { min: sorted[0]!, median: sorted[Math.floor(sorted.length / 2)]! };
  };
  const bare = { wall: stats('fastify route', (startup) => startup.wallMs), cpu: stats('fastify route', (startup) => startup.cpuMs) };
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(`\nStart: spawn to the first answer on /healthz, ${STARTS} rounds of every target in turn (load average ${load})`);
  console.log(
    `${'target'.padEnd(28)}${'min ms'.padStart(8)}${'median ms'.padStart(11)}${'× fastify'.padStart(11)}` +
      `${'CPU min ms'.padStart(12)}${'CPU median'.padStart(12)}${'× fastify'.padStart(11)}`,
  );
  for (const name of startups.keys()) {
    const wall = stats(name, (startup) => startup.wallMs);
    const cpu = stats(name, (startup) => startup.cpuMs);
    console.log(
      `${name.padEnd(28)}${wall.min.toFixed(0).padStart(8)}${wall.median.toFixed(0).padStart(11)}${(wall.median / bare.wall.median).toFixed(2).padStart(11)}` +
        `${cpu.min.toFixed(0).padStart(12)}${cpu.median.toFixed(0).padStart(12)}${(cpu.median / bare.cpu.median).toFixed(2).padStart(11)}`,
    );
  }
}

interface Burst {
  promotedPerRequest: number;
  cpuUsPerRequest: number;
}

/** BURSTS rounds; in each, the bare Fastify route and every service in turn: started, met by a burst, measured, stopped. */
async function measureBursts(): Promise<Map<string, Burst[]>> {
  const measured = targets.filter((target) => target.service || target.name === 'fastify route');
  const bursts = new Map(measured.map((target) => [target.name, [] as Burst[]]));
  for (let round = 0; round < BURSTS; round++) {
    for (const target of measured) {
      const fresh = await startMeasured(target);
      await burstFromAnotherProcess(fresh.port);
      const { result, cpuUs, gc } = await drive(fresh, UNAUTHENTICATED, 2);
      await stop(fresh.child);
      const requests = Math.max(1, result.totalCompletedRequests);
      bursts.get(target.name)!.push({ promotedPerRequest: gc.promoted / requests, cpuUsPerRequest: cpuUs / requests });
    }
  }
  return bursts;
}

/** The unrecorded burst, from a load generator of its own, as clients are: from this busy process it came too slowly to show a flip. */
async function burstFromAnotherProcess(port: number): Promise<void> {
  const cli = join(REPO_ROOT, 'node_modules', 'autocannon', 'autocannon.js');
  const url = `http://127.0.0.1:${port}${UNAUTHENTICATED.request()[0]!.path}`;
  const generator = spawn(process.execPath, [cli, '-c', String(CONNECTIONS), '-d', String(WARM_UP_SECONDS), url], { stdio: 'ignore' });
  const [code] = (await once(generator, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`the burst's autocannon exited with ${code}`);
}

function printBursts(bursts: Map<string, Burst[]>): void {
  console.log(`\nA burst on a fresh process: ${CONNECTIONS} connections at once asking for the 401, 1 s unrecorded, then 2 s; one column per process`);
  for (const [name, measured] of bursts) {
    const column = (pick: (burst: Burst) => number) => measured.map((burst) => pick(burst).toFixed(0).padStart(7)).join('');
    console.log(`${name.padEnd(28)}promoted B/req${column((burst) => burst.promotedPerRequest)}`);
    console.log(`${''.padEnd(28)}CPU µs/req    ${column((burst) => burst.cpuUsPerRequest)}`);
  }
}

/** A target to measure: its GC trace (and any log line) goes to a file, read after each round. A reader in this busy
 * process would lag, and a process writes its log lines as it makes them, so a lagging reader would hold it back. */
async function startMeasured(target: Target): Promise<Running> {
  const output = join(dir, `stdout-${++outputs}.log`);
  const { child, port } = await startTarget(target, output);
  return { ...target, child, port, gc: gcTotals(output) };
}

/** With `output`, traced (--trace-gc-nvp) and its stdout written there; otherwise its stdout goes nowhere. */
async function startTarget(
  { args, env, node = process.execPath, cwd = REPO_ROOT }: Target,
  output?: string,
): Promise<{ child: ChildProcess; port: number; startupMs: number }> {
  const port = await freePort();
  const stdout = output === undefined ? 'ignore' : openSync(output, 'a');
  const started = performance.now();
  const child = spawn(node, output === undefined ? args : ['--trace-gc-nvp', ...args], {
    cwd,
    // No failed-authentication guard: the 401 row sends nothing but failures from one address.
    env: { ...process.env, HOST: '127.0.0.1', PORT: String(port), API_TOKENS: TOKEN, LOG_LEVEL, AUTH_FAILURES_PER_MINUTE: '0', ...env },
    stdio: ['ignore', stdout, 'inherit'],
  });
  if (typeof stdout === 'number') closeSync(stdout);
  return { child, port, startupMs: await firstAnswer(child, port, started) };
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/** One row per target: ROUNDS rounds, each target in turn within a round. */
async function driveInRounds(targets: Running[], scenario: Scenario): Promise<Row[]> {
  const rounds = new Map<Running, Round[]>(targets.map((target) => [target, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const target of targets) rounds.get(target)!.push(await drive(target, scenario, ROUND_SECONDS));
  }
  return targets.map((target) => rowOf(target, scenario, rounds.get(target)!));
}

async function drive(target: Running, scenario: Scenario, duration: number): Promise<Round> {
  const pid = target.child.pid!;
  const gcBefore = target.gc();
  const cpuBefore = cpuMicroseconds(pid);
  const backendsBefore = await backendCpu(target);
  const before = machineCpuTicks();
  const result = (await autocannon({
    url: `http://127.0.0.1:${target.port}`,
    connections: CONNECTIONS,
    duration,
    requests: scenario.request(),
    skipAggregateResult: true,
  })) as unknown as RawResult;
  const cpuUs = cpuMicroseconds(pid) - cpuBefore;
  const gcAfter = target.gc();
  return {
    result,
    cpuUs,
    gc: { promoted: gcAfter.promoted - gcBefore.promoted, markCompacts: gcAfter.markCompacts - gcBefore.markCompacts },
    ...(target.applicationName && { backendCpuUs: backendCpuSince(backendsBefore, await backendCpu(target)) }),
    machine: { before, after: machineCpuTicks() },
  };
}

function rowOf(target: Running, scenario: Scenario, rounds: Round[]): Row {
  const merged = aggregateResult(
    rounds.map((round) => round.result),
    { url: `http://127.0.0.1:${target.port}`, connections: CONNECTIONS },
  );
  const total = (pick: (round: Round) => number) => rounds.reduce((sum, round) => sum + pick(round), 0);
  const requests = Math.max(1, total((round) => round.result.totalCompletedRequests));
  const wrongStatus = Object.entries(merged.statusCodeStats ?? {})
    .filter(([status]) => Number(status) !== (target.baseline ? 200 : scenario.expected))
    .reduce((sum, [, stats]) => sum + (stats as { count: number }).count, 0);
  return {
    target: target.name,
    scenario: scenario.name,
    rps: requests / total((round) => round.result.duration),
    p50: merged.latency.p50,
    p99: merged.latency.p99,
    errors: merged.errors + merged.timeouts + wrongStatus,
    cpuUs: total((round) => round.cpuUs) / requests,
    stealPercent: stealPercent(rounds[0]!.machine.before, rounds.at(-1)!.machine.after),
    bytesPerAnswer: total((round) => round.result.totalBytes) / requests,
    load: Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]),
    ...(target.applicationName && { backendCpuUs: total((round) => round.backendCpuUs!) / requests }),
    roundCpuUs: rounds.map((round) => (round.cpuUs + (round.backendCpuUs ?? 0)) / Math.max(1, round.result.totalCompletedRequests)),
    promotedPerRequest: total((round) => round.gc.promoted) / requests,
    markCompactsPer10k: (10_000 * total((round) => round.gc.markCompacts)) / requests,
  };
}

/** Totals so far of the --trace-gc-nvp lines in `file`, read on from the last call (`gc=s` a scavenge, `gc=mc` a
 * mark-compact; `promoted=` bytes). */
function gcTotals(file: string): () => GcTotals {
  const read = linesAdded(file);
  const totals: GcTotals = { promoted: 0, markCompacts: 0 };
  return () => {
    read((line) => {
      const promoted = / promoted=(\d+)/.exec(line);
      if (!promoted) return; // the port a reference prints, a log line
      totals.promoted += Number(promoted[1]);
      if (/ gc=mc /.test(line)) totals.markCompacts++;
    });
    return { ...totals };
  };
}

/** CPU time so far of each PostgreSQL backend serving the target, by pid (none for other targets). */
async function backendCpu(target: Running): Promise<Map<number, number>> {
  const cpu = new Map<number, number>();
  if (!target.applicationName || !backends) return cpu;
  const { rows } = await backends.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [target.applicationName]);
  for (const { pid } of rows) {
    try {
      cpu.set(pid, cpuMicroseconds(pid));
    } catch {
      // The backend ended meanwhile (an idle pool connection closed).
    }
  }
  return cpu;
}

/** Backends that started during the row count from zero; one that ended during it is lost (pools keep busy ones). */
function backendCpuSince(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, cpu] of after) total += cpu - (before.get(pid) ?? 0);
  return total;
}

/** Fills the service's store, from this process and through the target checkout's own store, with even ids from LARGE_BASE until it holds `size` plants. */
async function fillTo(target: Target, size: number): Promise<void> {
  const started = performance.now();
  const open: typeof openStore = target.cwd === undefined ? openStore : (await import(pathToFileURL(join(target.cwd, 'src/store/factory.ts')).href)).openStore;
  const store = await open(target.env.DATABASE_URL!, { poolSize: 4 });
  try {
    const existing = await countPlants(store);
    const batch = 10_000;
    for (let filled = 0; filled < size - existing; filled += batch) {
      const writes = [];
      for (let i = filled; i < Math.min(filled + batch, size - existing); i++) {
        writes.push(store.plants.createPlant({ id: BigInt(LARGE_BASE + 2 * i), name: `plant ${i}`, tag: i % 10 === 0 ? 'fern' : 'bulk' }));
      }
      await Promise.all(writes);
    }
  } finally {
    await store.close();
  }
  process.stderr.write(`filled the store to ${size.toLocaleString('en')} plants in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}

async function countPlants(store: Awaited<ReturnType<typeof openStore>>): Promise<number> {
  let count = 0;
  for (let after: bigint | undefined; ; ) {
    const page = await store.plants.listPlants({ after, limit: 10_000 });
    count += page.length;
    if (page.length < 10_000) return count;
    after = page.at(-1)!.id;
  }
}

interface MachineTicks {
  total: number;
  steal: number;
}

/** The machine's CPU time so far, in clock ticks, from the first line of /proc/stat. */
function machineCpuTicks(): MachineTicks {
  const ticks = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  return { total: ticks.reduce((sum, tick) => sum + tick, 0), steal: ticks[7] ?? 0 };
}

// On a virtual machine a busy host takes CPU time away ("steal"); such a row's rates are low.
function stealPercent(before: MachineTicks, after: MachineTicks): number {
  return (100 * (after.steal - before.steal)) / Math.max(1, after.total - before.total);
}

/** Milliseconds from spawning to the first answer of GET /healthz (tried every 5 ms). */
async function firstAnswer(child: ChildProcess, port: number, started: number): Promise<number> {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`bench target exited with ${child.exitCode} before answering`);
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      await response.arrayBuffer();
      return performance.now() - started;
    } catch {
      await sleep(5);
    }
  }
}

// Plants for the reads: ids 1..1000, so /plants/500 exists and a page holds 100. Sent CONNECTIONS
// at a time: a thousand connections at once would set the peak RSS instead of the scenarios.
async function seed(port: number): Promise<void> {
  for (let first = 1; first <= 1000; first += CONNECTIONS) {
    const creates = [];
    for (let id = first; id < Math.min(first + CONNECTIONS, 1001); id++) {
      creates.push(fetch(`http://127.0.0.1:${port}/plants`, { method: 'POST', headers: AUTH, body: `{"id":${id},"name":"plant ${id}"}` }));
    }
    for (const response of await Promise.all(creates)) if (!response.ok) throw new Error(`seeding answered ${response.status}`);
  }
}

/** Against the ceiling of the same scenario (the large-store create against the create ceiling). */
function ratio(row: Row): string {
  const scenario = row.scenario === createAtLarge.name ? createRow.name : row.scenario;
  const bare = rows.filter((candidate) => BASELINES.includes(candidate.target) && candidate.scenario === scenario);
  return bare.length > 0 ? (row.rps / Math.max(...bare.map((candidate) => candidate.rps))).toFixed(2) : '-';
}

/** Create throughput with a large store against the same target's create on an almost empty one. */
function largeStoreNotes(): string[] {
  return rows
    .filter((row) => row.scenario === createAtLarge.name)
    .map((large) => {
      const empty = rows.find((row) => row.target === large.target && row.scenario === createRow.name);
      if (!empty) return `${large.target}: ${createAtLarge.name} ${large.rps.toFixed(0)}/s`;
      const change = ((large.rps / empty.rps - 1) * 100).toFixed(1);
      return `${large.target}: ${createAtLarge.name} ${large.rps.toFixed(0)}/s against ${empty.rps.toFixed(0)}/s on an almost empty store (${change}%)`;
    });
}

function print(): void {
  // BENCH_ONLY naming no row: the starts alone.
  if (rows.length === 0) return;
  console.log(`\n${CONNECTIONS} connections, ${DURATION} s per row, load generator on the same machine (${process.version})`);
  console.log(
    `${'target'.padEnd(22)}${'scenario'.padEnd(28)}${'req/s'.padStart(9)}${'p50 ms'.padStart(8)}${'p99 ms'.padStart(8)}` +
      `${'errors'.padStart(8)}${'x ceiling'.padStart(11)}${'CPU µs/req'.padStart(12)}${'steal %'.padStart(9)}${'bytes/ans'.padStart(11)}` +
      `${'promoted B/req'.padStart(16)}${'MC/10k req'.padStart(12)}`,
  );
  // Grouped by target, in the order the targets were started.
  for (const row of targets.flatMap((target) => rows.filter((row) => row.target === target.name))) {
    console.log(
      `${row.target.padEnd(22)}${row.scenario.padEnd(28)}${row.rps.toFixed(0).padStart(9)}${String(row.p50).padStart(8)}` +
        `${String(row.p99).padStart(8)}${String(row.errors).padStart(8)}${ratio(row).padStart(11)}${cpuText(row).padStart(12)}` +
        `${row.stealPercent.toFixed(1).padStart(9)}${row.bytesPerAnswer.toFixed(0).padStart(11)}` +
        `${row.promotedPerRequest.toFixed(0).padStart(16)}${row.markCompactsPer10k.toFixed(1).padStart(12)}`,
    );
  }
  for (const note of [...notes, ...largeStoreNotes()]) console.log(note);
  printWorkRatios();
  if (BEFORE !== undefined) printRatiosAgainst(`${BEFORE_NAME} (${BEFORE})`, 'before µs', (target) => target.beforeName);
  if (LOG_LEVEL !== 'warn') printRatiosAgainst(`the same service at LOG_LEVEL=warn (this one at ${LOG_LEVEL})`, 'warn µs', (target) => target.atWarnName);
  const stolen = Math.max(...rows.map((row) => row.stealPercent));
  if (stolen >= STEAL_WARNING_PERCENT) {
    console.log(
      `\nThe host took up to ${stolen.toFixed(0)}% of this machine's CPU time during the run (steal %): ` +
        'rows with a high steal % understate the machine; rerun when the host is quiet.',
    );
  }
  const errors = rows.reduce((sum, row) => sum + row.errors, 0);
  if (errors > 0) {
    console.log(`\n!!! ${errors} requests failed or answered an unexpected status: these figures are not valid !!!`);
    process.exitCode = 1;
  }
}

/** The CPU time of the reference row the service row is measured against (the bare answer for the 401). */
function referenceRow(row: Row): Row | undefined {
  const service = targets.find((target) => target.name === row.target);
  const name = row.scenario === UNAUTHENTICATED.name ? 'fastify route' : service?.referenceName;
  return rows.find((candidate) => candidate.target === name && candidate.scenario === row.scenario);
}

function withBackends(row: Row): number {
  return row.cpuUs + (row.backendCpuUs ?? 0);
}

/** The process's CPU µs, and its database backends' after a + on PostgreSQL. */
function cpuText(row: Row): string {
  return row.backendCpuUs === undefined ? row.cpuUs.toFixed(0) : `${row.cpuUs.toFixed(0)}+${row.backendCpuUs.toFixed(0)}`;
}

function printWorkRatios(): void {
  console.log(
    `\nCPU µs per request against the work itself (PostgreSQL: process + database backends; load is the 1-minute average);\n` +
      `ratio: the whole rows'; rounds: the median and range of the ${ROUNDS} rounds' ratios (${ROUND_SECONDS} s each, seconds apart)`,
  );
  console.log(
    `${'target'.padEnd(22)}${'scenario'.padEnd(28)}${'CPU µs'.padStart(10)}${'reference'.padStart(24)}${'ref µs'.padStart(10)}` +
      `${'ratio'.padStart(8)}${'rounds'.padStart(20)}${'target'.padStart(8)}${'steal %'.padStart(9)}${'load'.padStart(7)}`,
  );
  for (const row of rows) {
    const service = targets.find((target) => target.name === row.target);
    if (!service?.referenceName || !(row.scenario in TARGETS)) continue;
    const reference = referenceRow(row);
    if (!reference) continue;
    const ratio = withBackends(row) / withBackends(reference);
    console.log(
      `${row.target.padEnd(22)}${row.scenario.padEnd(28)}${cpuText(row).padStart(10)}${reference.target.padStart(24)}` +
        `${cpuText(reference).padStart(10)}${ratio.toFixed(2).padStart(8)}${roundRatios(row, reference).padStart(20)}` +
        `${`≤ ${reference.target === POSTGRES_REFERENCE ? POSTGRES_TARGET : TARGETS[row.scenario]}`.padStart(8)}${row.stealPercent.toFixed(1).padStart(9)}${row.load.toFixed(1).padStart(7)}`,
    );
  }
}

/** BENCH_BEFORE's service, run by that checkout's own Node (node_modules/.bin/node) as its npm start does. */
function beforeTarget(name: string, databaseUrl: string, referenceName: string): Target {
  const node = join(BEFORE!, 'node_modules', '.bin', 'node');
  return {
    name,
    args: serviceArgs(BEFORE),
    node: existsSync(node) ? node : process.execPath,
    cwd: BEFORE,
    env: { DATABASE_URL: databaseUrl },
    baseline: false,
    service: true,
    referenceName,
  };
}

/** Each service row's CPU µs per request against the same scenario's on BENCH_BEFORE's service. */
/** Each service row's CPU time per request against the same scenario on another target: BENCH_BEFORE's service, or the service at warn. */
function printRatiosAgainst(title: string, column: string, otherOf: (target: Target) => string | undefined): void {
  console.log(
    `\nCPU µs per request against ${title} (PostgreSQL: process + database backends);\n` +
      `ratio: the whole rows'; rounds: the median and range of the ${ROUNDS} rounds' ratios (${ROUND_SECONDS} s each, seconds apart)`,
  );
  console.log(
    `${'target'.padEnd(22)}${'scenario'.padEnd(28)}${'CPU µs'.padStart(10)}${column.padStart(10)}` +
      `${'ratio'.padStart(8)}${'rounds'.padStart(20)}${'steal %'.padStart(9)}${'load'.padStart(7)}`,
  );
  for (const row of rows) {
    const target = targets.find((candidate) => candidate.name === row.target);
    const otherName = target && otherOf(target);
    const before = rows.find((candidate) => candidate.target === otherName && candidate.scenario === row.scenario);
    if (!before) continue;
    console.log(
      `${row.target.padEnd(22)}${row.scenario.padEnd(28)}${cpuText(row).padStart(10)}${cpuText(before).padStart(10)}` +
        `${(withBackends(row) / withBackends(before)).toFixed(2).padStart(8)}${roundRatios(row, before).padStart(20)}` +
        `${row.stealPercent.toFixed(1).padStart(9)}${row.load.toFixed(1).padStart(7)}`,
    );
  }
}

/** "median (lowest-highest)" of the ratios of rounds run seconds apart. */
function roundRatios(row: Row, reference: Row): string {
  const ratios = row.roundCpuUs.map((cpu, round) => cpu / reference.roundCpuUs[round]!).sort((a, b) => a - b);
  const middle = ratios.length / 2;
  const median = ratios.length % 2 === 1 ? ratios[Math.floor(middle)]! : (ratios[middle - 1]! + ratios[middle]!) / 2;
  return `${median.toFixed(2)} (${ratios[0]!.toFixed(2)}-${ratios.at(-1)!.toFixed(2)})`;
}
