// Every failure from every layer answers the published Error body with error = the HTTP status.
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { BODY_LIMIT } from '../../src/app.ts';
import { HttpError } from '../../src/contract/errors.ts';
import { parseJson } from '../../src/contract/json.ts';
import { AUTH, api, build, createPlant } from '../harness/helper.ts';
import { rawExchange } from '../harness/raw-http.ts';

t.test('malformed JSON bodies are 400 with a sentence saying why', async (t) => {
  const { app } = await build(t);
  const cases: [string, RegExp][] = [
    ['{"id":1,"name":', /not valid JSON/],
    ['{id:1}', /not valid JSON/],
    ['', /request body is empty/],
    ['   ', /request body is empty/],
    ['{"id":1,"name":"x","__proto__":{"admin":true}}', /forbidden "__proto__"/],
    ['{"id":1,"name":"x","constructor":{"prototype":{"admin":true}}}', /forbidden "__proto__" or "constructor.prototype"/],
  ];
  for (const [body, message] of cases) {
    const response = await createPlant(t, app, body);
    t.equal(response.statusCode, 400, JSON.stringify(body));
    t.equal(response.headers['content-type'], 'application/json; charset=utf-8');
    t.match(response.json(), { error: 400n, message }, `${JSON.stringify(body)}: ${message}`);
  }
  t.equal(({} as Record<string, unknown>).admin, undefined, 'no prototype was polluted');
});

t.test('a refusal is classified by what refused it, not by words in its text: invalid JSON that quotes "prototype" is invalid JSON', async (t) => {
  const { app } = await build(t);
  const response = await createPlant(t, app, '{"id":1,"name":prototype}');
  t.equal(response.statusCode, 400);
  const { message } = response.json() as { message: string };
  t.match(message, /^The request body is not valid JSON: /);
  t.notMatch(message, /forbidden/, 'no forbidden key was sent');
});

t.test('a body that begins with a byte order mark is read as the JSON after it (RFC 8259 lets a parser ignore it), as before', async (t) => {
  const { app } = await build(t);
  const response = await createPlant(t, app, '\uFEFF{"id":31,"name":"Fern"}');
  t.equal(response.statusCode, 200);
  t.same(response.json(), { name: 'Fern' });
  t.strictSame(parseJson('\uFEFF{"id":31,"name":"Fern"}'), { id: 31n, name: 'Fern' }, 'parseJson, which the tests read answers with, agrees');
});

t.test('a body over the limit is 413', async (t) => {
  const { app } = await build(t);
  const body = `{"id":1,"name":"x","tag":"${'t'.repeat(BODY_LIMIT)}"}`;
  const response = await createPlant(t, app, body);
  t.equal(response.statusCode, 413);
  t.same(response.json(), { error: 413n, message: `The request body is larger than the limit of ${BODY_LIMIT} bytes.` });
});

t.test('a body that is not application/json is 415', async (t) => {
  const { app } = await build(t);
  for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x']) {
    const response = await api(t, app, {
      method: 'POST',
      url: '/plants',
      headers: { ...AUTH, 'content-type': contentType },
      payload: 'id=1&name=x',
    });
    t.equal(response.statusCode, 415, contentType);
    t.match(response.json(), { error: 415n, message: /is not supported; send application\/json/ });
  }
  const charset = await createPlant(t, app, '{"id":1,"name":"x"}', { ...AUTH, 'content-type': 'application/json; charset=utf-8' });
  t.equal(charset.statusCode, 200, 'a charset parameter is fine');
});

t.test('a POST without a body is 400 naming the body, never reaching the handler unvalidated', async (t) => {
  const { app } = await build(t);
  const response = await api(t, app, { method: 'POST', url: '/plants', headers: AUTH });
  t.equal(response.statusCode, 400);
  t.match(response.json(), { error: 400n, message: /request body must be object/ });
  for (const contentType of ['APPLICATION/JSON', 'Application/Json; charset=utf-8']) {
    const shouted = await createPlant(t, app, '{"id":"x","name":"n"}', { ...AUTH, 'content-type': contentType });
    t.equal(shouted.statusCode, 400, `${contentType} is validated too`);
  }
});

t.test('an unknown route or method is a 404 Error', async (t) => {
  const { app } = await build(t);
  for (const [method, url] of [['GET', '/nothing'], ['DELETE', '/plants'], ['GET', '/plants/1/leaves']] as const) {
    const response = await app.inject({ method, url, headers: AUTH });
    t.equal(response.statusCode, 404, `${method} ${url}`);
    t.same(JSON.parse(response.body), { error: 404, message: `There is no ${method} ${url} in this API.` });
  }
});

t.test("a 403 from elsewhere than the docs' static files stays a 403 with its own message", async (t) => {
  const { app } = await build(t);
  app.get('/forbidden', async () => {
    throw Object.assign(new Error('Only the owner may read this'), { statusCode: 403 });
  });
  const response = await app.inject({ method: 'GET', url: '/forbidden' });
  t.equal(response.statusCode, 403);
  t.same(JSON.parse(response.body), { error: 403, message: 'Only the owner may read this.' });
});

t.test('refusals capture no stack and never toggle Error.stackTraceLimit, which is global', async (t) => {
  const { app } = await build(t);
  let limit = Error.stackTraceLimit;
  let writes = 0;
  const set = (value: number) => {
    limit = value;
    writes++;
  };
  Object.defineProperty(Error, 'stackTraceLimit', { configurable: true, enumerable: true, get: () => limit, set });
  t.teardown(() => {
    Object.defineProperty(Error, 'stackTraceLimit', { configurable: true, enumerable: true, writable: true, value: limit });
  });
  const refusal = new HttpError(429, 'Slow down.');
  t.equal(refusal.stack, undefined, 'an answer, not a fault: no stack');
  t.equal((await app.inject({ method: 'GET', url: '/nothing' })).statusCode, 404);
  t.equal((await app.inject({ method: 'GET', url: '/plants' })).statusCode, 401);
  t.equal(writes, 0, 'Error.stackTraceLimit was never written');
});

t.test('an internal failure is a 500 that leaks nothing and is logged', async (t) => {
  const { app, store, logs } = await build(t, { logLevel: 'info' });
  await store.close(); // the real store, really failing
  const response = await createPlant(t, app, '{"id":1,"name":"x"}');
  t.equal(response.statusCode, 500);
  t.same(response.json(), { error: 500n, message: 'The service failed to handle this request; it has been logged.' });
  t.notMatch((response.json() as { message: string }).message, /sqlite|database|open|stack|\bat\b/i, 'no internals in the message');
  t.match(logs(), /"level":50.*"msg":"request failed"/, 'the cause is logged as an error');
  t.match(logs(), /database is not open/i, 'with its real message');
});

t.test('a malformed URL is a 400 Error', async (t) => {
  const { app } = await build(t);
  const response = await app.inject({ method: 'GET', url: '/healthz%E0%A4%A' });
  t.equal(response.statusCode, 400);
  t.same(JSON.parse(response.body), { error: 400, message: 'The URL is not valid: it contains a malformed percent-encoding.' });
});

t.test('requests that are not valid HTTP get an Error body over the socket', async (t) => {
  const { app } = await build(t);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const garbage = await rawExchange(port, 'NOT HTTP AT ALL\r\n\r\n');
  t.match(garbage, /^HTTP\/1\.1 400 Bad Request\r\n/);
  t.same(JSON.parse(garbage.split('\r\n\r\n')[1]!), { error: 400, message: 'The request is not valid HTTP.' });
  const hugeHeaders = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
  t.match(hugeHeaders, /^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
  t.same(JSON.parse(hugeHeaders.split('\r\n\r\n')[1]!), { error: 431, message: 'The request headers are too large.' });
});

t.test('a refusal is the exact Error bytes, with its headers in the same order, every time', async (t) => {
  const { app } = await build(t);
  const expected = '{"error":401,"message":"This operation needs a bearer token: send \\"Authorization: Bearer <token>\\"."}';
  for (let i = 0; i < 2; i++) {
    const response = await app.inject({ method: 'GET', url: '/plants/1', headers: { 'x-request-id': `refused-${i}` } });
    t.equal(response.statusCode, 401);
    t.equal(response.payload, expected);
    // Vary: Origin, as build() sets CORS_ORIGINS.
    t.same(Object.keys(response.headers).slice(0, 5), ['x-request-id', 'vary', 'www-authenticate', 'content-type', 'content-length']);
    t.equal(response.headers['x-request-id'], `refused-${i}`);
    t.equal(response.headers['content-type'], 'application/json; charset=utf-8');
    t.equal(response.headers['content-length'], String(Buffer.byteLength(expected)));
  }
});
