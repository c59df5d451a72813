// Webhooks end to end, in process: subscriptions over the API, and deliveries to a real HTTP
// receiver on 127.0.0.1 that records every request and answers as each test scripts it.
// Nothing here sleeps: tests await the receiver's n-th request, then the deliveries API until
// the delivery reaches the state they expect (bounded, so a missing behaviour fails, never hangs).
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Webhook } from 'standardwebhooks';
import t, { type Test } from 'tap';
import { parseJson } from '../../src/contract/json.ts';
import { isPublicAddress } from '../../src/webhooks/targets.ts';
import type { PlantStore } from '../../src/store/types.ts';
import type { components } from '../../src/generated/openapi.ts';
import { generateToken, hashToken, tokenHint } from '../../src/tokens/format.ts';
import { typedClient } from '../harness/client.ts';
import { contractProblems } from '../harness/contract.ts';
import { AUTH, api, build, createPlant } from '../harness/helper.ts';

const PRIVATE_OK = { webhooks: { allowPrivateNetworks: true } };
const JSON_TYPE = { 'content-type': 'application/json' };
const ALL_EVENTS = ['plant.created', 'plant.replaced', 'plant.deleted'];
const SECRET = /^whsec_[A-Za-z0-9+/]+=*$/;

// ---------------------------------------------------------------------------------------------
// The receiver

interface Received {
  /** When the request had fully arrived (ms since the epoch). */
  at: number;
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  /** The raw body text, exactly as sent. */
  body: string;
}

/**
 * A status; a status with headers, sent once `when` (if given) settles; or 'hang': keep the
 * request open and never answer.
 */
type Answer = number | { status: number; headers?: Record<string, string>; when?: Promise<unknown> } | 'hang';

interface Receiver {
  /** http://127.0.0.1:<port>/hook */
  url: string;
  port: number;
  requests: Received[];
  /** Resolves with the n-th request (1-based) once it has arrived; rejects if it has not within 5 s. */
  nth(n: number): Promise<Received>;
}

/** Answers the scripted answers in order, then `otherwise` to every further request. */
async function receiver(t: Test, answers: Answer[] = [], otherwise: Answer = 200): Promise<Receiver> {
  const requests: Received[] = [];
  const waiting: { n: number; resolve: (request: Received) => void }[] = [];
  const script = [...answers];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      requests.push({
        at: Date.now(),
        method: request.method ?? '',
        url: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      for (const waiter of waiting.filter((entry) => entry.n <= requests.length)) {
        waiting.splice(waiting.indexOf(waiter), 1);
        waiter.resolve(requests[waiter.n - 1]!);
      }
      const answer = script.length > 0 ? script.shift()! : otherwise;
      if (answer === 'hang') return;
      const { status, headers = {}, when } = typeof answer === 'number' ? { status: answer } : answer;
      Promise.resolve(when).then(() => response.writeHead(status, headers).end('ok'));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections(); // hung requests included
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    requests,
    nth(n) {
      if (requests.length >= n) return Promise.resolve(requests[n - 1]!);
      return new Promise((resolve, reject) => {
        // A guard, not a wait: a missing behaviour fails here rather than at tap's timeout.
        const guard = setTimeout(() => reject(new Error(`request ${n} never arrived (got ${requests.length})`)), 5_000).unref();
        waiting.push({
          n,
          resolve: (request) => {
            clearTimeout(guard);
            resolve(request);
          },
        });
      });
    },
  };
}

/** The headers as the `standardwebhooks` verifier takes them. */
function stringHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
}

function verifies(secret: string, body: string, headers: IncomingHttpHeaders): boolean {
  try {
    new Webhook(secret).verify(body, stringHeaders(headers));
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// The API

type WebhookBody = components['schemas']['Webhook'];

interface Subscribed {
  id: bigint;
  secret: string;
}

async function subscribe(t: Test, app: FastifyInstance, url: string, events?: string[]): Promise<Subscribed> {
  const response = await api(t, app, {
    method: 'POST',
    url: '/webhooks',
    headers: { ...AUTH, ...JSON_TYPE },
    payload: JSON.stringify({ url, ...(events && { events }) }),
  });
  t.equal(response.statusCode, 201, `subscribed ${url}`);
  const { id, secret } = response.json() as Subscribed;
  return { id, secret };
}

interface DeliveryBody {
  id: string;
  event: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: bigint;
  createdAt: string;
  lastAttemptAt?: string;
  lastResponseStatus?: bigint;
  lastError?: string;
  nextAttemptAt?: string;
}

/**
 * Reads GET /webhooks/{id}/deliveries until `done` holds, yielding to the event loop (and so to
 * the dispatcher) between reads; fails after five seconds. The last answer is checked against
 * the contract.
 */
async function deliveriesUntil(t: Test, app: FastifyInstance, webhookId: bigint, done: (deliveries: DeliveryBody[]) => boolean, what: string): Promise<DeliveryBody[]> {
  const url = `/webhooks/${webhookId}/deliveries`;
  const deadline = Date.now() + 5_000;
  for (;;) {
    const response = await app.inject({ method: 'GET', url, headers: AUTH });
    const deliveries = response.statusCode === 200 ? (parseJson(response.body) as DeliveryBody[]) : [];
    if (done(deliveries)) {
      t.same(contractProblems('GET', url, response), [], `${url} matches openapi.yaml`);
      return deliveries;
    }
    if (Date.now() > deadline) throw new Error(`gave up waiting until ${what}; deliveries: ${response.body}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The single delivery of the subscription, once it has reached `status`. */
async function onlyDelivery(t: Test, app: FastifyInstance, webhookId: bigint, status: DeliveryBody['status']): Promise<DeliveryBody> {
  const [delivery] = await deliveriesUntil(t, app, webhookId, (list) => list.length === 1 && list[0]!.status === status, `the delivery is ${status}`);
  return delivery!;
}

async function deliveries(t: Test, app: FastifyInstance, webhookId: bigint): Promise<DeliveryBody[]> {
  const response = await api(t, app, { method: 'GET', url: `/webhooks/${webhookId}/deliveries`, headers: AUTH });
  t.equal(response.statusCode, 200);
  return response.json() as DeliveryBody[];
}

async function listWebhooks(t: Test, app: FastifyInstance): Promise<WebhookBody[]> {
  const response = await api(t, app, { method: 'GET', url: '/webhooks', headers: AUTH });
  t.equal(response.statusCode, 200);
  return response.json() as WebhookBody[];
}

function change(t: Test, app: FastifyInstance, method: 'PUT' | 'DELETE', id: string, payload?: string) {
  return api(t, app, { method, url: `/plants/${id}`, headers: { ...AUTH, ...(payload && JSON_TYPE) }, ...(payload && { payload }) });
}

async function issue(store: PlantStore, name: string, scopes: string[]): Promise<string> {
  const token = generateToken();
  await store.tokens.createToken({ name, hash: hashToken(token), hint: tokenHint(token), scopes });
  return token;
}

// ---------------------------------------------------------------------------------------------
// Subscriptions

t.test('POST /webhooks answers the subscription and its secret; GET lists without secrets; DELETE removes', async (t) => {
  const { app } = await build(t, PRIVATE_OK);
  const client = typedClient(t, app);
  const before = Date.now();
  const created = await client.POST('/webhooks', { body: { url: 'https://example.com/hooks/plants' } });
  t.equal(created.response.status, 201);
  const first = created.data!;
  t.same(Object.keys(first).sort(), ['createdAt', 'enabled', 'events', 'id', 'secret', 'url'], 'exactly these fields');
  t.equal(typeof first.id, 'bigint', 'an int64 id');
  t.equal(first.url, 'https://example.com/hooks/plants');
  t.same(first.events, ALL_EVENTS, 'events default to all three');
  t.equal(first.enabled, true);
  t.match(first.secret, SECRET, 'a Standard Webhooks secret');
  t.equal(Buffer.from(first.secret.slice('whsec_'.length), 'base64').length, 32, '32 random bytes');
  const createdAt = Date.parse(first.createdAt);
  t.ok(createdAt >= before - 1_000 && createdAt <= Date.now() + 1_000, `createdAt is now: ${first.createdAt}`);

  const second = (await client.POST('/webhooks', { body: { url: 'http://example.org/deleted', events: ['plant.deleted'] } })).data!;
  t.not(second.id, first.id, 'each subscription has its own id');
  t.not(second.secret, first.secret, 'and its own secret');
  t.same(second.events, ['plant.deleted']);

  const listed = await client.GET('/webhooks');
  t.equal(listed.response.status, 200);
  t.same(
    listed.data,
    [
      { id: first.id, url: first.url, events: ALL_EVENTS, createdAt: first.createdAt, enabled: true },
      { id: second.id, url: second.url, events: ['plant.deleted'], createdAt: second.createdAt, enabled: true },
    ],
    'oldest first',
  );
  t.notOk(listed.data!.some((webhook) => 'secret' in webhook), 'no secret is ever listed');
  t.notMatch((await api(t, app, { method: 'GET', url: '/webhooks', headers: AUTH })).body, /whsec_|"secret"/, 'not even in the raw text');

  const path = { params: { path: { webhookId: first.id } } };
  t.same((await client.GET('/webhooks/{webhookId}/deliveries', path)).data, [], 'no deliveries yet');
  t.equal((await client.DELETE('/webhooks/{webhookId}', path)).response.status, 204);
  const again = await client.DELETE('/webhooks/{webhookId}', path);
  t.equal(again.response.status, 404, 'deleting twice: 404');
  t.match(again.error, { error: 404, message: `There is no webhook subscription with id ${first.id}.` });
  t.equal((await client.GET('/webhooks/{webhookId}/deliveries', path)).response.status, 404, 'a deleted subscription has no deliveries');
  const unknown = await client.GET('/webhooks/{webhookId}/deliveries', { params: { path: { webhookId: 987654321n } } });
  t.equal(unknown.response.status, 404, 'nor has an unknown one');
  t.same((await client.GET('/webhooks')).data!.map((webhook) => webhook.id), [second.id], 'the other subscription stays');
});

t.test('POST /webhooks refuses an invalid body with a 400 naming the field', async (t) => {
  const { app } = await build(t); // none of these needs DNS: they fail before any lookup
  const cases: [string, string, RegExp][] = [
    ['missing url', '{"events":["plant.created"]}', /missing the required field "url"/],
    ['not a URI', '{"url":"not a url"}', /field "url" must match format "uri"/],
    ['an ftp URL', '{"url":"ftp://example.com/hook"}', /field "url" must use http or https/],
    ['credentials in the URL', '{"url":"https://user:pass@example.com/hook"}', /field "url" must not carry credentials/],
    ['a password-only URL', '{"url":"https://:pass@example.com/hook"}', /field "url" must not carry credentials/],
    ['an unknown event', '{"url":"https://example.com/hook","events":["plant.eaten"]}', /field "events\.0" must be equal to one of the allowed values/],
    ['no events', '{"url":"https://example.com/hook","events":[]}', /field "events" must NOT have fewer than 1 items/],
    ['duplicate events', '{"url":"https://example.com/hook","events":["plant.created","plant.created"]}', /field "events" must NOT have duplicate items/],
    ['an unknown field', '{"url":"https://example.com/hook","secret":"whsec_AAAA"}', /has the unknown field "secret"/],
  ];
  for (const [label, payload, message] of cases) {
    const response = await api(t, app, { method: 'POST', url: '/webhooks', headers: { ...AUTH, ...JSON_TYPE }, payload });
    t.equal(response.statusCode, 400, label);
    t.match(JSON.parse(response.body), { error: 400, message }, `${label}: ${response.body}`);
  }
  t.same(await listWebhooks(t, app), [], 'nothing was subscribed');
});

t.test('every /webhooks operation needs the webhooks:manage scope', async (t) => {
  const { app, store } = await build(t, PRIVATE_OK);
  const existing = await subscribe(t, app, 'https://example.com/existing');
  const plantsOnly = await issue(store, 'plants', ['plants:read', 'plants:write']);
  const manager = await issue(store, 'manager', ['webhooks:manage']);
  const operations = [
    { method: 'POST', url: '/webhooks', payload: '{"url":"https://example.com/new"}' },
    { method: 'GET', url: '/webhooks' },
    { method: 'GET', url: `/webhooks/${existing.id}/deliveries` },
    { method: 'POST', url: `/webhooks/${existing.id}/rotate-secret` },
    { method: 'POST', url: `/webhooks/${existing.id}/enable` },
    { method: 'DELETE', url: `/webhooks/${existing.id}` },
  ] as const;
  for (const operation of operations) {
    const headers = { authorization: `Bearer ${plantsOnly}`, ...('payload' in operation && JSON_TYPE) };
    const response = await api(t, app, { ...operation, headers });
    t.equal(response.statusCode, 403, `${operation.method} ${operation.url} with plants scopes only`);
    t.equal(response.headers['www-authenticate'], 'Bearer realm="plants", error="insufficient_scope", scope="webhooks:manage"');
    t.match(JSON.parse(response.body), { error: 403, message: /webhooks:manage/ });
  }
  t.same((await listWebhooks(t, app)).map((webhook) => webhook.url), ['https://example.com/existing'], 'nothing was created or deleted');

  const expected = [201, 200, 200, 200, 200, 204];
  for (const [index, operation] of operations.entries()) {
    const headers = { authorization: `Bearer ${manager}`, ...('payload' in operation && JSON_TYPE) };
    t.equal((await api(t, app, { ...operation, headers })).statusCode, expected[index], `${operation.method} ${operation.url} with webhooks:manage`);
  }
  const plantWrite = await createPlant(t, app, '{"id":1,"name":"Fern"}', { authorization: `Bearer ${manager}` });
  t.equal(plantWrite.statusCode, 403, 'webhooks:manage grants no plant scope');
});

// ---------------------------------------------------------------------------------------------
// Deliveries

t.test('plant changes are delivered, signed, once each, to the subscriptions for the event', async (t) => {
  const everything = await receiver(t);
  const deletions = await receiver(t);
  const { app } = await build(t, PRIVATE_OK);
  await app.ready();
  const all = await subscribe(t, app, everything.url);
  const deletedOnly = await subscribe(t, app, deletions.url, ['plant.deleted']);
  const before = Math.floor(Date.now() / 1000);

  const body = '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}';
  t.equal((await createPlant(t, app, body)).statusCode, 200);
  const created = await everything.nth(1);
  t.equal(created.method, 'POST');
  t.equal(created.url, '/hook');
  t.equal(created.body, body, 'the body is the NewPlant JSON text, byte for byte');
  t.match(created.body, '"id":9007199254740993', 'the int64 id is exact, not rounded to 9007199254740992');
  t.equal(created.headers['content-type'], 'application/json');
  t.equal(created.headers['webhook-event'], 'plant.created');
  t.match(created.headers['webhook-id'], /^msg_\w+$/);
  const timestamp = Number(created.headers['webhook-timestamp']);
  t.ok(Number.isInteger(timestamp) && timestamp >= before - 1 && timestamp <= Date.now() / 1000 + 1, `webhook-timestamp is now, in seconds: ${timestamp}`);
  t.match(created.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/);
  t.ok(verifies(all.secret, created.body, created.headers), 'the signature verifies with the subscription secret');
  t.notOk(verifies(deletedOnly.secret, created.body, created.headers), 'but not with another subscription secret');
  t.notOk(verifies(`whsec_${randomBytes(32).toString('base64')}`, created.body, created.headers), 'nor with a random secret');
  t.notOk(verifies(all.secret, created.body.replace('Monstera', 'Monsterb'), created.headers), 'nor over a tampered body');
  t.notOk(verifies(all.secret, created.body, { ...created.headers, 'webhook-id': `${created.headers['webhook-id']}x` }), 'nor under another webhook-id');
  const [createdDelivery] = await deliveriesUntil(t, app, all.id, (list) => list[0]?.status === 'delivered', 'the creation is delivered');
  t.match(createdDelivery, { id: created.headers['webhook-id'], event: 'plant.created', status: 'delivered', attempts: 1n, lastResponseStatus: 200n });
  t.notOk('lastError' in createdDelivery! || 'nextAttemptAt' in createdDelivery!, 'a delivered delivery has no error and no next attempt');

  t.equal((await createPlant(t, app, body)).statusCode, 200, 'an identical replay answers 200 again');
  t.equal((await deliveries(t, app, all.id)).length, 1, 'and writes no delivery');

  const replaced = '{"id":9007199254740993,"name":"Monstera deliciosa"}';
  t.equal((await change(t, app, 'PUT', '9007199254740993', '{"name":"Monstera deliciosa"}')).statusCode, 200);
  const replacement = await everything.nth(2);
  t.equal(replacement.headers['webhook-event'], 'plant.replaced', 'the next delivery is the replacement, not a replay');
  t.equal(replacement.body, replaced, 'the body is the StoredPlant as now stored (its tag removed)');
  t.ok(verifies(all.secret, replacement.body, replacement.headers));
  t.not(replacement.headers['webhook-id'], created.headers['webhook-id'], 'each event has its own message id');

  t.equal((await change(t, app, 'DELETE', '9007199254740993')).statusCode, 204);
  const deletion = await everything.nth(3);
  t.equal(deletion.headers['webhook-event'], 'plant.deleted');
  t.equal(deletion.body, replaced, 'the body is the plant as it was');
  t.ok(verifies(all.secret, deletion.body, deletion.headers));

  const deletionOnly = await deletions.nth(1);
  t.equal(deletionOnly.headers['webhook-event'], 'plant.deleted', 'the plant.deleted subscription receives the deletion');
  t.equal(deletionOnly.body, replaced);
  t.ok(verifies(deletedOnly.secret, deletionOnly.body, deletionOnly.headers), 'signed with its own secret');
  t.notOk(verifies(all.secret, deletionOnly.body, deletionOnly.headers), 'not with the other subscription secret');
  t.not(deletionOnly.headers['webhook-id'], deletion.headers['webhook-id'], 'each subscription gets its own delivery');

  const allDone = await deliveriesUntil(t, app, all.id, (list) => list.length === 3 && list.every((d) => d.status === 'delivered'), 'all three are delivered');
  t.same(allDone.map((d) => d.event), ['plant.deleted', 'plant.replaced', 'plant.created'], 'newest first');
  const onlyDone = await deliveriesUntil(t, app, deletedOnly.id, (list) => list.length === 1 && list[0]!.status === 'delivered', 'the deletion is delivered');
  t.equal(onlyDone[0]!.event, 'plant.deleted', 'no creation or replacement was queued for the plant.deleted subscription');
  t.equal(everything.requests.length, 3, 'exactly one request per event');
  t.equal(deletions.requests.length, 1, 'exactly one request, for the deletion');
});

t.test('two subscriptions to the same event each get a delivery signed with their own secret', async (t) => {
  const [one, two] = [await receiver(t), await receiver(t)];
  const { app } = await build(t, PRIVATE_OK);
  await app.ready();
  const first = await subscribe(t, app, one.url, ['plant.created']);
  const second = await subscribe(t, app, two.url);
  await createPlant(t, app, '{"id":7,"name":"Fern"}');
  const [a, b] = await Promise.all([one.nth(1), two.nth(1)]);
  t.equal(a.body, '{"id":7,"name":"Fern"}');
  t.equal(b.body, '{"id":7,"name":"Fern"}');
  t.ok(verifies(first.secret, a.body, a.headers) && !verifies(second.secret, a.body, a.headers), 'the first verifies with its secret only');
  t.ok(verifies(second.secret, b.body, b.headers) && !verifies(first.secret, b.body, b.headers), 'the second verifies with its secret only');
  t.not(a.headers['webhook-id'], b.headers['webhook-id']);
  await onlyDelivery(t, app, first.id, 'delivered');
  await onlyDelivery(t, app, second.id, 'delivered');
  t.equal(one.requests.length + two.requests.length, 2);
});

t.test('a failed attempt is retried with the same webhook-id until a 2xx', async (t) => {
  const hook = await receiver(t, [500, 500], 200);
  const { app } = await build(t, PRIVATE_OK); // schedule 50 ms, 50 ms, 50 ms
  await app.ready();
  const { id, secret } = await subscribe(t, app, hook.url);
  await createPlant(t, app, '{"id":1,"name":"Fern"}');
  await hook.nth(3);
  const delivery = await onlyDelivery(t, app, id, 'delivered');
  t.match(delivery, { status: 'delivered', attempts: 3n, lastResponseStatus: 200n });
  t.notOk('lastError' in delivery, 'the success clears the last error');
  t.equal(hook.requests.length, 3, 'exactly three attempts');
  t.same(new Set(hook.requests.map((request) => request.headers['webhook-id'])), new Set([delivery.id]), 'all with the same webhook-id');
  t.ok(hook.requests.every((request) => request.body === '{"id":1,"name":"Fern"}' && verifies(secret, request.body, request.headers)), 'each attempt is signed');
  for (const n of [1, 2]) {
    const gap = hook.requests[n]!.at - hook.requests[n - 1]!.at;
    t.ok(gap >= 45, `attempt ${n + 1} waits for the schedule (50 ms, jittered ±10%): ${gap} ms`);
  }
});

t.test('a delivery fails for good after the last delay of the schedule', async (t) => {
  const hook = await receiver(t, [], 500);
  const { app } = await build(t, { webhooks: { allowPrivateNetworks: true, retryScheduleMs: [50, 50] } });
  await app.ready();
  const { id } = await subscribe(t, app, hook.url);
  await createPlant(t, app, '{"id":1,"name":"Fern"}');
  await hook.nth(3);
  const delivery = await onlyDelivery(t, app, id, 'failed');
  t.match(delivery, { status: 'failed', attempts: 3n, lastResponseStatus: 500n, lastError: /500/ });
  t.notOk('nextAttemptAt' in delivery, 'no attempt is planned');
  t.ok(delivery.lastAttemptAt && Date.parse(delivery.lastAttemptAt) >= hook.requests[2]!.at - 1_000, `lastAttemptAt ${delivery.lastAttemptAt}`);
  t.equal(hook.requests.length, 3, 'the first attempt and one per delay');
  t.equal(new Set(hook.requests.map((request) => request.headers['webhook-id'])).size, 1, 'all with the same webhook-id');
  const [webhook] = await listWebhooks(t, app);
  t.equal(webhook!.enabled, true, 'a failing receiver stays subscribed (only 410 disables)');
});

t.test('410 Gone fails the delivery at once and disables the subscription', async (t) => {
  const gone = await receiver(t, [], 410);
  const control = await receiver(t);
  const { app } = await build(t, PRIVATE_OK);
  await app.ready();
  const { id } = await subscribe(t, app, gone.url);
  await createPlant(t, app, '{"id":1,"name":"Fern"}');
  await gone.nth(1);
  const delivery = await onlyDelivery(t, app, id, 'failed');
  t.match(delivery, { status: 'failed', attempts: 1n, lastResponseStatus: 410n, lastError: /410/ }, 'not retried');
  const [webhook] = await listWebhooks(t, app);
  t.match(webhook, { id, enabled: false, disabledReason: /410/ }, `disabled: ${webhook?.disabledReason}`);

  const other = await subscribe(t, app, control.url);
  await createPlant(t, app, '{"id":2,"name":"Ivy"}');
  await change(t, app, 'DELETE', '1');
  await control.nth(2);
  await deliveriesUntil(t, app, other.id, (list) => list.length === 2 && list.every((d) => d.status === 'delivered'), 'the control got both');
  t.equal((await deliveries(t, app, id)).length, 1, 'nothing more was queued for the disabled subscription');
  t.equal(gone.requests.length, 1, 'nor sent to it');
});

t.test('a disabled subscription is enabled again: later events are delivered, with its id and secret', async (t) => {
  const once = await receiver(t, [410], 204);
  const { app } = await build(t, PRIVATE_OK);
  await app.ready();
  const { id, secret } = await subscribe(t, app, once.url);
  await createPlant(t, app, '{"id":1,"name":"Fern"}');
  await once.nth(1);
  await onlyDelivery(t, app, id, 'failed');
  t.match((await listWebhooks(t, app))[0], { id, enabled: false }, 'disabled by the 410');

  const enabled = await api(t, app, { method: 'POST', url: `/webhooks/${id}/enable`, headers: AUTH });
  t.equal(enabled.statusCode, 200, 'POST /webhooks/{id}/enable: 200');
  const body = enabled.json() as WebhookBody;
  t.same(Object.keys(body).sort(), ['createdAt', 'enabled', 'events', 'id', 'url'], 'the subscription, no secret and no disabledReason');
  t.match(body, { id, url: once.url, enabled: true });
  t.same(await listWebhooks(t, app), [body], 'listed enabled');
  t.equal((await api(t, app, { method: 'POST', url: `/webhooks/${id}/enable`, headers: AUTH })).statusCode, 200, 'enabling again changes nothing');

  await createPlant(t, app, '{"id":2,"name":"Ivy"}');
  const second = await once.nth(2);
  t.match(second.body, /"name":"Ivy"/, 'the next event is delivered');
  t.ok(verifies(secret, second.body, second.headers), 'signed with the same secret');
  const list = await deliveriesUntil(t, app, id, (all) => all.length === 2 && all[0]!.status === 'delivered', 'the new delivery is delivered');
  t.equal(list[1]!.status, 'failed', 'the delivery that failed stays failed');
  t.equal(once.requests.length, 2, 'and is not sent again');

  const unknown = await api(t, app, { method: 'POST', url: '/webhooks/987654321/enable', headers: AUTH });
  t.equal(unknown.statusCode, 404, 'an unknown subscription: 404');
  t.match(unknown.json(), { error: 404, message: 'There is no webhook subscription with id 987654321.' });
});

t.test('a rotated secret signs at once, with the previous one signing alongside during the overlap', async (t) => {
  const hook = await receiver(t);
  const { app } = await build(t, PRIVATE_OK);
  await app.ready();
  const { id, secret: old } = await subscribe(t, app, hook.url);
  const before = Date.now();
  const rotated = await api(t, app, { method: 'POST', url: `/webhooks/${id}/rotate-secret`, headers: AUTH });
  t.equal(rotated.statusCode, 200, 'POST /webhooks/{id}/rotate-secret: 200');
  const body = rotated.json() as WebhookBody & { secret: string; previousSecretExpiresAt: string };
  t.match(body, { id, url: hook.url, enabled: true, secret: SECRET });
  t.not(body.secret, old, 'a new secret');
  const overlap = Date.parse(body.previousSecretExpiresAt) - before;
  t.ok(overlap >= 24 * 3_600_000 - 60_000 && overlap <= 24 * 3_600_000 + 60_000, `the previous secret signs for 24 hours (until ${body.previousSecretExpiresAt})`);
  const [listed] = await listWebhooks(t, app);
  t.equal(listed!.previousSecretExpiresAt, body.previousSecretExpiresAt, 'the listing shows the end of the overlap');
  t.notOk('secret' in listed!, 'and no secret');

  await createPlant(t, app, '{"id":1,"name":"Fern"}');
  const delivery = await hook.nth(1);
  const signatures = String(delivery.headers['webhook-signature']).split(' ');
  t.equal(signatures.length, 2, `two signatures: ${delivery.headers['webhook-signature']}`);
  t.ok(verifies(body.secret, delivery.body, delivery.headers), 'the new secret verifies the delivery');
  t.ok(verifies(old, delivery.body, delivery.headers), 'and so does the previous one, during the overlap');
  t.notOk(verifies(`whsec_${randomBytes(32).toString('base64')}`, delivery.body, delivery.headers), 'another secret does not');

  const again = (await api(t, app, { method: 'POST', url: `/webhooks/${id}/rotate-secret`, headers: AUTH })).json() as { secret: string };
  await createPlant(t, app, '{"id":2,"name":"Ivy"}');
  const next = await hook.nth(2);
  t.ok(verifies(again.secret, next.body, next.headers) && verifies(body.secret, next.body, next.headers), 'rotating again: the newest and the one it replaced sign');
  t.notOk(verifies(old, next.body, next.headers), 'the oldest no longer does');

  const unknown = await api(t, app, { method: 'POST', url: '/webhooks/987654321/rotate-secret', headers: AUTH });
  t.equal(unknown.statusCode, 404, 'an unknown subscription: 404');
});

t.test('a redirect is not followed: the attempt fails and is retried', async (t) => {
  const elsewhere = await receiver(t);
  const redirecting = await receiver(t, [], { status: 302, headers: { location: elsewhere.url } });
  const { app } = await build(t, { webhooks: { allowPrivateNetworks: true, retryScheduleMs: [50] } });
  await app.ready();
  const { id } = await subscribe(t, app, redirecting.url);
  await createPlant(t, app, '{"id":1,"name":"Fern"}');
  await redirecting.nth(1);
  const [delivery] = await deliveriesUntil(t, app, id, (list) => list[0]?.status !== 'pending', 'the delivery is settled');
  t.match(delivery, { status: 'failed', attempts: 2n, lastResponseStatus: 302n, lastError: /redirects are not followed/ });
  t.match(delivery!.lastError, elsewhere.url, 'the error names where the redirect pointed');
  t.equal(redirecting.requests.length, 2, 'the redirect counted as a failed attempt and was retried');
  t.equal(redirecting.requests[0]!.headers['webhook-id'], redirecting.requests[1]!.headers['webhook-id']);
  t.equal(elsewhere.requests.length, 0, 'the redirect target received nothing');
});

t.test('a receiver that never answers is cut off by the timeout and retried', async (t) => {
  const silent = await receiver(t, [], 'hang');
  const { app } = await build(t, { webhooks: { allowPrivateNetworks: true, retryScheduleMs: [50], timeoutMs: 300 } });
  await app.ready();
  const { id } = await subscribe(t, app, silent.url);
  await createPlant(t, app, '{"id":1,"name":"Fern"}');
  const [first, second] = [await silent.nth(1), await silent.nth(2)];
  t.equal(second.headers['webhook-id'], first.headers['webhook-id'], 'the retry carries the same webhook-id');
  const gap = second.at - first.at;
  t.ok(gap >= 250 && gap < 2_000, `the first attempt was cut off by the 300 ms timeout: the retry came ${gap} ms later`);
  // The second attempt is hanging now; the first one's outcome is on record.
  const [pending] = await deliveries(t, app, id);
  t.match(pending, { status: 'pending', attempts: 1n, lastError: /could not deliver/ }, `after the first attempt: ${pending?.lastError}`);
  t.notOk('lastResponseStatus' in pending!, 'no status: the receiver never answered');
  const delivery = await onlyDelivery(t, app, id, 'failed');
  t.match(delivery, { attempts: 2n, lastError: /^could not deliver: .*timeout/i });
  t.equal(silent.requests.length, 2);
});

// ---------------------------------------------------------------------------------------------
// Where deliveries may go

t.test('POST /webhooks refuses targets on loopback, private, link-local or unresolvable hosts', async (t) => {
  const { app } = await build(t); // allowPrivateNetworks: false, the default
  const refused = [
    'http://127.0.0.1:9/x',
    'http://localhost:9/x',
    'http://10.0.0.1/x',
    'http://169.254.169.254/latest/meta-data',
    'http://[::1]:9/x',
    'http://[::ffff:127.0.0.1]:9/x',
    'http://192.168.1.10/x',
    'http://172.16.0.1/x',
    'http://100.64.0.1/x',
    'http://[fd00::1]/x',
    'http://0.0.0.0/x',
  ];
  for (const url of refused) {
    const response = await api(t, app, { method: 'POST', url: '/webhooks', headers: { ...AUTH, ...JSON_TYPE }, payload: JSON.stringify({ url }) });
    t.equal(response.statusCode, 400, url);
    // Which address, never: that would make the endpoint a lookup service for internal names.
    t.equal(JSON.parse(response.body).message, 'The request body field "url" resolves to a loopback, private, link-local or reserved address.', url);
  }
  const nowhere = 'http://no-such-host.invalid/x';
  const unresolved = await api(t, app, { method: 'POST', url: '/webhooks', headers: { ...AUTH, ...JSON_TYPE }, payload: JSON.stringify({ url: nowhere }) });
  t.equal(unresolved.statusCode, 400, nowhere);
  t.match(JSON.parse(unresolved.body).message, /"url" has a host name that does not resolve \(no-such-host\.invalid\)/);
  t.same(await listWebhooks(t, app), [], 'nothing was subscribed');

  const publicTarget = await api(t, app, { method: 'POST', url: '/webhooks', headers: { ...AUTH, ...JSON_TYPE }, payload: '{"url":"http://8.8.8.8/x"}' });
  t.equal(publicTarget.statusCode, 201, 'a public address is accepted');
});

t.test('an IPv6 address that embeds an IPv4 address is judged by the IPv4 address', async (t) => {
  const { app } = await build(t);
  // Each embeds a loopback, private or link-local IPv4 address; every IPv6 literal is one the URL
  // parser keeps or rewrites (http://[::127.0.0.1]/ becomes http://[::7f00:1]/).
  const refused = {
    'IPv4-compatible ::127.0.0.1': 'http://[::127.0.0.1]/x',
    'IPv4-compatible ::7f00:1': 'http://[::7f00:1]/x',
    'IPv4-compatible ::a9fe:a9fe (metadata)': 'http://[::a9fe:a9fe]/x',
    'IPv4-mapped ::ffff:10.0.0.1': 'http://[::ffff:10.0.0.1]/x',
    'IPv4-translated ::ffff:0:127.0.0.1': 'http://[::ffff:0:127.0.0.1]/x',
    'NAT64 64:ff9b::127.0.0.1': 'http://[64:ff9b::127.0.0.1]/x',
    'NAT64 64:ff9b::169.254.169.254': 'http://[64:ff9b::a9fe:a9fe]/x',
    'local NAT64 64:ff9b:1::/96 with 10.0.0.1': 'http://[64:ff9b:1::a00:1]/x',
    'local NAT64 64:ff9b:1::/48 with 192.168.0.1': 'http://[64:ff9b:1:c0a8:0:100::]/x',
    '6to4 2002:7f00:1::': 'http://[2002:7f00:1::1]/x',
    '6to4 2002:c0a8:101::': 'http://[2002:c0a8:101::1]/x',
    'Teredo, client 127.0.0.1': 'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/x',
    'Teredo, server 10.0.0.1': 'http://[2001:0:a00:1:8000:63bf:f7f7:f7f7]/x',
  };
  for (const [name, url] of Object.entries(refused)) {
    t.notOk(isPublicAddress(new URL(url).hostname.slice(1, -1)), `${name} is not public`);
    const response = await api(t, app, { method: 'POST', url: '/webhooks', headers: { ...AUTH, ...JSON_TYPE }, payload: JSON.stringify({ url }) });
    t.equal(response.statusCode, 400, `${name}: ${url} is refused`);
  }
  // Judged by what they embed, the same forms with a public IPv4 address (8.8.8.8) are public.
  for (const address of ['::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '2001:0:808:808:8000:63bf:f7f7:f7f7', '2606:4700::1111']) {
    t.ok(isPublicAddress(address), `${address} is public`);
  }
  const nat64 = await api(t, app, { method: 'POST', url: '/webhooks', headers: { ...AUTH, ...JSON_TYPE }, payload: '{"url":"http://[64:ff9b::808:808]/x"}' });
  t.equal(nat64.statusCode, 201, 'NAT64 of a public address is accepted');
});

t.test('at delivery, an IPv4-compatible IPv6 literal is judged by its IPv4 address: refused, nothing sent', async (t) => {
  const hook = await receiver(t);
  const first = await build(t, PRIVATE_OK);
  await first.app.ready();
  const compatible = await subscribe(t, first.app, `http://[::127.0.0.1]:${hook.port}/hook`);
  await first.app.close();

  const { app } = await build(t, { webhooks: { retryScheduleMs: [] } }, { store: first.store });
  await app.ready();
  await createPlant(t, app, '{"id":1,"name":"Fern"}');
  const delivery = await onlyDelivery(t, app, compatible.id, 'failed');
  t.match(delivery, { attempts: 1n, lastError: /^refused: ::7f00:1 is a loopback, private, link-local or reserved address$/ });
  t.equal(hook.requests.length, 0, 'the receiver got nothing');
});

t.test('the target is checked again at delivery: a private one is refused, nothing is sent', async (t) => {
  const hook = await receiver(t);
  const first = await build(t, PRIVATE_OK);
  await first.app.ready();
  const literal = await subscribe(t, first.app, hook.url);
  const named = await subscribe(t, first.app, `http://localhost:${hook.port}/hook`);
  await first.app.close(); // only the second instance's dispatcher runs from here on

  const { app } = await build(t, { webhooks: { retryScheduleMs: [] } }, { store: first.store });
  await app.ready();
  await createPlant(t, app, '{"id":1,"name":"Fern"}');
  const byLiteral = await onlyDelivery(t, app, literal.id, 'failed');
  t.match(byLiteral, { attempts: 1n, lastError: /^refused: 127\.0\.0\.1 is a loopback, private, link-local or reserved address$/ });
  t.notOk('lastResponseStatus' in byLiteral);
  const byName = await onlyDelivery(t, app, named.id, 'failed');
  t.match(byName, { attempts: 1n, lastError: /localhost resolves to a loopback, private, link-local or reserved address, which webhooks may not reach/ }, `named host: ${byName.lastError}`);
  t.equal(hook.requests.length, 0, 'the receiver got nothing');
});

// ---------------------------------------------------------------------------------------------
// Retention

t.test('delivered deliveries are pruned after WEBHOOK_RETENTION', async (t) => {
  const answer = Promise.withResolvers<void>();
  const hook = await receiver(t, [{ status: 200, when: answer.promise }]);
  const { app } = await build(t, { webhooks: { allowPrivateNetworks: true, retentionMs: 0 } });
  await app.ready();
  const { id } = await subscribe(t, app, hook.url);
  await createPlant(t, app, '{"id":1,"name":"Fern"}');
  await hook.nth(1);
  t.match(await deliveries(t, app, id), [{ status: 'pending', attempts: 0n }], 'the delivery is listed while its attempt is under way');
  answer.resolve(); // the receiver answers 200 now
  t.same(await deliveriesUntil(t, app, id, (list) => list.length === 0, 'the delivered row is pruned'), [], 'gone once delivered');
  t.equal(hook.requests.length, 1);
});
