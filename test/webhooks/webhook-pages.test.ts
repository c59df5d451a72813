// GET /webhooks pages as GET /plants does, and POST /webhooks stores at most WEBHOOK_SUBSCRIPTIONS_MAX
// subscriptions, also when requests race at the limit on several instances sharing the database.
// Runs on the driver build() opens: SQLite here, PostgreSQL again from test/http-postgres.test.ts.
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import t, { type Test } from 'tap';
import { openStore } from '../../src/store/factory.ts';
import { isErrorBody } from '../harness/contract.ts';
import { api, AUTH, build, TEST_DRIVER, type TestConfig } from '../harness/helper.ts';
import { freshSchemaUrl } from '../harness/postgres.ts';

interface Listed {
  id: bigint;
  url: string;
}

/** No DNS: targets on loopback are allowed, and nothing is ever delivered to them. */
function config(subscriptionsMax?: number): TestConfig {
  return { webhooks: { allowPrivateNetworks: true, ...(subscriptionsMax !== undefined && { subscriptionsMax }) } };
}

function subscribe(t: Test, app: FastifyInstance, label: string | number) {
  return api(t, app, {
    method: 'POST',
    url: '/webhooks',
    headers: { ...AUTH, 'content-type': 'application/json' },
    payload: JSON.stringify({ url: `http://127.0.0.1:9/hooks/${label}`, events: ['plant.created'] }),
  });
}

async function subscribeAll(t: Test, app: FastifyInstance, count: number): Promise<void> {
  for (let i = 0; i < count; i++) t.equal((await subscribe(t, app, i)).statusCode, 201, `subscription ${i} created`);
}

/** The target of a `Link: <…>; rel="next"` header, or undefined without one. */
function nextOf(link: unknown): string | undefined {
  if (link === undefined) return undefined;
  return /^<([^>]+)>; rel="next"$/.exec(String(link))?.[1] ?? `unreadable Link: ${String(link)}`;
}

async function listed(t: Test, app: FastifyInstance, url: string): Promise<{ items: Listed[]; next: string | undefined }> {
  const response = await api(t, app, { method: 'GET', url, headers: AUTH });
  t.equal(response.statusCode, 200, `GET ${url}`);
  return { items: response.json() as Listed[], next: nextOf(response.headers.link) };
}

t.test('GET /webhooks answers pages of limit, in id order, linked by rel="next" until the last', async (t) => {
  const { app } = await build(t, config());
  await subscribeAll(t, app, 5);
  const pages: bigint[][] = [];
  let url: string | undefined = '/webhooks?limit=2';
  while (url !== undefined) {
    const page = await listed(t, app, url);
    pages.push(page.items.map((webhook) => webhook.id));
    if (page.next !== undefined) t.match(page.next, /^\/webhooks\?limit=2&cursor=[A-Za-z0-9_-]+$/, 'the next page keeps the limit');
    url = page.next;
  }
  t.same(pages.map((page) => page.length), [2, 2, 1], 'two, two, then the last one, which links nothing');
  const ids = pages.flat();
  t.same(ids, [...ids].sort((a, b) => (a < b ? -1 : 1)), 'ascending ids');
  t.equal(new Set(ids).size, 5, 'each subscription once');

  const whole = await listed(t, app, '/webhooks');
  t.same(whole.items.map((webhook) => webhook.id), ids, 'without limit or cursor, as before: every one of them');
  t.equal(whole.next, undefined, 'and no Link');
});

t.test('GET /webhooks without limit answers the first 100 and links the rest', async (t) => {
  const { app, store } = await build(t, config(150));
  // Through the store, for speed: the HTTP route to it is tested above.
  for (let i = 0; i < 101; i++) await store.webhooks.createSubscription({ url: `http://127.0.0.1:9/hooks/${i}`, events: ['plant.created'], secret: 'whsec_x' }, 150);
  const first = await listed(t, app, '/webhooks');
  t.equal(first.items.length, 100, 'a page of 100 by default');
  t.match(first.next, /^\/webhooks\?limit=100&cursor=/, 'and a next page');
  const second = await listed(t, app, first.next!);
  t.equal(second.items.length, 1, 'which holds the 101st');
  t.ok(second.items[0]!.id > first.items.at(-1)!.id, 'after the first page');
  t.equal(second.next, undefined, 'and is the last');
});

t.test('GET /webhooks refuses a bad limit or cursor with a 400 naming the parameter', async (t) => {
  const { app } = await build(t, config());
  for (const [query, message] of [
    ['limit=0', /"limit"/],
    ['limit=1001', /"limit"/],
    ['limit=ten', /"limit"/],
    ['cursor=abc', /"cursor" is not a cursor this API gave out/],
    [`cursor=${'x'.repeat(65)}`, /"cursor"/],
  ] as const) {
    const response = await api(t, app, { method: 'GET', url: `/webhooks?${query}`, headers: AUTH });
    isErrorBody(t, response as Parameters<typeof isErrorBody>[1], 400, query);
    t.match((response.json() as { message: string }).message, message, `${query}: names the parameter`);
  }
});

t.test('POST /webhooks past WEBHOOK_SUBSCRIPTIONS_MAX answers 409 naming the limit and the variable, and stores nothing', async (t) => {
  const { app } = await build(t, config(3));
  await subscribeAll(t, app, 3);
  const refused = await subscribe(t, app, 'one-too-many');
  isErrorBody(t, refused as Parameters<typeof isErrorBody>[1], 409, 'the fourth');
  const { message } = refused.json() as { message: string };
  t.match(message, /already holds 3 webhook subscriptions/, 'names the limit');
  t.match(message, /WEBHOOK_SUBSCRIPTIONS_MAX/, 'names the variable');
  const after = await listed(t, app, '/webhooks');
  t.equal(after.items.length, 3, 'nothing stored');
  t.notOk(after.items.some((webhook) => webhook.url.endsWith('one-too-many')), 'not the refused one');

  t.equal((await api(t, app, { method: 'DELETE', url: `/webhooks/${after.items[0]!.id}`, headers: AUTH })).statusCode, 204, 'one deleted');
  t.equal((await subscribe(t, app, 'in-its-place')).statusCode, 201, 'frees a place');
});

t.test('POSTs racing at the limit on two instances sharing the database store exactly the limit', async (t) => {
  // Two stores, each with its own connections, as two instances have.
  const url = TEST_DRIVER === 'postgres' ? await freshSchemaUrl() : `sqlite:${join(t.testdir(), 'plants.db')}`;
  const instances: FastifyInstance[] = [];
  for (let i = 0; i < 2; i++) instances.push((await build(t, config(10), { store: await openStore(url, { poolSize: 4 }) })).app);
  const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => subscribe(t, instances[i % 2]!, `racer-${i}`)));
  t.equal(answers.filter((answer) => answer.statusCode === 201).length, 10, 'ten created');
  t.equal(answers.filter((answer) => answer.statusCode === 409).length, 30, 'thirty refused for the limit');
  for (const instance of instances) t.equal((await listed(t, instance, '/webhooks?limit=1000')).items.length, 10, 'ten stored, seen by either instance');
});
