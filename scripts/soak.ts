// npm run soak: mixed load for SOAK_MINUTES (10) against the real service on a fresh SQLite file
// (or SOAK_DATABASE_URL), printing every SOAK_SAMPLE_SECONDS (30) the service's RSS, heap and
// event-loop delay (read from its /metrics) with the request rate and errors so far. Ends with a
// verdict: no errors, and memory flat (the last quarter's RSS within 15% of the second quarter's).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../test/harness/ports.ts';
import { integerSetting } from '../test/harness/settings.ts';

const MINUTES = integerSetting('SOAK_MINUTES', 10, 1);
const SAMPLE_SECONDS = integerSetting('SOAK_SAMPLE_SECONDS', 30, 1);
const WORKERS = integerSetting('SOAK_WORKERS', 16, 1);
const TOKEN = 'soak-token-0123456789abcdef';

const dir = mkdtempSync(join(tmpdir(), 'plants-soak-'));
const port = await freePort();
const server = spawn(process.execPath, ['src/entry.js'], {
  env: {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: String(port),
    API_TOKENS: TOKEN,
    LOG_LEVEL: 'warn',
    AUTH_FAILURES_PER_MINUTE: '0',
    DATABASE_URL: process.env.SOAK_DATABASE_URL ?? `sqlite:${join(dir, 'plants.db')}`,
  },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const agent = new Agent({ keepAlive: true, maxSockets: WORKERS });
const counts = { requests: 0, errors: 0 };
const errorSamples: string[] = [];
const samples: { rssMb: number }[] = [];
let running = true;

try {
  await waitUntilUp();
  const started = Date.now();
  const workers = Array.from({ length: WORKERS }, (_, worker) => work(worker));
  console.log(`soak: ${MINUTES} min, ${WORKERS} workers, mixed create/get/list/replace/delete/401, sample every ${SAMPLE_SECONDS} s`);
  console.log(`${'min'.padStart(6)}${'req/s'.padStart(9)}${'errors'.padStart(8)}${'RSS MB'.padStart(9)}${'heap MB'.padStart(9)}${'loop p99 ms'.padStart(13)}`);
  let last = { at: started, requests: 0 };
  while (Date.now() - started < MINUTES * 60_000) {
    await sleep(SAMPLE_SECONDS * 1000);
    const metrics = await scrape();
    const now = Date.now();
    const rate = (counts.requests - last.requests) / ((now - last.at) / 1000);
    last = { at: now, requests: counts.requests };
    const rssMb = metrics.process_resident_memory_bytes! / 2 ** 20;
    samples.push({ rssMb });
    console.log(
      `${((now - started) / 60_000).toFixed(1).padStart(6)}${rate.toFixed(0).padStart(9)}${String(counts.errors).padStart(8)}` +
        `${rssMb.toFixed(0).padStart(9)}${(metrics.nodejs_heap_size_used_bytes! / 2 ** 20).toFixed(0).padStart(9)}` +
        `${(metrics.nodejs_eventloop_lag_p99_seconds! * 1000).toFixed(1).padStart(13)}`,
    );
  }
  running = false;
  await Promise.all(workers);
  verdict();
} finally {
  running = false;
  agent.destroy();
  server.kill('SIGTERM');
  await new Promise((resolve) => server.once('exit', resolve));
  rmSync(dir, { recursive: true, force: true });
}

async function work(worker: number): Promise<void> {
  let id = worker * 1_000_000_000;
  const mine: number[] = [];
  // eslint-disable-next-line no-unmodified-loop-condition -- the finally block sets it while the workers await
  while (running) {
    const roll = Math.random();
    if (roll < 0.35 || mine.length === 0) {
      id++;
      mine.push(id);
      await call('POST', '/plants', 200, `{"id":${id},"name":"soak ${id}","tag":"t${id % 7}"}`);
    } else if (roll < 0.6) {
      await call('GET', `/plants/${mine[Math.floor(Math.random() * mine.length)]}`, 200);
    } else if (roll < 0.75) {
      await call('GET', `/plants?limit=100&tag=t${worker % 7}`, 200);
    } else if (roll < 0.85) {
      await call('PUT', `/plants/${mine[Math.floor(Math.random() * mine.length)]}`, 200, '{"name":"replaced"}');
    } else if (roll < 0.95) {
      await call('DELETE', `/plants/${mine.splice(Math.floor(Math.random() * mine.length), 1)[0]}`, 204);
    } else {
      await call('GET', '/plants', 401, undefined, false);
    }
  }
}

function call(method: string, path: string, expected: number, body?: string, authenticated = true): Promise<void> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = { ...(authenticated && { authorization: `Bearer ${TOKEN}` }) };
    if (body) headers['content-type'] = 'application/json';
    const req = request({ host: '127.0.0.1', port, method, path, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => {
        counts.requests++;
        if (res.statusCode !== expected) failed(`${method} ${path} answered ${res.statusCode}, expected ${expected}`);
        resolve();
      });
    });
    req.on('error', (error) => {
      counts.requests++;
      failed(`${method} ${path}: ${error.message}`);
      resolve();
    });
    req.end(body);
  });
}

function failed(what: string): void {
  counts.errors++;
  if (errorSamples.length < 5) errorSamples.push(what);
}

async function scrape(): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const values: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^([a-z0-9_]+) ([\d.e+-]+)$/.exec(line);
    if (match) values[match[1]!] = Number(match[2]);
  }
  return values;
}

function verdict(): void {
  const quarter = Math.max(1, Math.floor(samples.length / 4));
  const mean = (list: { rssMb: number }[]) => list.reduce((sum, s) => sum + s.rssMb, 0) / list.length;
  const early = mean(samples.slice(quarter, 2 * quarter));
  const late = mean(samples.slice(-quarter));
  const growth = (late - early) / early;
  console.log(`\n${counts.requests} requests, ${counts.errors} errors; RSS second quarter ${early.toFixed(0)} MB, last quarter ${late.toFixed(0)} MB (${(growth * 100).toFixed(1)}%)`);
  for (const sample of errorSamples) console.log(`  error: ${sample}`);
  const ok = counts.errors === 0 && growth < 0.15;
  console.log(ok ? 'verdict: memory flat, no errors' : 'verdict: FAILED');
  if (!ok) process.exitCode = 1;
}

async function waitUntilUp(): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt++) {
    try {
      await (await fetch(`http://127.0.0.1:${port}/readyz`)).arrayBuffer();
      return;
    } catch {
      await sleep(25);
    }
  }
  throw new Error('the service did not start');
}
