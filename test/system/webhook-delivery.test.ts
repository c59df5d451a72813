// Webhook deliveries end to end: real server processes POSTing to a real HTTP receiver on
// loopback. An acknowledged plant change is delivered even when the process is SIGKILLed before
// it could send; two instances sharing PostgreSQL deliver each event once; a receiver that
// answers 503 is retried, across a restart, with the same webhook-id until it answers 200.
import t, { type Test } from 'tap';
import { createServer as createHttpServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { freshSchemaUrl, postgresTestOptions } from '../harness/postgres.ts';
import { freePort } from '../harness/ports.ts';
import { serverEnv, startServer, type RunningServer } from '../harness/process.ts';

const TOKEN = 'webhook-delivery-token-0123456789';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const FAST_RETRIES = Array.from({ length: 10 }, () => '100ms').join(',');

function webhookEnv(dir: string, overrides: Record<string, string> = {}): Record<string, string> {
  return serverEnv(dir, {
    API_TOKENS: TOKEN,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOK_RETRY_SCHEDULE: FAST_RETRIES,
    WEBHOOK_TIMEOUT: '2s',
    ...overrides,
  });
}

interface Received {
  webhookId: string;
  event: string;
  body: string;
  headers: Record<string, string>;
  /** The status the receiver answered. */
  answered: number;
}

interface Receiver {
  port: number;
  url: string;
  received: Received[];
  /** Resolves once `count` distinct webhook-ids have arrived. */
  distinct: (count: number) => Promise<void>;
  /** Resolves once `count` requests have arrived, repeats included. */
  requests: (count: number) => Promise<void>;
}

/**
 * A webhook receiver on 127.0.0.1: records every request and answers `answer(webhookId, nth)`,
 * nth counting from 1 the requests that carried that webhook-id (200 by default).
 */
async function startReceiver(t: Test, options: { port?: number; answer?: (webhookId: string, nth: number) => number } = {}): Promise<Receiver> {
  const received: Received[] = [];
  const seen = new Map<string, number>();
  const waiters = new Set<() => boolean>();
  const until = (reached: () => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => reached() && (waiters.delete(check), resolve(), true);
      if (!check()) waiters.add(check);
    });
  const server = createHttpServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const flat = flatHeaders(request.headers);
      const webhookId = flat['webhook-id'] ?? '';
      const nth = (seen.get(webhookId) ?? 0) + 1;
      seen.set(webhookId, nth);
      const answered = options.answer?.(webhookId, nth) ?? 200;
      received.push({ webhookId, event: flat['webhook-event'] ?? '', body: Buffer.concat(chunks).toString('utf8'), headers: flat, answered });
      response.writeHead(answered, { 'content-type': 'text/plain' }).end(answered < 300 ? 'ok' : 'not now');
      for (const check of [...waiters]) check();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: `http://127.0.0.1:${port}/hooks/plants`,
    received,
    distinct: (count) => until(() => seen.size >= count),
    requests: (count) => until(() => received.length >= count),
  };
}

function flatHeaders(raw: IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(
    Object.entries(raw)
      .filter((entry): entry is [string, string | string[]] => entry[1] !== undefined)
      .map(([name, value]) => [name, Array.isArray(value) ? value.join(', ') : value]),
  );
}


async function subscribe(t: Test, server: RunningServer, url: string): Promise<{ id: number; secret: string }> {
  const response = await fetch(`${server.url}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url }) });
  t.equal(response.status, 201, 'the subscription is created');
  const body = (await response.json()) as { id: number; secret: string };
  t.match(body.secret, /^whsec_/, 'with its signing secret');
  return body;
}

async function postPlant(server: RunningServer, body: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`${server.url}/plants`, { method: 'POST', headers, body });
  return { status: response.status, body: await response.text() };
}

interface DeliveryBody {
  id: string;
  event: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastResponseStatus?: number;
  lastError?: string;
}

/**
 * The subscription's deliveries once `count` of them exist and none is pending any more. What the
 * receiver saw is awaited directly; this only waits for the sender to record the outcome it had.
 */
async function settledDeliveries(t: Test, server: RunningServer, webhookId: number, count: number): Promise<DeliveryBody[]> {
  let deliveries: DeliveryBody[] = [];
  for (let round = 0; round < 100; round++) {
    const response = await fetch(`${server.url}/webhooks/${webhookId}/deliveries?limit=1000`, { headers });
    if (response.status !== 200) t.fail(`listing the deliveries answered ${response.status}: ${await response.text()}`);
    else deliveries = (await response.json()) as DeliveryBody[];
    if (deliveries.length === count && deliveries.every((delivery) => delivery.status !== 'pending')) return deliveries;
    await sleep(50);
  }
  t.fail(`the deliveries did not settle: ${JSON.stringify(deliveries.filter((d) => d.status === 'pending').slice(0, 3))}`);
  return deliveries;
}

/** Whether the request carries a valid Standard Webhooks signature by `secret`. */
function verified(secret: string, request: Received): boolean {
  try {
    new Webhook(secret).verify(request.body, request.headers);
    return true;
  } catch {
    return false;
  }
}

/**
 * The outbox row must have survived the kill. The killed process may have leased it (claimed,
 * attempt not yet recorded): the lease then holds for WEBHOOK_TIMEOUT + 30 s (dispatcher.ts), so
 * the restarted process would only send after that. Ending that lease here stands in for the wait;
 * whether the process was killed before, during or after its first attempt is left to the race.
 */
function expireLeftLease(t: Test, dbPath: string): void {
  const db = new DatabaseSync(dbPath);
  try {
    const rows = db.prepare('SELECT status, attempts, claimed_until FROM webhook_deliveries').all() as {
      status: string;
      attempts: number;
      claimed_until: string | null;
    }[];
    t.same(rows.map((row) => row.status), ['pending'], 'one pending delivery survived the kill, committed with the plant');
    const leased = rows[0]?.claimed_until != null && rows[0].claimed_until > new Date().toISOString();
    t.comment(`killed ${leased ? 'while its first attempt was leased' : `with ${rows[0]?.attempts} attempt(s) recorded, no lease held`}`);
    if (leased) db.prepare('UPDATE webhook_deliveries SET claimed_until = ?').run(new Date().toISOString());
  } finally {
    db.close();
  }
}

t.test('durability on SQLite: a change acknowledged before a SIGKILL is delivered after the restart', async (t) => {
  const dir = t.testdir();
  const port = await freePort();
  const first = await startServer(t, webhookEnv(dir));
  const { id, secret } = await subscribe(t, first, `http://127.0.0.1:${port}/hooks/plants`);

  const plant = '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}';
  const created = await postPlant(first, plant);
  t.equal(created.status, 200, 'the plant is acknowledged');
  t.same(await first.stop('SIGKILL'), { code: null, signal: 'SIGKILL' }, 'and the process killed right after');
  expireLeftLease(t, join(dir, 'plants.db'));

  const receiver = await startReceiver(t, { port });
  const second = await startServer(t, webhookEnv(dir));
  await receiver.distinct(1);
  const [delivery] = receiver.received;
  t.equal(delivery!.event, 'plant.created', 'webhook-event: plant.created');
  t.equal(delivery!.body, plant, 'the body is the NewPlant JSON text, the int64 id exact');
  t.equal(delivery!.headers['content-type'], 'application/json', 'sent as JSON');
  t.ok(verified(secret, delivery!), 'signed with the subscription secret (standardwebhooks verifies it)');
  t.notOk(verified(`whsec_${Buffer.alloc(32, 7).toString('base64')}`, delivery!), 'which another secret does not verify');

  const [listed] = await settledDeliveries(t, second, id, 1);
  t.match(listed, { id: delivery!.webhookId, event: 'plant.created', status: 'delivered', lastResponseStatus: 200 }, 'listed as delivered');
  t.ok(
    receiver.received.every((request) => request.webhookId === delivery!.webhookId),
    `every request carried the one webhook-id (${receiver.received.length} received)`,
  );
  t.same(await second.stop('SIGTERM'), { code: 0, signal: null }, 'SIGTERM exits 0');
});

t.test('exactly once across two instances on one PostgreSQL database', await postgresTestOptions(), async (t) => {
  const receiver = await startReceiver(t);
  const env = webhookEnv(t.testdir(), { DATABASE_URL: await freshSchemaUrl() });
  const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)]);
  const { id, secret } = await subscribe(t, a, receiver.url);

  const PLANTS = 100;
  const ids = Array.from({ length: PLANTS }, (_, i) => 5_000 + i);
  const created = await Promise.all(ids.map((plantId, i) => postPlant(i % 2 ? a : b, `{"id":${plantId},"name":"plant ${i}"}`)));
  t.same(created.map((reply) => reply.status), ids.map(() => 200), 'every create, on either instance, answers 200');

  await receiver.distinct(PLANTS);
  const deliveries = await settledDeliveries(t, b, id, PLANTS);

  const arrived = new Set(receiver.received.map((request) => (JSON.parse(request.body) as { id: number }).id));
  t.same([...arrived].sort((x, y) => x - y), ids, 'every plant arrived');
  const counts = new Map<string, number>();
  for (const request of receiver.received) counts.set(request.webhookId, (counts.get(request.webhookId) ?? 0) + 1);
  const repeated = [...counts].filter(([, count]) => count > 1);
  t.same(repeated, [], 'no webhook-id arrived twice');
  t.equal(receiver.received.length, PLANTS, `${PLANTS} requests in all`);
  t.ok(receiver.received.every((request) => request.event === 'plant.created' && verified(secret, request)), 'each a signed plant.created');
  t.equal(deliveries.filter((delivery) => delivery.status === 'delivered' && delivery.attempts === 1).length, PLANTS, `${PLANTS} delivered, each on its first attempt`);
  t.same(new Set(deliveries.map((delivery) => delivery.id)), new Set(counts.keys()), 'the listed ids are the webhook-ids that arrived');

  for (const server of [a, b]) t.same(await server.stop('SIGTERM'), { code: 0, signal: null }, 'each stops cleanly');
});

t.test('a receiver answering 503 is retried across a restart until it answers 200', async (t) => {
  const dir = t.testdir();
  let firstAttempt: () => void;
  const firstArrived = new Promise<void>((resolve) => (firstAttempt = resolve));
  const receiver = await startReceiver(t, {
    answer: (_webhookId, nth) => {
      if (nth === 1) firstAttempt();
      return nth <= 2 ? 503 : 200;
    },
  });
  // The first retry waits a second, long enough for the restart to come in between.
  const env = webhookEnv(dir, { WEBHOOK_RETRY_SCHEDULE: `1s,${FAST_RETRIES}` });
  const first = await startServer(t, env);
  const { id, secret } = await subscribe(t, first, receiver.url);
  t.equal((await postPlant(first, '{"id":42,"name":"Fern"}')).status, 200, 'the plant is created');

  await firstArrived;
  t.same(await first.stop('SIGTERM'), { code: 0, signal: null }, 'the first instance stops after the first attempt');
  t.equal(receiver.received.length, 1, 'one attempt before the restart');
  const second = await startServer(t, env);
  await receiver.requests(3);
  const [delivery] = await settledDeliveries(t, second, id, 1);
  t.match(delivery, { status: 'delivered', attempts: 3, lastResponseStatus: 200 }, 'delivered on the third attempt');
  t.notOk(delivery!.lastError, 'with no error left over');
  t.same(receiver.received.map((request) => request.answered), [503, 503, 200], 'the receiver saw 503, 503, then answered 200');
  t.ok(receiver.received.every((request) => request.webhookId === delivery!.id), 'the same webhook-id each time');
  t.ok(receiver.received.every((request) => request.body === '{"id":42,"name":"Fern"}'), 'the same body each time');
  t.ok(receiver.received.every((request) => verified(secret, request)), 'each attempt signed anew and valid');
  t.same(await second.stop('SIGTERM'), { code: 0, signal: null }, 'SIGTERM exits 0');
});
