// npm run bench:webhooks: how late 60 events reach a healthy webhook receiver, alone (the reference) and
// subscribed after 1, 8, 32 and 100 subscriptions whose receiver accepts and never answers (each case on a
// fresh server on SQLite). An event's lateness is its arrival at the healthy receiver less the moment its
// create was sent (at or before it was due); fair sharing keeps the worst below one WEBHOOK_TIMEOUT.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cleanup, serverEnv, startServer } from '../test/harness/process.ts';

const EVENTS = 60;
const HANGING = [0, 1, 8, 32, 100];
const TIMEOUT_S = 2;
// A case gives up after this long: a starved receiver would otherwise take many minutes.
const GIVE_UP_S = 15 * TIMEOUT_S;
const TOKEN = 'bench-webhooks-token-0123456789';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

interface Receiver { url: string; server: Server; requests: () => number; arrivals: Map<number, number>; all: Promise<void> }

/** A receiver answering 204 at once and noting when each plant's event first arrived, or (`hang`) never answering. */
async function receiver(hang: boolean): Promise<Receiver> {
  let requests = 0;
  const arrivals = new Map<number, number>();
  const all = Promise.withResolvers<void>();
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      requests += 1;
      if (hang) return;
      const { id } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: number };
      if (!arrivals.has(id)) arrivals.set(id, performance.now());
      if (arrivals.size === EVENTS) all.resolve();
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return { url, server, requests: () => requests, arrivals, all: all.promise };
}

function closed(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

interface Result { arrived: number; worst: number; median: number; held: number }

/** The healthy receiver's lateness, in seconds, with `hanging` subscriptions to a receiver that never answers, subscribed first. */
async function run(hanging: number): Promise<Result> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-webhooks-'));
  const cleanup = new Cleanup();
  try {
    const healthy = await receiver(false);
    const silent = await receiver(true);
    cleanup.teardown(() => closed(healthy.server));
    const env = { API_TOKENS: TOKEN, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_TIMEOUT: `${TIMEOUT_S}s`, WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms',
      WEBHOOK_SUBSCRIPTIONS_MAX: String(hanging + 1) };
    const server = await startServer(cleanup, serverEnv(dir, env));
    // Closed before the server stops, so that its held attempts end and it stops at once.
    cleanup.teardown(() => closed(silent.server));
    const targets = [...Array.from({ length: hanging }, (_, index) => `${silent.url}/${index}`), healthy.url];
    let subscription = 0;
    for (const url of targets) {
      subscription = ((await (await fetch(`${server.url}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url }) })).json()) as { id: number }).id;
    }
    const sent = new Map<number, number>();
    const start = performance.now();
    for (let id = 1; id <= EVENTS; id++) {
      sent.set(id, performance.now());
      await fetch(`${server.url}/plants`, { method: 'POST', headers, body: JSON.stringify({ id, name: `plant ${id}` }) });
    }
    const giveUp = new AbortController();
    const deadline = sleep(GIVE_UP_S * 1000 - (performance.now() - start), undefined, { signal: giveUp.signal }).catch(() => undefined);
    await Promise.race([healthy.all, deadline]);
    giveUp.abort();
    const end = performance.now();
    if (healthy.arrivals.size < EVENTS) {
      const deliveries = (await (await fetch(`${server.url}/webhooks/${subscription}/deliveries?limit=1000`, { headers })).json()) as { status: string }[];
      console.log(`  the healthy subscription's deliveries not delivered: ${JSON.stringify(deliveries.filter((d) => d.status !== 'delivered').slice(0, 3))}`);
    }
    // An event that has not arrived is at least as late as the moment the case gave up.
    const lateness = [...sent].map(([id, at]) => ((healthy.arrivals.get(id) ?? end) - at) / 1000).sort((a, b) => a - b);
    return { arrived: healthy.arrivals.size, worst: lateness.at(-1)!, median: lateness[Math.floor(lateness.length / 2)]!, held: silent.requests() };
  } finally {
    await cleanup.run();
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(`${EVENTS} events to a healthy receiver, WEBHOOK_TIMEOUT ${TIMEOUT_S} s; lateness = arrival - create sent`);
for (const hanging of HANGING) {
  const { arrived, worst, median, held } = await run(hanging);
  const beside = hanging === 0 ? 'alone (reference)' : `beside ${hanging} hanging`;
  const late = arrived === EVENTS ? `worst ${worst.toFixed(2)} s` : `gave up after ${GIVE_UP_S} s, worst >= ${worst.toFixed(2)} s`;
  const ratio = (worst / TIMEOUT_S).toFixed(2);
  console.log(`${beside.padEnd(20)} arrived ${arrived}/${EVENTS}, ${late} (${ratio} x WEBHOOK_TIMEOUT), median ${median.toFixed(2)} s; hanging requests ${held}`);
}
