// Bearer authentication: challenges, case-insensitive scheme, before validation, never logged.
import t from 'tap';
import { AUTH, TOKEN, api, build, createPlant } from '../harness/helper.ts';
import { ensureFirstToken } from '../../src/tokens/bootstrap.ts';

const VALID = '{"id":1,"name":"Monstera"}';

t.test('a missing or non-Bearer Authorization is 401 with the realm challenge', async (t) => {
  const { app } = await build(t);
  const cases: Record<string, Record<string, string>> = {
    missing: {},
    empty: { authorization: '' },
    basic: { authorization: `Basic ${Buffer.from('user:pass').toString('base64')}` },
    'token without scheme': { authorization: TOKEN },
    'scheme glued to token': { authorization: `Bearer${TOKEN}` },
  };
  for (const [name, headers] of Object.entries(cases)) {
    const response = await createPlant(t, app, VALID, headers);
    t.equal(response.statusCode, 401, name);
    t.equal(response.headers['www-authenticate'], 'Bearer realm="plants"', `${name}: challenge`);
    t.match(response.json(), { error: 401n, message: /Bearer/ }, `${name}: message says how to authenticate`);
  }
});

t.test('an unknown token is 401 invalid_token', async (t) => {
  const { app } = await build(t);
  for (const token of ['not-the-right-token-at-all', `${TOKEN}x`, TOKEN.slice(0, -1), 'pst_typo']) {
    const response = await createPlant(t, app, VALID, { authorization: `Bearer ${token}` });
    t.equal(response.statusCode, 401, token);
    t.match(response.headers['www-authenticate'], /^Bearer realm="plants", error="invalid_token"/);
    t.same(response.json(), { error: 401n, message: 'The bearer token is not valid: unknown, revoked or expired.' });
  }
  const blank = await createPlant(t, app, VALID, { authorization: 'Bearer ' });
  t.equal(blank.statusCode, 401, 'an empty token');
});

t.test('the scheme name is case-insensitive (RFC 9110)', async (t) => {
  const { app } = await build(t);
  let id = 1;
  for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
    const response = await createPlant(t, app, `{"id":${id++},"name":"x"}`, { authorization: `${scheme} ${TOKEN}` });
    t.equal(response.statusCode, 200, scheme);
  }
});

t.test('every static token works; a token stored by the first start works', async (t) => {
  const second = 'second-static-token-abcdef';
  const { app, store } = await build(t, { API_TOKENS: [TOKEN, second] });
  t.equal((await createPlant(t, app, '{"id":1,"name":"x"}', { authorization: `Bearer ${second}` })).statusCode, 200);
  const stored = await ensureFirstToken(store.tokens, []);
  t.type(stored, 'string');
  t.equal((await createPlant(t, app, '{"id":2,"name":"y"}', { authorization: `Bearer ${stored}` })).statusCode, 200);
});

t.test('authentication comes before body validation and parsing', async (t) => {
  const { app } = await build(t);
  for (const body of ['{"id":"nope"}', '{not json', `{"tag":"${'x'.repeat(70_000)}"}`]) {
    const response = await createPlant(t, app, body, {});
    t.equal(response.statusCode, 401, `${body.slice(0, 12)}… without a token is 401, not 400/413`);
  }
  const wrongType = await api(t, app, { method: 'POST', url: '/plants', headers: { 'content-type': 'text/plain' }, payload: 'x' });
  t.equal(wrongType.statusCode, 401, 'an unsupported media type without a token is 401');
});

t.test('the docs, the spec and the health checks need no token', async (t) => {
  const { app } = await build(t);
  for (const url of ['/healthz', '/readyz', '/openapi.json', '/openapi.yaml']) {
    t.equal((await api(t, app, { method: 'GET', url })).statusCode, 200, url);
  }
  t.equal((await app.inject({ method: 'GET', url: '/docs/' })).statusCode, 200, '/docs/');
});

t.test('tokens never reach the logs, even at debug level', async (t) => {
  const { app, logs } = await build(t, { LOG_LEVEL: 'debug' });
  const wrong = 'wrong-token-that-must-not-be-logged';
  await createPlant(t, app, VALID, AUTH);
  await createPlant(t, app, VALID, { authorization: `Bearer ${wrong}` });
  await createPlant(t, app, VALID, { authorization: `Basic ${wrong}` });
  t.match(logs(), /incoming request/, 'requests were logged at all');
  t.notMatch(logs(), TOKEN, 'the valid token is not logged');
  t.notMatch(logs(), wrong, 'a wrong token is not logged');
});

// A request without any Authorization header is refused in the auth hook itself (the cheapest
// answer); it must still be logged like every other refusal: one access line with its status, reason and request id.
t.test('every refusal is logged on its one access line with its status, reason and request id', async (t) => {
  const { app, logs } = await build(t, { LOG_LEVEL: 'info' });
  const cases: Record<string, Record<string, string>> = {
    'no Authorization header': {},
    'an empty Authorization header': { authorization: '' },
    'a wrong token': { authorization: 'Bearer wrong-token-0123456789' },
  };
  for (const [name, headers] of Object.entries(cases)) {
    const response = await api(t, app, { method: 'GET', url: '/plants/1', headers: { ...headers, 'x-request-id': `refusal-${name.length}` } });
    t.equal(response.statusCode, 401, name);
    const lines = logs()
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.reqId === `refusal-${name.length}`);
    t.equal(lines.length, 1, `${name}: one line`);
    const { message } = response.json() as { message: string };
    t.match(lines[0], { level: 30, msg: 'request completed', res: { statusCode: 401 }, reason: message }, `${name}: status and reason`);
  }
});
