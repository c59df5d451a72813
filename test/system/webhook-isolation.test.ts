// Webhook subscribers are isolated: a real server process delivers to a receiver that never
// answers, one that is down and one that is healthy; the healthy one gets every event while the
// hanging one still holds its first requests open (the sender's WEBHOOK_TIMEOUT has not ended them).
// However many subscriptions hang (more than the dispatcher's 32 shared slots too), a healthy one
// subscribed after them gets all its events before the sender cuts off any hanging subscription's
// requests a second time.
import t, { type Test } from 'tap';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from '../harness/ports.ts';
import { serverEnv, startServer, type RunningServer } from '../harness/process.ts';

const TOKEN = 'webhook-isolation-token-0123456789';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const EVENTS = 60;
// Deliveries one subscription may hold leased at once (dispatcher.ts's default).
const PER_SUBSCRIPTION = 4;

interface Receiver {
  url: string;
  /** Requests that arrived, by webhook-id. */
  ids: string[];
  /** The paths requests arrived at (one per subscription, when each has its own). */
  paths: Set<string>;
  /** Requests whose connection the sender closed (its timeout ended them). */
  abandoned: () => number;
  /** Resolves once `count` distinct webhook-ids have arrived. */
  distinct: (count: number) => Promise<void>;
  /** Resolves once the sender has closed two requests to the same path: one subscription's attempts timed out twice. */
  cutOffTwice: () => Promise<void>;
  close: () => Promise<void>;
}

/** A receiver on 127.0.0.1 that answers 204 at once, or (`hang`) reads the request and never answers. */
async function startReceiver(t: Test, hang: boolean): Promise<Receiver> {
  const ids: string[] = [];
  const paths = new Set<string>();
  let abandoned = 0;
  const abandonedByPath = new Map<string, number>();
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const waiter of [...waiters]) waiter();
  };
  const until = (reached: () => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => reached() && (waiters.delete(check), resolve());
      waiters.add(check);
      check();
    });
  const server = createHttpServer((request, response) => {
    request.resume();
    request.on('end', () => {
      const path = String(request.url);
      ids.push(String(request.headers['webhook-id']));
      paths.add(path);
      notify();
      if (!hang) return response.writeHead(204).end();
      response.on('close', () => {
        abandoned += 1;
        abandonedByPath.set(path, (abandonedByPath.get(path) ?? 0) + 1);
        notify();
      });
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
    paths,
    abandoned: () => abandoned,
    distinct: (count) => until(() => new Set(ids).size >= count),
    cutOffTwice: () => until(() => [...abandonedByPath.values()].some((times) => times >= 2)),
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

// The dispatcher shares 32 slots; 8 hanging subscriptions could hold them all, 100 outnumber them.
for (const hangingCount of [8, 32, 100]) {
  t.test(`beside ${hangingCount} subscriptions whose receiver never answers, a healthy one gets every event`, async (t) => {
    const hanging = await startReceiver(t, true);
    const healthy = await startReceiver(t, false);
    const server = await startServer(
      t,
      serverEnv(t.testdir(), {
        API_TOKENS: TOKEN,
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 20 }, () => '100ms').join(','),
        // Short, so that the sender cuts off and retries hanging deliveries while the healthy one is served.
        WEBHOOK_TIMEOUT: '4s',
        // Room for the hanging ones and the healthy one (101 past the default of 100).
        WEBHOOK_SUBSCRIPTIONS_MAX: String(hangingCount + 1),
      }),
    );
    // Subscribed first: their deliveries are the oldest of every event, and come first in every claim.
    for (let index = 0; index < hangingCount; index++) {
      const response = await fetch(`${server.url}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url: `${hanging.url}/${index}` }) });
      if (response.status !== 201) t.fail(`subscription ${index} answered ${response.status}`);
    }
    await subscribe(t, server, healthy.url);

    const events = 30;
    const outcome = Promise.race([healthy.distinct(events).then(() => 'the healthy receiver'), hanging.cutOffTwice().then(() => 'a hanging subscription')]);
    for (let id = 1; id <= events; id++) {
      const response = await fetch(`${server.url}/plants`, { method: 'POST', headers, body: JSON.stringify({ id, name: `plant ${id}` }) });
      if (response.status !== 200) t.fail(`plant ${id} answered ${response.status}`);
    }
    t.equal(await outcome, 'the healthy receiver', `the healthy receiver got all ${events} events before any hanging subscription was cut off twice`);
    t.equal(new Set(healthy.ids).size, events, `the healthy receiver has ${new Set(healthy.ids).size} distinct events`);
    t.equal(hanging.paths.size, hangingCount, `while every hanging subscription got its turn too (${hanging.paths.size})`);

    await hanging.close(); // its held attempts end now, so the server stops without waiting out WEBHOOK_TIMEOUT
    t.same(await server.stop('SIGTERM'), { code: 0, signal: null }, 'SIGTERM exits 0');
  });
}
