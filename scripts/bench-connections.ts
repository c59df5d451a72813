// Idle connections against a health probe (npm run bench:connections). One client opens
// BENCH_CONNECTIONS (20,000) keep-alive connections to a service process (npm start's Node and
// entry, with BENCH_SERVICE_NOFILE file descriptors), sends one request on each and leaves
// it idle; then a probe opens a new connection for GET /healthz, PROBES times. It prints how many
// probes were answered (within 5 s each) and how fast, and how many idle connections the service
// closed, with MAX_CONNECTIONS at its default and with the limit out of reach.
// The flood needs more descriptors than one process usually has: as root the script raises its own
// limit with prlimit; otherwise it opens as many as its limit allows and says so.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../test/harness/ports.ts';
import { integerSetting } from '../test/harness/settings.ts';

const WANTED = integerSetting('BENCH_CONNECTIONS', 20_000, 1);
const PROBES = integerSetting('BENCH_PROBES', 20, 1);
const ROOT = resolve(import.meta.dirname, '..');
const CASES: [string, Record<string, string>][] = [
  ['MAX_CONNECTIONS=1000 (default)', {}],
  ['no limit (MAX_CONNECTIONS=10000000)', { MAX_CONNECTIONS: '10000000' }],
];

// The service gets BENCH_SERVICE_NOFILE descriptors (fewer than the flood, as a 20,000-connection
// flood is more than most services' limits); the flooding client gets all it can.
const serverLimit = Math.min(descriptorLimit('HARD'), integerSetting('BENCH_SERVICE_NOFILE', 10_000, 64));
const connections = Math.min(WANTED, raisedDescriptorLimit(WANTED + 500) - 500);
const dir = mkdtempSync(join(tmpdir(), 'plants-bench-connections-'));
console.log(`${connections.toLocaleString('en')} idle keep-alive connections from one client (service's descriptor limit: ${serverLimit}), then ${PROBES} GET /healthz on new connections`);
console.log(`${'service'.padEnd(38)} ${'opened'.padStart(7)} ${'closed by service'.padStart(18)} ${'probes ok'.padStart(10)} ${'p50 ms'.padStart(7)} ${'max ms'.padStart(7)}`);
for (const [label, env] of CASES) {
  const f = await measure(env);
  const sorted = f.latencies.toSorted((a, b) => a - b);
  const at = (q: number) => (sorted.length === 0 ? '-' : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!.toFixed(1));
  console.log(`${label.padEnd(38)} ${String(f.opened).padStart(7)} ${String(f.closedByService).padStart(18)} ${`${sorted.length}/${PROBES}`.padStart(10)} ${at(0.5).padStart(7)} ${(sorted.at(-1)?.toFixed(1) ?? '-').padStart(7)}`);
  if (f.died) console.log(`  the service died during the run: ${f.died}`);
}
rmSync(dir, { recursive: true, force: true });

function descriptorLimit(which: 'SOFT' | 'HARD' = 'SOFT'): number {
  return Number(spawnSync('prlimit', ['--pid', String(process.pid), '--nofile', `--output=${which}`, '--noheadings'], { encoding: 'utf8' }).stdout.trim()) || 1024;
}

/** Raises this process's descriptor limit to `wanted` when allowed (root); answers the limit in force. */
function raisedDescriptorLimit(wanted: number): number {
  // The hard limit is never lowered, so the service can be given back the limit it had.
  spawnSync('prlimit', ['--pid', String(process.pid), `--nofile=${wanted}:${Math.max(wanted, descriptorLimit('HARD'))}`]);
  return descriptorLimit();
}

interface Figures {
  opened: number;
  closedByService: number;
  latencies: number[];
  /** The service's exit status if it died during the run. */
  died?: string;
}

async function measure(env: Record<string, string>): Promise<Figures> {
  const port = await freePort();
  const command = `ulimit -n ${serverLimit} && exec "$0" "$1"`;
  const child = spawn('sh', ['-c', command, join(ROOT, 'node_modules/.bin/node'), join(ROOT, 'src/entry.js')], {
    env: { ...process.env, PORT: String(port), DATABASE_URL: `sqlite:${join(dir, `${port}.db`)}`, API_TOKENS: 'bench-token-0123456789abcdef', LOG_LEVEL: 'fatal', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const exited = once(child, 'exit');
  try {
    while ((await probe(port)) === undefined) await sleep(100);
    const idle: Socket[] = [];
    let closedByService = 0;
    for (let opened = 0; opened < connections; opened += 500) {
      const batch = await Promise.all(Array.from({ length: Math.min(500, connections - opened) }, () => idleConnection(port)));
      for (const socket of batch.filter((s): s is Socket => s !== undefined)) {
        idle.push(socket);
        socket.once('close', () => closedByService++);
      }
    }
    const latencies: number[] = [];
    for (let i = 0; i < PROBES; i++) {
      const ms = await probe(port);
      if (ms !== undefined) latencies.push(ms);
    }
    const opened = idle.length;
    for (const socket of idle) socket.removeAllListeners('close').destroy();
    const error = /^Error: .*$/m.exec(stderr)?.[0];
    return { opened, closedByService, latencies, ...(child.exitCode !== null && { died: `exit ${child.exitCode}${error ? `, ${error}` : ''}` }) };
  } finally {
    if (child.exitCode === null) child.kill('SIGINT');
    await exited;
  }
}

/** A connection that got its answer to one GET /healthz and stays open, idle; undefined if refused. */
function idleConnection(port: number): Promise<Socket | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(undefined);
    }, 5000);
    socket.once('error', () => {
      clearTimeout(timer);
      resolve(undefined);
    });
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    socket.once('data', () => {
      clearTimeout(timer);
      socket.on('data', () => undefined);
      resolve(socket);
    });
  });
}

/** Milliseconds to a 200 from GET /healthz on a new connection, or undefined (refused, reset, or over 5 s). */
function probe(port: number): Promise<number | undefined> {
  const started = performance.now();
  return new Promise((resolve) => {
    const outgoing = request({ port, host: '127.0.0.1', path: '/healthz', agent: false, timeout: 5000 }, (incoming) => {
      incoming.resume();
      incoming.on('end', () => resolve(incoming.statusCode === 200 ? performance.now() - started : undefined));
    });
    outgoing.on('timeout', () => outgoing.destroy());
    outgoing.on('error', () => resolve(undefined));
    outgoing.end();
  });
}
