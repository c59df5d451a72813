// npm run bench:webhooks: how long 60 events take to reach a healthy webhook receiver, alone and beside a
// receiver that never answers and one that is down (each on a fresh server on SQLite, WEBHOOK_TIMEOUT 10s).
// Prints both figures; the second stays near the first when subscribers are isolated.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cleanup, serverEnv, startServer } from '../test/harness/process.ts';
import { freePort } from '../test/harness/ports.ts';

const EVENTS = 60;
const TOKEN = 'bench-webhooks-token-0123456789';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

interface Receiver { url: string; server: Server; count: () => number; reached: (count: number) => Promise<void> }

/** A receiver answering 204 at once, or (`hang`) never answering; `reached` resolves at its n-th request. */
async function receiver(hang: boolean): Promise<Receiver> {
  let count = 0;
  const waiters: { count: number; resolve: () => void }[] = [];
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      count += 1;
      for (const waiter of waiters.filter((w) => w.count <= count)) waiter.resolve();
      if (!hang) response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return { url, server, count: () => count, reached: (n) => new Promise<void>((resolve) => (n <= count ? resolve() : waiters.push({ count: n, resolve }))) };
}

function closed(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** Seconds from the first create until the healthy receiver has all the events; and how many requests the hanging one received. */
async function run(neighbours: boolean): Promise<{ seconds: number; held: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-webhooks-'));
  const cleanup = new Cleanup();
  try {
    const healthy = await receiver(false);
    const hanging = await receiver(true);
    cleanup.teardown(() => closed(healthy.server));
    const env = { API_TOKENS: TOKEN, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_TIMEOUT: '10s', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms' };
    const server = await startServer(cleanup, serverEnv(dir, env));
    // Closed before the server stops, so that its held attempts end and it stops at once.
    cleanup.teardown(() => closed(hanging.server));
    const targets = neighbours ? [hanging.url, `http://127.0.0.1:${await freePort()}/hooks`, healthy.url] : [healthy.url];
    for (const url of targets) await fetch(`${server.url}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url }) });
    const start = performance.now();
    for (let id = 1; id <= EVENTS; id++) await fetch(`${server.url}/plants`, { method: 'POST', headers, body: JSON.stringify({ id, name: `plant ${id}` }) });
    await healthy.reached(EVENTS);
    return { seconds: (performance.now() - start) / 1000, held: hanging.count() };
  } finally {
    await cleanup.run();
    rmSync(dir, { recursive: true, force: true });
  }
}

const alone = await run(false);
console.log(`${EVENTS} events to a healthy receiver alone: ${alone.seconds.toFixed(2)} s`);
const beside = await run(true);
console.log(`${EVENTS} events to a healthy receiver beside a hanging and a down one: ${beside.seconds.toFixed(2)} s (the hanging one received ${beside.held} requests)`);
