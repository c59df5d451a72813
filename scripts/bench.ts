// npm run bench: the service against the Node ceiling, side by side, on this machine.
// Starts (1) a bare node:http server, (2) a bare Fastify route, (3) the real service on a fresh
// SQLite file, and (4) on PostgreSQL when BENCH_DATABASE_URL names an empty database. Drives each
// with autocannon at the same concurrency and duration and prints requests/s, p50, p99, errors
// and the ratio to the ceiling for: create (unique ids), get by id, a list page of 100, and an
// unauthenticated request (401). Every answer is checked for the expected status.
// Settings: BENCH_CONNECTIONS (64), BENCH_DURATION seconds (10), BENCH_DATABASE_URL.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const TOKEN = 'bench-token-0123456789abcdef';
const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

interface Scenario {
  name: string;
  expected: number;
  request: () => autocannon.Request[];
}

interface Row {
  target: string;
  scenario: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

let nextId = 1_000_000;
const scenarios: Scenario[] = [
  {
    name: 'create (unique ids)',
    expected: 200,
    request: () => [
      {
        method: 'POST',
        path: '/plants',
        headers: AUTH,
        setupRequest: (request) => ({ ...request, body: `{"id":${nextId++},"name":"bench plant","tag":"bench"}` }),
      },
    ],
  },
  { name: 'get by id', expected: 200, request: () => [{ method: 'GET', path: '/plants/500', headers: AUTH }] },
  { name: 'list page of 100', expected: 200, request: () => [{ method: 'GET', path: '/plants?limit=100', headers: AUTH }] },
  { name: 'unauthenticated (401)', expected: 401, request: () => [{ method: 'GET', path: '/plants/500' }] },
];

const rows: Row[] = [];
const notes: string[] = [];
const dir = mkdtempSync(join(tmpdir(), 'plants-bench-'));
try {
  await measure('node:http (ceiling)', ['scripts/bench-targets.ts', 'node'], {}, true);
  await measure('fastify route', ['scripts/bench-targets.ts', 'fastify'], {}, true);
  await measure('service, sqlite', ['src/server.ts'], { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` }, false);
  if (process.env.BENCH_DATABASE_URL) {
    await measure('service, postgres', ['src/server.ts'], { DATABASE_URL: process.env.BENCH_DATABASE_URL }, false);
  }
  print();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

async function measure(target: string, args: string[], env: Record<string, string>, baseline: boolean): Promise<void> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    // No failed-authentication guard: the 401 row sends nothing but failures from one address.
    env: { ...process.env, ...env, HOST: '127.0.0.1', PORT: String(port), API_TOKENS: TOKEN, LOG_LEVEL: 'warn', AUTH_FAILURES_PER_MINUTE: '0' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    const startupMs = await firstAnswer(child, port, started);
    if (!baseline) await seed(port);
    for (const scenario of scenarios) {
      const result = await autocannon({
        url: `http://127.0.0.1:${port}`,
        connections: CONNECTIONS,
        duration: DURATION,
        requests: scenario.request(),
      });
      const wrongStatus = Object.entries(result.statusCodeStats ?? {})
        .filter(([status]) => Number(status) !== (baseline ? 200 : scenario.expected))
        .reduce((sum, [, stats]) => sum + (stats as { count: number }).count, 0);
      rows.push({
        target,
        scenario: scenario.name,
        rps: result.requests.average,
        p50: result.latency.p50,
        p99: result.latency.p99,
        errors: result.errors + result.timeouts + wrongStatus,
      });
    }
    notes.push(`${target}: first answer ${startupMs.toFixed(0)} ms after spawn, peak RSS ${peakRssMb(child.pid!)} MB`);
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
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

// Plants for the reads: ids 1..1000, so /plants/500 exists and a page holds 100.
async function seed(port: number): Promise<void> {
  const creates = [];
  for (let id = 1; id <= 1000; id++) {
    creates.push(fetch(`http://127.0.0.1:${port}/plants`, { method: 'POST', headers: AUTH, body: `{"id":${id},"name":"plant ${id}"}` }));
  }
  for (const response of await Promise.all(creates)) if (!response.ok) throw new Error(`seeding answered ${response.status}`);
}

function peakRssMb(pid: number): string {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return (kb / 1024).toFixed(0);
}

function print(): void {
  console.log(`\n${CONNECTIONS} connections, ${DURATION} s per row, load generator on the same machine (${process.version})`);
  console.log(`${'target'.padEnd(22)}${'scenario'.padEnd(24)}${'req/s'.padStart(9)}${'p50 ms'.padStart(8)}${'p99 ms'.padStart(8)}${'errors'.padStart(8)}${'x ceiling'.padStart(11)}`);
  for (const row of rows) {
    const ceiling = rows.find((candidate) => candidate.target === 'node:http (ceiling)' && candidate.scenario === row.scenario);
    const ratio = ceiling ? (row.rps / ceiling.rps).toFixed(2) : '-';
    console.log(
      `${row.target.padEnd(22)}${row.scenario.padEnd(24)}${row.rps.toFixed(0).padStart(9)}${String(row.p50).padStart(8)}${String(row.p99).padStart(8)}${String(row.errors).padStart(8)}${ratio.padStart(11)}`,
    );
  }
  for (const note of notes) console.log(note);
  const errors = rows.reduce((sum, row) => sum + row.errors, 0);
  if (errors > 0) {
    console.log(`\n!!! ${errors} requests failed or answered an unexpected status: these figures are not valid !!!`);
    process.exitCode = 1;
  }
}
