// Text the stores cannot hold alike, and query strings that do not decode: each is the documented 400
// naming the field, the same on SQLite and on PostgreSQL (test/http-postgres.test.ts runs this file
// there), never a 500 and never stored. Every answer is checked against openapi.yaml by api().
import t from 'tap';
import type { PlantStore } from '../../src/store/types.ts';
import { api, AUTH, build, createPlant, TEST_DRIVER } from '../harness/helper.ts';

const JSON_AUTH = { ...AUTH, 'content-type': 'application/json' };

async function storedPlants(store: PlantStore): Promise<string> {
  return JSON.stringify(await store.plants.listPlants({ limit: 100 }), (_key, value: unknown) => (typeof value === 'bigint' ? String(value) : value));
}

t.test(`${TEST_DRIVER}: a NUL (U+0000) in a name or tag is 400 naming the field, on create and on replace; nothing is stored`, async (t) => {
  const { app, store } = await build(t);
  t.equal((await createPlant(t, app, '{"id":1,"name":"kept","tag":"aroid"}')).statusCode, 200);
  const before = await storedPlants(store);
  const creates: [string, string][] = [
    ['{"id":2,"name":"a\\u0000b"}', 'name'],
    ['{"id":2,"name":"\\u0000"}', 'name'],
    ['{"id":2,"name":"fine","tag":"aroid\\u0000"}', 'tag'],
    ['{"id":1,"name":"kept","tag":"aroid\\u0000"}', 'tag'],
  ];
  for (const [body, field] of creates) {
    const response = await createPlant(t, app, body);
    t.equal(response.statusCode, 400, `POST ${body}`);
    t.strictSame(response.json(), { error: 400n, message: `The request body field "${field}" must not contain the NUL character (U+0000).` });
  }
  for (const [body, field] of [['{"name":"a\\u0000"}', 'name'], ['{"name":"kept","tag":"\\u0000aroid"}', 'tag']] as const) {
    const response = await api(t, app, { method: 'PUT', url: '/plants/1', headers: JSON_AUTH, payload: body });
    t.equal(response.statusCode, 400, `PUT ${body}`);
    t.strictSame(response.json(), { error: 400n, message: `The request body field "${field}" must not contain the NUL character (U+0000).` });
  }
  t.equal(await storedPlants(store), before, 'the store holds what it held');
  const hook = await api(t, app, { method: 'POST', url: '/webhooks', headers: JSON_AUTH, payload: '{"url":"https://hooks.example.com/\\u0000"}' });
  t.equal(hook.statusCode, 400, 'a webhook URL with a NUL is no URI: 400 too');
  t.match(hook.json(), { message: /field "url"/ });
  const other = await createPlant(t, app, '{"id":3,"name":"tab\\tand é 🌵","tag":"\\u0001"}');
  t.equal(other.statusCode, 200, 'other control characters and any other text are stored');
});

t.test(`${TEST_DRIVER}: a NUL in the tag filter is 400 naming the parameter, however it is written`, async (t) => {
  const { app } = await build(t);
  for (const url of ['/plants?tag=%00', '/plants?tag=aroid%00', '/plants?limit=5&tag=%00&cursor=x']) {
    const response = await api(t, app, { url, headers: AUTH });
    t.equal(response.statusCode, 400, url);
    t.strictSame(response.json(), { error: 400n, message: 'The query parameter "tag" must not contain the NUL character (U+0000).' });
  }
});

t.test(`${TEST_DRIVER}: a store refusing text (a caller past validation) answers 400 naming the field, not 500`, async (t) => {
  const inner = (await build(t)).store;
  // As a handler would that wrote text the contract never checked: the store's own rule must hold.
  const writeWithNul: PlantStore['plants']['createPlant'] = (plant) => inner.plants.createPlant({ ...plant, name: `${plant.name}\u0000` });
  const plants = new Proxy(inner.plants, {
    get: (target, key) => {
      if (key === 'createPlant') return writeWithNul;
      const value: unknown = Reflect.get(target, key);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const store: PlantStore = { plants, tokens: inner.tokens, webhooks: inner.webhooks, ping: () => inner.ping(), close: () => inner.close() };
  const { app, logs } = await build(t, { logLevel: 'info' }, { store });
  const response = await createPlant(t, app, '{"id":7,"name":"Monstera"}');
  t.equal(response.statusCode, 400);
  t.strictSame(response.json(), { error: 400n, message: 'The field "name" contains the NUL character (U+0000), which the store cannot hold.' });
  t.equal(await inner.plants.getPlant(7n), undefined, 'nothing was stored');
  t.notMatch(logs(), /request failed/, 'logged as refused, not as a failure');
});

t.test(`${TEST_DRIVER}: a malformed percent-encoding in any query parameter is 400 naming it, before authentication`, async (t) => {
  const { app } = await build(t, { webhooks: { allowPrivateNetworks: true } });
  const hook = await api(t, app, { method: 'POST', url: '/webhooks', headers: JSON_AUTH, payload: '{"url":"https://hooks.example.com/x"}' });
  t.equal(hook.statusCode, 201);
  const malformed: [string, string][] = [
    ['/plants?tag=%FF', 'tag'],
    ['/plants?tag=%', 'tag'],
    ['/plants?tag=abc%2', 'tag'],
    ['/plants?tag=%C3', 'tag'], // half of a two-byte UTF-8 sequence
    ['/plants?tag=%ED%A0%80', 'tag'], // a UTF-16 surrogate written as UTF-8
    ['/plants?limit=%ZZ', 'limit'],
    ['/plants?limit=10&cursor=%E0%A4', 'cursor'],
    ['/webhooks/1/deliveries?limit=%FF', 'limit'],
  ];
  for (const [url, parameter] of malformed) {
    const message = `The query parameter "${parameter}" is not valid: it contains a malformed percent-encoding.`;
    const response = await api(t, app, { url, headers: AUTH });
    t.equal(response.statusCode, 400, url);
    t.strictSame(response.json(), { error: 400n, message }, `${url}: names the parameter`);
    const anonymous = await api(t, app, { url });
    t.equal(anonymous.statusCode, 400, `${url} without a token: as for a malformed path`);
  }
  const name = await api(t, app, { url: '/plants?%FF=1', headers: AUTH });
  t.strictSame(name.json(), { error: 400n, message: 'A query parameter name is not valid: it contains a malformed percent-encoding.' });
  const health = await api(t, app, { url: '/healthz?probe=%' });
  t.equal(health.statusCode, 400, 'an operation without query parameters too');
  t.equal((await api(t, app, { url: '/no-such-path?tag=%FF', headers: AUTH })).statusCode, 404, 'an unknown path stays a 404');
});

t.test(`${TEST_DRIVER}: valid encodings still decode: %20, +, multi-byte UTF-8`, async (t) => {
  const { app } = await build(t);
  for (const [id, tag] of [[1, 'red leaf'], [2, 'café'], [3, '🌵'], [4, '100%']] as const) {
    t.equal((await createPlant(t, app, JSON.stringify({ id, name: `plant ${id}`, tag }))).statusCode, 200);
  }
  const cases: [string, number][] = [['red%20leaf', 1], ['red+leaf', 1], ['caf%C3%A9', 2], ['%F0%9F%8C%B5', 3], ['100%25', 4]];
  for (const [query, id] of cases) {
    const response = await api(t, app, { url: `/plants?limit=%31%30&tag=${query}`, headers: AUTH });
    t.equal(response.statusCode, 200, query);
    t.strictSame(
      (response.json() as { id: bigint }[]).map((plant) => plant.id),
      [BigInt(id)],
      `?tag=${query} finds plant ${id}`,
    );
  }
});
