// Hostile input, one test per class: what test/harness/fuzz.ts generates at random, pinned down here as
// named regressions: each class of input that once got a wrong answer keeps a test named after it.
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance, InjectOptions } from 'fastify';
import t, { type Test } from 'tap';
import { parseJson } from '../../src/contract/json.ts';
import type { PlantStore } from '../../src/store/types.ts';
import { contractProblems } from '../harness/contract.ts';
import { AUTH, build, createPlant } from '../harness/helper.ts';

const JSON_HEADERS = { ...AUTH, 'content-type': 'application/json' };

type Answer = { statusCode: number; headers: Record<string, unknown>; body: string };

/** Injects, and checks what holds for every answer: documented when the route is an operation, no 5xx, the Error body on failures. */
async function send(t: Test, app: FastifyInstance, options: InjectOptions & { url: string }): Promise<Answer & { json: () => unknown }> {
  const response = await app.inject(options);
  const method = options.method ?? 'GET';
  const label = `${method} ${options.url.slice(0, 80)}`;
  t.ok(response.statusCode < 500, `${label}: no 5xx (${response.statusCode})`);
  if (response.statusCode >= 400 && method !== 'HEAD') errorBody(t, response, label);
  return { statusCode: response.statusCode, headers: response.headers, body: response.body, json: () => parseJson(response.body) };
}

/** The published Error shape: exactly {error: <the status>, message}, as application/json. */
function errorBody(t: Test, response: Answer, label: string): void {
  t.match(String(response.headers['content-type']), /^application\/json/, `${label}: an application/json Error`);
  const body = JSON.parse(response.body) as Record<string, unknown>;
  t.same(Object.keys(body).sort(), ['error', 'message'], `${label}: exactly error and message`);
  t.equal(body.error, response.statusCode, `${label}: error is the status`);
}

function documented(t: Test, method: string, url: string, response: Answer): void {
  t.same(contractProblems(method, url, response), [], `${method} ${url.slice(0, 80)} ${response.statusCode} matches openapi.yaml`);
}

const post = (t: Test, app: FastifyInstance, payload: string | Buffer, url = '/plants', headers: Record<string, string> = JSON_HEADERS) =>
  send(t, app, { method: 'POST', url, headers, payload });

async function storedPlants(store: PlantStore): Promise<{ id: string; name: string; tag?: string }[]> {
  return (await store.plants.listPlants({ limit: 10_000 })).map((plant) => ({ ...plant, id: String(plant.id) }));
}

// -------------------------------------------------------------------------------------------------
// Classes that hold

t.test('duplicate JSON keys: refused with 400 naming the key, whatever the values, on every body', async (t) => {
  const { app, store } = await build(t);
  // A filter in front may read the first value where JSON.parse keeps the last: no body gets that far.
  for (const [body, key] of [
    ['{"id":1,"name":"ok","name":""}', 'name'],
    ['{"id":1,"name":"x","tag":"a","tag":null}', 'tag'],
    ['{"id":1,"id":1.5,"name":"x"}', 'id'],
    ['{"id":1,"name":"x","id":"1"}', 'id'],
    ['{"id":"x","id":1,"name":"","name":"kept","tag":5,"tag":"t"}', 'id'],
    ['{"id":2,"id":3,"name":"three"}', 'id'],
  ] as const) {
    const response = await post(t, app, body);
    t.equal(response.statusCode, 400, body);
    t.match(response.json(), { message: `key "${key}" more than once` }, `${body}: names "${key}"`);
  }
  t.same(await storedPlants(store), [], 'nothing stored');

  t.equal((await post(t, app, '{"id":3,"name":"three"}')).statusCode, 200);
  const put = await send(t, app, { method: 'PUT', url: '/plants/3', headers: JSON_HEADERS, payload: '{"name":"changed","name":5}' });
  t.equal(put.statusCode, 400);
  t.same((await store.plants.getPlant(3n))?.plant, { id: 3n, name: 'three' }, 'a refused replace changes nothing');
  const hook = await post(t, app, '{"url":"https://example.com/","url":5}', '/webhooks');
  t.equal(hook.statusCode, 400);
  t.match(hook.json(), { message: /key "url" more than once/ });
});

t.test('NUL characters: refused in names, tags and the tag filter, as PostgreSQL must; refused where JSON forbids them', async (t) => {
  const { app, store } = await build(t);
  for (const body of ['{"id":1,"name":"a\\u0000b","tag":"x"}', '{"id":1,"name":"x","tag":"\\u0000"}', `{"id":2,"name":"${'\\u0000'.repeat(256)}"}`]) {
    const refused = await post(t, app, body);
    t.equal(refused.statusCode, 400, body);
    t.match(refused.json(), { message: /field "(name|tag)" must not contain the NUL character/ }, body);
  }
  t.equal((await post(t, app, '{"id":1,"name":"a\\u0001b","tag":"\\u001f"}')).statusCode, 200, 'other control characters are kept');
  t.same((await store.plants.getPlant(1n))?.plant, { id: 1n, name: 'a\u0001b', tag: '\u001f' }, 'stored byte for byte');
  t.equal((await post(t, app, `{"id":2,"name":"${'\\u0001'.repeat(256)}"}`)).statusCode, 200, '256 of them are a 256-character name');
  for (const url of ['/plants?tag=%00', '/plants?tag=%00x']) {
    const byTag = await send(t, app, { method: 'GET', url, headers: AUTH });
    documented(t, 'GET', url, byTag);
    t.equal(byTag.statusCode, 400, `${url}: a tag no store can hold`);
  }

  for (const [body, message] of [
    ['{"id":3,"name":"a\u0000b"}', /not valid JSON/],
    ['{"id":3,"name":"x"}\u0000', /not valid JSON/],
    ['\u0000', /not valid JSON/],
    ['{"id":3,"name":"x","id\\u0000":3}', 'unknown field "id\u0000"'],
  ] as const) {
    const response = await post(t, app, body);
    t.equal(response.statusCode, 400, JSON.stringify(body));
    t.match(response.json(), { message }, JSON.stringify(body));
  }
  for (const url of ['/plants/%00', '/plants/1%00', '/plants?limit=%00']) {
    const response = await send(t, app, { method: 'GET', url, headers: AUTH });
    documented(t, 'GET', url, response);
    t.equal(response.statusCode, 400, url);
  }
  t.same((await storedPlants(store)).map((plant) => plant.id), ['1', '2'], 'no refused write was stored');
});

t.test('invalid UTF-8 in URLs, keys and between tokens is 400, never a 5xx', async (t) => {
  const { app, store } = await build(t);
  for (const url of ['/plants/%FF', '/plants/%C0%80', '/plants/%ED%A0%80', '/webhooks/%FE/deliveries']) {
    const response = await send(t, app, { method: 'GET', url, headers: AUTH });
    documented(t, 'GET', url, response);
    t.equal(response.statusCode, 400, url);
  }
  const query = await send(t, app, { method: 'GET', url: '/plants?tag=%FF%FE', headers: AUTH });
  documented(t, 'GET', '/plants?tag=%FF%FE', query);
  t.equal(query.statusCode, 400, 'an undecodable query parameter too, as in the path');
  for (const [where, bytes] of [
    ['between tokens', Buffer.from([0x7b, 0xff, 0x22, 0x69, 0x64, 0x22, 0x3a, 0x31, 0x7d])],
    ['in a key', Buffer.concat([Buffer.from('{"id":1,"name":"x","'), Buffer.from([0xc0, 0xaf]), Buffer.from('":1}')])],
    ['as the whole body', Buffer.from([0xff, 0xfe, 0xfd])],
  ] as const) {
    const response = await post(t, app, bytes);
    t.equal(response.statusCode, 400, where);
  }
  t.same(await storedPlants(store), []);
});

t.test('deep nesting: 10,000 nested arrays or objects answer 400, and the service keeps answering', async (t) => {
  const { app, store } = await build(t);
  const bodies: [string, string][] = [
    ['10k nested arrays', `${'['.repeat(10_000)}${']'.repeat(10_000)}`],
    ['32k nested arrays (64 KiB)', `${'['.repeat(32_000)}${']'.repeat(32_000)}`],
    ['10k nested objects', `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`],
    ['10k nested arrays as the tag', `{"id":1,"name":"x","tag":${'['.repeat(10_000)}${']'.repeat(10_000)}}`],
    ['10k nested objects in an unknown field', `{"id":1,"name":"x","deep":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}`],
    ['30k unbalanced brackets', '['.repeat(30_000)],
    ['100 nested arrays as the tag', `{"id":1,"name":"x","tag":${'['.repeat(100)}${']'.repeat(100)}}`],
  ];
  for (const [label, body] of bodies) {
    for (const [method, url] of [['POST', '/plants'], ['PUT', '/plants/1'], ['POST', '/webhooks']] as const) {
      const response = await send(t, app, { method, url, headers: JSON_HEADERS, payload: body });
      documented(t, method, url, response);
      t.equal(response.statusCode, 400, `${label}: ${method} ${url}`);
    }
  }
  t.same(await storedPlants(store), [], 'nothing stored');
  t.equal((await createPlant(t, app, '{"id":1,"name":"after"}')).statusCode, 200, 'the service still works');
});

t.test('huge numbers: ids beyond int64, huge exponents and 60,000-digit literals are 400 naming the field', async (t) => {
  const { app, store } = await build(t);
  const big = `9${'0'.repeat(59_999)}`;
  const cases: [string, RegExp][] = [
    [`{"id":1${'0'.repeat(400)},"name":"x"}`, /field "id" must be <= 9223372036854775807/],
    [`{"id":-1${'0'.repeat(400)},"name":"x"}`, /field "id" must be >= -9223372036854775808/],
    [`{"id":${big},"name":"x"}`, /field "id" must be <= 9223372036854775807/],
    ['{"id":1e999999999,"name":"x"}', /field "id" must be an integer written without fraction or exponent/],
    ['{"id":-1e309,"name":"x"}', /field "id" must be an integer written without fraction or exponent/],
    ['{"id":1e-400,"name":"x"}', /field "id" must be an integer written without fraction or exponent/],
    [`{"id":0.${'0'.repeat(5_000)}1,"name":"x"}`, /field "id" must be an integer written without fraction or exponent/],
    ['{"id":9223372036854775807.0,"name":"x"}', /field "id" must be an integer written without fraction or exponent/],
    ['{"id":1,"name":123456789012345678901234567890}', /field "name" must be string/],
    [big, /request body must be object/],
  ];
  for (const [body, message] of cases) {
    const started = performance.now();
    const response = await post(t, app, body);
    t.equal(response.statusCode, 400, body.slice(0, 60));
    t.match(response.json(), { message }, body.slice(0, 60));
    t.ok(performance.now() - started < 2_000, `${body.slice(0, 30)}: answered in ${Math.round(performance.now() - started)} ms`);
  }
  const urls = [
    '/plants?limit=99999999999999999999',
    '/plants?limit=1e2',
    '/plants?limit=-9223372036854775809',
    `/plants/${'9'.repeat(100)}`,
    '/plants/9223372036854775808',
    '/webhooks/99999999999999999999/deliveries',
    '/webhooks/1/deliveries?limit=2147483648',
  ];
  for (const url of urls) {
    const response = await send(t, app, { method: 'GET', url, headers: AUTH });
    documented(t, 'GET', url, response);
    t.equal(response.statusCode, 400, url);
  }
  t.same(await storedPlants(store), []);
});

t.test('prototype poisoning: __proto__ and constructor.prototype are 400 anywhere in any body, and nothing is polluted', async (t) => {
  const { app, store } = await build(t);
  await createPlant(t, app, '{"id":1,"name":"original"}');
  const forbidden = [
    '{"id":2,"name":"x","__proto__":{"polluted":true}}',
    '{"__proto__":{"polluted":true},"id":2,"name":"x"}',
    '{"id":2,"name":"x","\\u005f_proto__":{"polluted":true}}',
    '{"id":2,"name":"x","tag":[{"__proto__":{"polluted":true}}]}',
    '{"id":2,"name":"x","constructor":{"prototype":{"polluted":true}}}',
    '{"id":2,"name":"x","\\u0063onstructor":{"\\u0070rototype":{"polluted":true}}}',
    '{"id":2,"name":"x","deep":{"a":[{"b":{"constructor":{"prototype":{"polluted":true}}}}]}}',
  ];
  for (const body of forbidden) {
    for (const [method, url] of [['POST', '/plants'], ['PUT', '/plants/1'], ['POST', '/webhooks']] as const) {
      const response = await send(t, app, { method, url, headers: JSON_HEADERS, payload: body });
      documented(t, method, url, response);
      t.equal(response.statusCode, 400, `${method} ${url} ${body}`);
      t.match(response.json(), { message: /forbidden "__proto__" or "constructor.prototype" key/ });
    }
  }
  for (const [body, message] of [
    ['{"id":2,"name":"x","constructor":1}', /unknown field "constructor"/],
    ['{"id":2,"name":"x","prototype":{}}', /unknown field "prototype"/],
  ] as const) {
    const response = await post(t, app, body);
    t.equal(response.statusCode, 400, body);
    t.match(response.json(), { message }, body);
  }
  const taggedProto = await post(t, app, '{"id":3,"name":"__proto__","tag":"constructor"}');
  t.equal(taggedProto.statusCode, 200, 'the words as values are just text');
  for (const url of ['/plants?__proto__=x', '/plants?__proto__[polluted]=1', '/plants?constructor[prototype][polluted]=1', '/plants?hasOwnProperty=1']) {
    const response = await send(t, app, { method: 'GET', url, headers: AUTH });
    documented(t, 'GET', url, response);
    t.equal(response.statusCode, 200, `${url}: unknown query parameters are ignored`);
  }
  t.same(await storedPlants(store), [{ id: '1', name: 'original' }, { id: '3', name: '__proto__', tag: 'constructor' }]);
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype is untouched');
  t.notOk(Object.hasOwn(Object.prototype, 'polluted'));
});

t.test('lone surrogates: refused in every body field, key and nested value; never stored', async (t) => {
  const { app, store } = await build(t);
  await createPlant(t, app, '{"id":1,"name":"original"}');
  const bodies: [string, string, string][] = [
    ['POST', '/plants', '{"id":2,"name":"\\ud800"}'],
    ['POST', '/plants', '{"id":2,"name":"x","tag":"\\udfff"}'],
    ['POST', '/plants', '{"id":2,"name":"\\udc00\\ud800"}'],
    ['POST', '/plants', '{"id":2,"name":"x","\\ud800":1}'],
    ['POST', '/plants', '{"id":2,"name":"x","extra":["\\udbff"]}'],
    ['PUT', '/plants/1', '{"name":"\\ud83c"}'],
    ['PUT', '/plants/1', '{"name":"x","tag":"a\\udf35"}'],
    ['POST', '/webhooks', '{"url":"https://\\ud800.example/"}'],
    ['POST', '/webhooks', '{"url":"https://example.com/","events":["\\ud800"]}'],
  ];
  for (const [method, url, body] of bodies) {
    const response = await send(t, app, { method, url, headers: JSON_HEADERS, payload: body });
    documented(t, method, url, response);
    t.equal(response.statusCode, 400, `${method} ${url} ${body}`);
    t.match(response.json(), { message: /lone surrogate/ }, body);
  }
  // Surrogates in a URL are percent-encoded UTF-8, which cannot encode them: a malformed URL.
  const path = await send(t, app, { method: 'GET', url: '/plants/%ED%A0%80', headers: AUTH });
  t.equal(path.statusCode, 400);
  t.same(await storedPlants(store), [{ id: '1', name: 'original' }], 'nothing stored, nothing replaced');
});

t.test('dot segments and encoded paths over a real socket: 400 or 404, never another route', async (t) => {
  // app.inject resolves dot segments like a browser; a raw client need not, so this uses a socket.
  const { app } = await build(t);
  await createPlant(t, app, '{"id":1,"name":"one"}');
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const cases: [string, number][] = [
    ['/plants/..', 400],
    ['/plants/.', 400],
    ['/plants/%2e%2e', 400],
    ['/plants/1%2F..', 400],
    ['/plants/../healthz', 404],
    ['/plants/%2e%2e/healthz', 404],
    ['/plants/1/../1', 404],
    ['/plants/./1', 404],
    ['/plants//1', 404],
    ['/plants%2F1', 404],
    ['/%70lants/%31', 200], // percent-encoded unreserved characters are the same URL (RFC 3986 §6.2.2.2)
  ];
  for (const [path, status] of cases) {
    const response = await rawGet(port, path);
    t.equal(response.statusCode, status, path);
    // contract.ts resolves dot segments too, so it is told the operation by its template.
    if (status !== 404) documented(t, 'GET', '/plants/{id}', response);
    else errorBody(t, response, path);
  }
  for (const path of ['/docs/static/../../package.json', '/docs/static/%2e%2e/%2e%2e/package.json', '/docs/static/..%2f..%2fpackage.json']) {
    const response = await rawGet(port, path);
    t.equal(response.statusCode, 404, `${path}: no such document`);
    errorBody(t, response, path);
    t.notMatch(response.body, /"devDependencies"/, `${path}: no file outside the docs`);
  }
});

function rawGet(port: number, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = request({ host: '127.0.0.1', port, path, headers: AUTH }, (incoming) => {
      let body = '';
      incoming.setEncoding('utf8');
      incoming.on('data', (chunk: string) => (body += chunk));
      incoming.on('end', () => resolve({ statusCode: incoming.statusCode!, headers: incoming.headers, body }));
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}

// -------------------------------------------------------------------------------------------------
// Classes the fuzzer found failing: each describes the answer the service should give.

t.test(
  'a path segment over 100 characters: a documented 400, not an undocumented 414',
  {
  },
  async (t) => {
    const { app } = await build(t);
    const long = '1'.repeat(101);
    for (const [method, url] of [
      ['GET', `/plants/${long}`],
      ['PUT', `/plants/${long}`],
      ['DELETE', `/plants/${long}`],
      ['DELETE', `/webhooks/${long}`],
      ['GET', `/webhooks/${long}/deliveries`],
    ] as const) {
      const response = await send(t, app, { method, url, headers: JSON_HEADERS, ...(method === 'PUT' && { payload: '{"name":"x"}' }) });
      documented(t, method, url, response);
      t.equal(response.statusCode, 400, `${method} ${url.slice(0, 30)}…`);
    }
  },
);

t.test(
  'an unknown route answers 404 even when it carries a body it cannot parse',
  {
  },
  async (t) => {
    const { app } = await build(t);
    const cases: [string, string, Record<string, string>, string][] = [
      ['POST', '/nothing', JSON_HEADERS, '{'],
      ['PATCH', '/plants/1', { ...AUTH, 'content-type': 'text/plain' }, 'x'],
      ['OPTIONS', '/plants', JSON_HEADERS, `{"tag":"${'t'.repeat(70_000)}"}`],
      ['PUT', '/healthz', JSON_HEADERS, '{"__proto__":{}}'],
      ['DELETE', '/plants', JSON_HEADERS, '{"id":1,'],
      ['POST', '/plants/1', { ...AUTH, 'content-type': 'application/xml' }, '<plant/>'],
    ];
    for (const [method, url, headers, payload] of cases) {
      const response = await send(t, app, { method: method as InjectOptions['method'], url, headers, payload });
      t.equal(response.statusCode, 404, `${method} ${url}`);
      t.match(response.json(), { error: 404n, message: `There is no ${method} ${url} in this API.` });
    }
  },
);

t.test(
  'DELETE with a body that is not JSON or is over 64 KiB gets an answer its operation documents',
  {
  },
  async (t) => {
    const { app } = await build(t);
    await createPlant(t, app, '{"id":1,"name":"x"}');
    for (const url of ['/plants/1', '/webhooks/1']) {
      for (const [headers, payload] of [
        [{ ...AUTH, 'content-type': 'text/plain' }, 'please'],
        [JSON_HEADERS, `{"pad":"${'x'.repeat(70_000)}"}`],
      ] as const) {
        const response = await send(t, app, { method: 'DELETE', url, headers, payload });
        documented(t, 'DELETE', url, response);
      }
    }
  },
);

t.test(
  'GET /webhooks with malformed credentials gets an answer its operation documents',
  {
  },
  async (t) => {
    const { app } = await build(t);
    for (const options of [
      { url: '/webhooks', headers: { authorization: 'Bearer a b' } },
      { url: '/webhooks?access_token=x', headers: AUTH },
      { url: '/webhooks', headers: { authorization: [AUTH.authorization, AUTH.authorization] } },
    ] as { url: string; headers: Record<string, string | string[]> }[]) {
      const response = await send(t, app, { method: 'GET', ...options });
      t.equal(response.statusCode, 400, 'refused as invalid_request');
      documented(t, 'GET', options.url, response);
    }
  },
);

t.test(
  'a JSON syntax error inside a surrogate pair: the Error message stays valid Unicode',
  {
  },
  async (t) => {
    const { app } = await build(t);
    for (const body of ['🌵', '{"id":1,"name":"x"🌵}', '[𝄞]']) {
      const response = await post(t, app, body);
      t.equal(response.statusCode, 400, body);
      const message = (JSON.parse(response.body) as { message: string }).message;
      t.ok(message.isWellFormed(), `${JSON.stringify(message)} is valid Unicode (strict clients cannot read a lone surrogate)`);
      if (message.isWellFormed()) documented(t, 'POST', '/plants', response); // contract.ts's parser refuses lone surrogates
    }
  },
);

t.test(
  'deep nesting: the 400 says the body is nested too deeply, not "not valid JSON: Maximum call stack size exceeded"',
  {
  },
  async (t) => {
    const { app } = await build(t);
    for (const depth of [3_000, 10_000]) {
      const response = await post(t, app, `{"id":1,"name":"x","tag":${'['.repeat(depth)}${']'.repeat(depth)}}`);
      t.equal(response.statusCode, 400);
      const { message } = response.json() as { message: string };
      t.notMatch(message, /Maximum call stack|not valid JSON/, `depth ${depth}: ${message}`);
    }
  },
);

t.test(
  'invalid UTF-8 inside a string is 400, never stored as U+FFFD',
  {
  },
  async (t) => {
    const { app, store } = await build(t);
    const cases: [string, Buffer, Record<string, string>][] = [
      ['0xFF in a name', Buffer.concat([Buffer.from('{"id":1,"name":"ab'), Buffer.from([0xff]), Buffer.from('cd"}')]), JSON_HEADERS],
      ['an overlong NUL in a name', Buffer.concat([Buffer.from('{"id":2,"name":"a'), Buffer.from([0xc0, 0x80]), Buffer.from('"}')]), JSON_HEADERS],
      ['an encoded surrogate in a tag', Buffer.concat([Buffer.from('{"id":3,"name":"x","tag":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]), JSON_HEADERS],
      ['a truncated sequence in a name', Buffer.concat([Buffer.from('{"id":4,"name":"'), Buffer.from([0xe2, 0x82]), Buffer.from('"}')]), JSON_HEADERS],
      ['latin-1 labelled as such', Buffer.from('{"id":5,"name":"caf\xe9"}', 'latin1'), { ...AUTH, 'content-type': 'application/json; charset=iso-8859-1' }],
    ];
    for (const [label, payload, headers] of cases) {
      const response = await post(t, app, payload, '/plants', headers);
      documented(t, 'POST', '/plants', response);
      t.ok(response.statusCode === 400 || response.statusCode === 415, `${label}: refused (${response.statusCode} ${response.body})`);
    }
    await createPlant(t, app, '{"id":9,"name":"valid"}');
    const replaced = await send(t, app, { method: 'PUT', url: '/plants/9', headers: JSON_HEADERS, payload: Buffer.concat([Buffer.from('{"name":"x'), Buffer.from([0xfe]), Buffer.from('"}')]) });
    t.equal(replaced.statusCode, 400, 'PUT: refused');
    t.same(await storedPlants(store), [{ id: '9', name: 'valid' }], 'nothing stored with U+FFFD in it');
  },
);
