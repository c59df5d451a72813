// Managed tokens at the HTTP surface: scopes from the contract, revocation and expiry, RFC 6750
// edge cases, rate limits, and credentials kept out of logs.
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { Redis } from 'ioredis';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { PlantStore } from '../../src/store/types.ts';
import { generateToken, hashToken, tokenHint } from '../../src/tokens/format.ts';
import { AUTH, TOKEN, build, createPlant, readRows } from '../harness/helper.ts';
import { rawExchange } from '../harness/raw-http.ts';

async function issue(store: PlantStore, name: string, scopes: string[], expiresAt?: string): Promise<string> {
  const token = generateToken();
  await store.tokens.createToken({ name, hash: hashToken(token), hint: tokenHint(token), scopes, ...(expiresAt && { expiresAt }) });
  return token;
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const JSON_TYPE = { 'content-type': 'application/json' };

t.test('a read-only token reads, and gets 403 insufficient_scope on every write', async (t) => {
  const { app, store } = await build(t);
  await createPlant(t, app, '{"id":1,"name":"Monstera"}');
  const reader = await issue(store, 'reader', ['plants:read']);
  for (const url of ['/plants', '/plants/1']) {
    t.equal((await app.inject({ method: 'GET', url, headers: bearer(reader) })).statusCode, 200, `GET ${url}`);
  }
  const writes = [
    { method: 'POST', url: '/plants', payload: '{"id":2,"name":"Fern"}' },
    { method: 'PUT', url: '/plants/1', payload: '{"name":"Renamed"}' },
    { method: 'DELETE', url: '/plants/1' },
  ] as const;
  for (const write of writes) {
    const response = await app.inject({ ...write, headers: { ...bearer(reader), ...JSON_TYPE } });
    t.equal(response.statusCode, 403, `${write.method} ${write.url}`);
    t.equal(response.headers['www-authenticate'], 'Bearer realm="plants", error="insufficient_scope", scope="plants:write"');
    t.same(JSON.parse(response.body), { error: 403, message: 'This token lacks the scope plants:write that this operation needs.' });
  }
  const plant = await app.inject({ method: 'GET', url: '/plants/1', headers: AUTH });
  t.same(JSON.parse(plant.body), { id: 1, name: 'Monstera' }, 'nothing was written');

  const writer = await issue(store, 'writer', ['plants:write']);
  t.equal((await app.inject({ method: 'GET', url: '/plants', headers: bearer(writer) })).statusCode, 403, 'a write-only token cannot read');
  const both = await issue(store, 'both', ['plants:read', 'plants:write']);
  t.equal((await app.inject({ method: 'DELETE', url: '/plants/1', headers: bearer(both) })).statusCode, 204);
});

t.test('revocation reaches every instance within the 2 s cache; expiry takes effect at once', async (t) => {
  let now = Date.parse('2026-11-22T10:00:00Z');
  const clock = () => now;
  const path = join(t.testdir(), 'plants.db');
  const storeA = new SqliteStore(path);
  const storeB = new SqliteStore(path);
  const a = await build(t, {}, { store: storeA, clock });
  const b = await build(t, {}, { store: storeB, clock });
  const token = await issue(storeA, 'soon-revoked', ['*']);
  const expiring = await issue(storeA, 'expiring', ['*'], new Date(now + 60_000).toISOString());
  for (const { app } of [a, b]) {
    t.equal((await app.inject({ method: 'GET', url: '/plants', headers: bearer(token) })).statusCode, 200, 'works on both instances');
    t.equal((await app.inject({ method: 'GET', url: '/plants', headers: bearer(expiring) })).statusCode, 200);
  }

  t.ok(await storeB.tokens.revokeToken('soon-revoked'), 'revoked through the other connection');
  now += 2_001; // past the verification cache (2 s), well within the promised 5 s
  for (const { app } of [a, b]) {
    const response = await app.inject({ method: 'GET', url: '/plants', headers: bearer(token) });
    t.equal(response.statusCode, 401, 'the revoked token is refused on both instances');
    t.match(response.headers['www-authenticate'], /error="invalid_token"/);
  }

  now += 60_000 - 2_001; // exactly the expiry instant
  for (const { app } of [a, b]) {
    t.equal((await app.inject({ method: 'GET', url: '/plants', headers: bearer(expiring) })).statusCode, 401, 'expired: refused at once');
  }
});

t.test('a mistyped issued token is refused', async (t) => {
  const { app, store } = await build(t);
  const token = await issue(store, 'typo', ['*']);
  const typo = token.slice(0, 10) + (token[10] === 'a' ? 'b' : 'a') + token.slice(11);
  const response = await app.inject({ method: 'GET', url: '/plants', headers: bearer(typo) });
  t.equal(response.statusCode, 401);
  t.match(response.headers['www-authenticate'], /error="invalid_token"/);
});

t.test('several Authorization headers are 400 invalid_request, even carrying one valid token twice', async (t) => {
  const { app } = await build(t);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  for (const second of [TOKEN, 'another-token-0123456789']) {
    const reply = await rawExchange(port, `GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nAuthorization: Bearer ${second}\r\nConnection: close\r\n\r\n`);
    t.match(reply, /^HTTP\/1\.1 400 /, `second header ${second === TOKEN ? 'repeats the token' : 'differs'}`);
    t.match(reply, /www-authenticate: Bearer realm="plants", error="invalid_request"/i);
    t.match(reply, /"error":400,"message":"Send exactly one Authorization header\."/);
  }
  const single = await rawExchange(port, `GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`);
  t.match(single, /^HTTP\/1\.1 200 /, 'one header works');
});

t.test('several tokens in one header are 400 invalid_request', async (t) => {
  const { app } = await build(t);
  for (const header of [`Bearer ${TOKEN} ${TOKEN}`, `Bearer ${TOKEN},${TOKEN}`, `Bearer ${TOKEN}, Bearer ${TOKEN}`]) {
    const response = await app.inject({ method: 'GET', url: '/plants', headers: { authorization: header } });
    t.equal(response.statusCode, 400, header.replaceAll(TOKEN, 'T'));
    t.equal(response.headers['www-authenticate'], 'Bearer realm="plants", error="invalid_request"');
  }
});

t.test('a token in the query string is never accepted', async (t) => {
  const { app } = await build(t);
  for (const [url, headers] of [[`/plants?access_token=${TOKEN}`, {}], [`/plants?limit=5&access_token=${TOKEN}`, AUTH], ['/plants?access_token=', AUTH]] as const) {
    const response = await app.inject({ method: 'GET', url, headers });
    t.equal(response.statusCode, 400, url);
    t.match(JSON.parse(response.body), { error: 400, message: /a token in the query string is never accepted/ });
  }
});

t.test('no token reaches the logs at debug level, from the header or the query string', async (t) => {
  const { app, store, logs } = await build(t, { LOG_LEVEL: 'debug' });
  const issued = await issue(store, 'logged', ['*']);
  await app.inject({ method: 'GET', url: '/plants', headers: bearer(issued) });
  await app.inject({ method: 'GET', url: `/plants?access_token=${issued}` });
  await app.inject({ method: 'GET', url: `/plants?x=1&ACCESS_TOKEN=${TOKEN}`, headers: AUTH });
  await app.inject({ method: 'GET', url: '/plants', headers: bearer(`${issued}x`) });
  t.match(logs(), /access_token=\[redacted\]/, 'the query parameter is logged redacted');
  t.notMatch(logs(), issued.slice(4), 'the issued token never appears');
  t.notMatch(logs(), TOKEN, 'the static token never appears');
});

t.test('a query-string token never reaches the info log, however the query spells access_token', async (t) => {
  const { app, store, logs } = await build(t, { LOG_LEVEL: 'info' });
  const issued = await issue(store, 'spelled', ['*']);
  const secret = issued.slice(4);
  const spellings = [
    'access_token',
    '%61ccess_token',
    'access%5Ftoken',
    '%61%63%63%65%73%73%5f%74%6f%6b%65%6e',
    'ACCESS_TOKEN',
    'Access%5FToken',
    '%2561ccess_token', // encoded twice
    'access_token+', // a + is a space to the query parser
  ];
  for (const name of spellings) {
    await app.inject({ method: 'GET', url: `/plants?${name}=${issued}` });
    await app.inject({ method: 'GET', url: `/plants?limit=5&${name}=${issued}&${name}=${issued}`, headers: AUTH });
    await app.inject({ method: 'GET', url: `/plants?x=1;${name}=${issued}`, headers: AUTH });
    await app.inject({ method: 'GET', url: `/no-such-route?${name}=${issued}` });
    await app.inject({ method: 'GET', url: `/plants/abc?${name}=${issued}`, headers: AUTH }); // a 400 on the path
  }
  await app.inject({ method: 'GET', url: `/plants?tag=${issued}`, headers: AUTH }); // an issued token anywhere in the query
  t.match(logs(), /request completed/, 'requests were logged at all');
  t.match(logs(), /limit=5/, 'the rest of the query is still logged');
  t.notOk(logs().includes(secret), 'the token never appears in any log line');
});

t.test('a token in the path, percent-encoded in the query, or quoted by a refusal never reaches the log either', async (t) => {
  const { app, store, logs } = await build(t, { LOG_LEVEL: 'info' });
  const issued = await issue(store, 'pathed', ['*']);
  const encoded = [...issued].map((char) => `%${char.charCodeAt(0).toString(16)}`).join('');
  await app.inject({ method: 'GET', url: `/plants/${issued}`, headers: AUTH }); // a 400 on the path
  await app.inject({ method: 'GET', url: `/no-such-route/${encoded}` });
  await app.inject({ method: 'GET', url: `/plants?tag=${encoded}`, headers: AUTH });
  await app.inject({ method: 'POST', url: '/plants', headers: AUTH, payload: { id: 1, name: 'Fern', [issued]: 1 } });
  t.match(logs(), /"url":"\/plants\/\[redacted\]"/, 'the path is logged redacted');
  t.match(logs(), /"reason":"The request body has the unknown field \\"\[redacted\]\\"\."/, 'and so is the refusal quoting it');
  t.notOk(logs().includes(issued.slice(4)) || logs().includes(encoded.slice(12)), 'the token, plain or encoded, never appears');
});

t.test('every spelling the query parser reads as access_token is refused', async (t) => {
  const { app } = await build(t);
  for (const name of ['access_token', '%61ccess_token', 'access%5Ftoken', '%61%63%63%65%73%73%5f%74%6f%6b%65%6e']) {
    const response = await app.inject({ method: 'GET', url: `/plants?${name}=${TOKEN}`, headers: AUTH });
    t.equal(response.statusCode, 400, name);
  }
});

t.test('with RATE_LIMIT_PER_MINUTE, each token gets its own budget; over it, 429 with Retry-After', async (t) => {
  const { app, store } = await build(t, { RATE_LIMIT_PER_MINUTE: 3 });
  const other = await issue(store, 'other', ['*']);
  for (let i = 1; i <= 3; i++) {
    const response = await app.inject({ method: 'GET', url: '/plants', headers: AUTH });
    t.equal(response.statusCode, 200, `request ${i}`);
    t.equal(response.headers['x-ratelimit-remaining'], String(3 - i));
  }
  const limited = await app.inject({ method: 'GET', url: '/plants', headers: AUTH });
  t.equal(limited.statusCode, 429);
  t.match(JSON.parse(limited.body), { error: 429, message: /made more than 3 requests in a minute; retry in/ });
  t.ok(Number(limited.headers['retry-after']) > 0 && Number(limited.headers['retry-after']) <= 60, `Retry-After ${limited.headers['retry-after']}`);
  t.equal(limited.headers['x-ratelimit-limit'], '3');
  t.equal(limited.headers['x-ratelimit-remaining'], '0');
  t.equal((await app.inject({ method: 'GET', url: '/plants', headers: bearer(other) })).statusCode, 200, 'another token is not limited');
  t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'unauthenticated operations are not limited');
  const other2 = await app.inject({ method: 'POST', url: '/plants', headers: { ...AUTH, ...JSON_TYPE }, payload: '{"id":1,"name":"x"}' });
  t.equal(other2.statusCode, 429, 'the budget covers every operation of the token');
});

const redisProblem = await redisProblemAt('redis://127.0.0.1:6379');
// On a laptop without Redis the test is skipped, visibly; in CI a missing Redis is a failure.
const skipRedis = redisProblem !== undefined && process.env.CI !== 'true' && `Redis does not answer on 127.0.0.1:6379: ${redisProblem}`;

t.test('with REDIS_URL, instances share one budget per token', { skip: skipRedis }, async (t) => {
  if (redisProblem) t.fail(`Redis must answer on 127.0.0.1:6379 in CI: ${redisProblem}`);
  const redisUrl = 'redis://127.0.0.1:6379';
  const path = join(t.testdir(), 'plants.db');
  const token = `shared-budget-${process.pid}-${Date.now()}`; // a fresh key in Redis
  // A Redis that answers: REDIS_TIMEOUT, whose skips are pinned in redis-deadline.test.ts, is set far
  // beyond any answer of a busy machine, so only sharing is tested here.
  const a = await build(t, { RATE_LIMIT_PER_MINUTE: 4, REDIS_URL: redisUrl, API_TOKENS: [token], REDIS_TIMEOUT: 60_000 }, { store: new SqliteStore(path) });
  const b = await build(t, { RATE_LIMIT_PER_MINUTE: 4, REDIS_URL: redisUrl, API_TOKENS: [token], REDIS_TIMEOUT: 60_000 }, { store: new SqliteStore(path) });
  const statuses: number[] = [];
  for (const { app } of [a, b, a, b, a, b]) {
    statuses.push((await app.inject({ method: 'GET', url: '/plants', headers: bearer(token) })).statusCode);
  }
  t.same(statuses, [200, 200, 200, 200, 429, 429], 'four requests in all, whichever instance serves them');
});

t.test('a burst of failed authentications from one address is slowed to 429', async (t) => {
  let now = Date.parse('2026-11-22T10:00:00Z');
  const { app } = await build(t, { AUTH_FAILURES_PER_MINUTE: 3 }, { clock: () => now });
  const from = (remoteAddress: string, token: string) =>
    app.inject({ method: 'GET', url: '/plants', headers: bearer(token), remoteAddress });
  for (let i = 1; i <= 3; i++) t.equal((await from('198.51.100.7', `wrong-token-${i}-abcdefghij`)).statusCode, 401, `failure ${i}`);
  const blocked = await from('198.51.100.7', 'wrong-token-4-abcdefghij');
  t.equal(blocked.statusCode, 429, 'the next attempt is 429');
  t.equal(blocked.headers['retry-after'], '60');
  t.match(JSON.parse(blocked.body), { error: 429, message: /Too many failed authentications from this address/ });
  now += 20_000; // blocked, its new tokens take turns: one every minute / 3
  t.equal((await from('198.51.100.7', TOKEN)).statusCode, 200, 'a right token is still served, in its turn');
  t.equal((await from('203.0.113.9', TOKEN)).statusCode, 200, 'another address is unaffected');
  now += 60_000;
  t.equal((await from('198.51.100.7', TOKEN)).statusCode, 200, 'after the window, the address may try again');
});

t.test('last-use times are written in batches, not per request', async (t) => {
  const path = join(t.testdir(), 'plants.db');
  const { app, store } = await build(t, {}, { store: new SqliteStore(path) });
  const token = await issue(store, 'busy', ['*']);
  for (let i = 0; i < 20; i++) await app.inject({ method: 'GET', url: '/plants', headers: bearer(token) });
  t.same(lastUsed(path), [{ name: 'busy', last_used_at: null }], 'twenty requests wrote nothing yet');
  await app.close(); // closing flushes the batch
  const [row] = lastUsed(path);
  t.ok(row?.last_used_at && Date.now() - Date.parse(row.last_used_at) < 60_000, `written on flush: ${row?.last_used_at}`);
});

function lastUsed(path: string): { name: string; last_used_at: string | null }[] {
  return readRows(path, 'SELECT name, last_used_at FROM api_tokens');
}

/** Why Redis cannot be used, or undefined when it answers PING. */
async function redisProblemAt(url: string): Promise<string | undefined> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    const pong = await redis.ping();
    return pong === 'PONG' ? undefined : `PING answered ${pong}`;
  } catch (error) {
    return (error as Error).message;
  } finally {
    redis.disconnect();
  }
}
