// Webhook subscribers are isolated: a real server process delivers to a receiver that never
// answers, one that is down and one that is healthy; the healthy one gets every event while the
// hanging one still holds its first requests open (the sender's WEBHOOK_TIMEOUT has not ended them).
import t, { type Test } from 'tap';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from './harness/ports.ts';
import { serverEnv, startServer, type RunningServer } from './harness/process.ts';

const TOKEN = 'webhook-isolation-token-0123456789';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const EVENTS = 60;
// Deliveries one subscription may hold leased at once (dispatcher.ts's default).
const PER_SUBSCRIPTION = 4;

interface Receiver {
  url: string;
  /** Requests that arrived, by webhook-id. */
  ids: string[];
  /** Requests whose connection the sender closed (its timeout ended them). */
  abandoned: () => number;
  /** Resolves once `count` distinct webhook-ids have arrived. */
  distinct: (count: number) => Promise<void>;
  close: () => Promise<void>;
}

/** A receiver on 127.0.0.1 that answers 204 at once, or (`hang`) reads the request and never answers. */
async function startReceiver(t: Test, hang: boolean): Promise<Receiver> {
  const ids: string[] = [];
  let abandoned = 0;
  const waiters = new Set<() => void>();
  const server = createHttpServer((request, response) => {
    request.resume();
    request.on('end', () => {
      ids.push(String(request.headers['webhook-id']));
      for (const waiter of [...waiters]) waiter();
      if (hang) response.on('close', () => (abandoned += 1));
      else response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const close = () => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  };
  t.teardown(() => (server.listening ? close() : undefined));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    ids,
    abandoned: () => abandoned,
    distinct: (count) =>
      new Promise<void>((resolve) => {
        const check = () => new Set(ids).size >= count && (waiters.delete(check), resolve());
        waiters.add(check);
        check();
      }),
    close,
  };
}


async function subscribe(t: Test, server: RunningServer, url: string): Promise<void> {
  const response = await fetch(`${server.url}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url }) });
  t.equal(response.status, 201, `subscribed ${url}`);
}

t.test('a receiver that never answers, and one that is down, delay only their own deliveries', async (t) => {
  const hanging = await startReceiver(t, true);
  const healthy = await startReceiver(t, false);
  const server = await startServer(
    t,
    serverEnv(t.testdir(), {
      API_TOKENS: TOKEN,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms',
      // Long enough that only a sender waiting on the hanging receiver could end its requests first.
      WEBHOOK_TIMEOUT: '10s',
    }),
  );
  // Subscribed first: their deliveries are the oldest of every event, the first any claim would take.
  await subscribe(t, server, hanging.url);
  await subscribe(t, server, `http://127.0.0.1:${await freePort()}/hooks`);
  await subscribe(t, server, healthy.url);

  for (let id = 1; id <= EVENTS; id++) {
    const response = await fetch(`${server.url}/plants`, { method: 'POST', headers, body: JSON.stringify({ id, name: `plant ${id}` }) });
    t.equal(response.status, 200, `plant ${id} created`);
  }
  await healthy.distinct(EVENTS);
  t.equal(new Set(healthy.ids).size, EVENTS, `the healthy receiver got all ${EVENTS} events`);
  t.equal(hanging.abandoned(), 0, 'while the hanging receiver still holds every request it got: none was ended by the sender');
  t.ok(hanging.ids.length >= 1, `the hanging receiver got requests (${hanging.ids.length})`);
  t.ok(hanging.ids.length <= PER_SUBSCRIPTION, `and no more than its share of ${PER_SUBSCRIPTION} at once (${hanging.ids.length})`);

  await hanging.close(); // its held attempts end now, so the server stops without waiting out WEBHOOK_TIMEOUT
  t.same(await server.stop('SIGTERM'), { code: 0, signal: null }, 'SIGTERM exits 0');
});
