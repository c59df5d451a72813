// Cross-origin access (CORS_ORIGINS): what a browser app on another origin can do with a token,
// first through app.inject (every answer checked against openapi.yaml), then in headless Chromium
// against the real service process, where the browser itself enforces the CORS protocol.
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { openRaw, tryConnect } from '../harness/raw-http.ts';
import t, { type Test } from 'tap';
import { api, AUTH, build, TOKEN } from '../harness/helper.ts';
import { spec } from '../harness/contract.ts';
import { startServer, serverEnv } from '../harness/process.ts';

const APP_ORIGIN = 'https://app.example.com';
const OTHER_ORIGIN = 'https://evil.example.com';
const REQUEST_HEADERS = ['Authorization', 'Content-Type', 'If-Match', 'If-None-Match', 'X-Request-Id'];
const EXPOSED_HEADERS = ['ETag', 'Link', 'Retry-After', 'WWW-Authenticate', 'X-Request-Id', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];

function names(header: unknown): string[] {
  return String(header ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean)
    .sort();
}

function corsHeaders(headers: Record<string, unknown>): string[] {
  return Object.keys(headers).filter((name) => name.startsWith('access-control-'));
}

function preflight(origin: string, method = 'POST') {
  return {
    method: 'OPTIONS' as const,
    url: '/plants',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization,content-type' },
  };
}

t.test('a preflight from an allowed origin answers 204 without a token, naming what the browser may send', async (t) => {
  const { app } = await build(t, { corsOrigins: [APP_ORIGIN] });
  const response = await api(t, app, preflight(APP_ORIGIN));
  t.equal(response.statusCode, 204);
  t.equal(response.body, '');
  t.equal(response.headers['access-control-allow-origin'], APP_ORIGIN);
  const specMethods = new Set(Object.values<Record<string, unknown>>(spec.paths).flatMap((item) => Object.keys(item).filter((key) => ['get', 'post', 'put', 'delete', 'patch'].includes(key))));
  t.same(names(response.headers['access-control-allow-methods']), [...specMethods].sort(), 'the methods the spec declares');
  t.same(names(response.headers['access-control-allow-headers']), names(REQUEST_HEADERS.join(',')));
  t.equal(response.headers['access-control-max-age'], '600');
  t.ok(names(response.headers.vary).includes('origin'), 'Vary: Origin');
  t.notOk(response.headers['www-authenticate'], 'no authentication was asked for');

  const elsewhere = await api(t, app, { ...preflight(APP_ORIGIN, 'DELETE'), url: '/plants/12' });
  t.equal(elsewhere.statusCode, 204, 'on every path');
});

t.test('answers to an allowed origin let the page read the headers clients need, errors included', async (t) => {
  const { app } = await build(t, { corsOrigins: [OTHER_ORIGIN, APP_ORIGIN], rateLimitPerMinute: 100 });
  const listed = await api(t, app, { url: '/plants', headers: { ...AUTH, origin: APP_ORIGIN } });
  t.equal(listed.statusCode, 200);
  t.equal(listed.headers['access-control-allow-origin'], APP_ORIGIN);
  t.same(names(listed.headers['access-control-expose-headers']), names(EXPOSED_HEADERS.join(',')));
  t.ok(names(listed.headers.vary).includes('origin'));
  t.notOk(listed.headers['access-control-allow-credentials'], 'bearer tokens, not cookies: no credentials mode');

  const refused = await api(t, app, { url: '/plants', headers: { origin: APP_ORIGIN } });
  t.equal(refused.statusCode, 401);
  t.equal(refused.headers['access-control-allow-origin'], APP_ORIGIN, 'the 401 is readable, WWW-Authenticate too');
  t.ok(refused.headers['www-authenticate']);
});

t.test('an origin not in the list gets no CORS headers, and its preflight a 403', async (t) => {
  const { app } = await build(t, { corsOrigins: [APP_ORIGIN] });
  const listed = await api(t, app, { url: '/plants', headers: { ...AUTH, origin: OTHER_ORIGIN } });
  t.equal(listed.statusCode, 200, 'the service answers; the browser withholds the answer from the page');
  t.same(corsHeaders(listed.headers), []);
  t.ok(names(listed.headers.vary).includes('origin'), 'caches keep the answers per origin apart');

  const refused = await api(t, app, preflight(OTHER_ORIGIN));
  t.equal(refused.statusCode, 403);
  const { message } = refused.json() as { message: string };
  t.same(refused.json(), { error: 403, message });
  t.match(message, /origin/i);
  t.same(corsHeaders(refused.headers), []);

  // origin: undefined, as api() sends helper.ts's TEST_ORIGIN otherwise.
  const bare = await api(t, app, { method: 'OPTIONS', url: '/plants', headers: { origin: undefined } });
  t.equal(bare.statusCode, 404, 'an OPTIONS that is no preflight is no operation, as without CORS');
  const unread = await api(t, app, {
    method: 'OPTIONS',
    url: '/plants?limit=%',
    headers: { origin: undefined, 'content-type': 'application/json' },
    payload: `{"tag":"${'t'.repeat(70_000)}"}`,
  });
  t.equal(unread.statusCode, 404, 'whatever its query and body: neither is read');

  const sameOrigin = await api(t, app, { url: '/plants', headers: { ...AUTH, origin: undefined } });
  t.same(corsHeaders(sameOrigin.headers), [], 'a request without Origin (same origin, curl) gets none either');
});

t.test('compressed answers and the contract\'s documents vary with Origin too, beside Accept-Encoding', async (t) => {
  const { app, store } = await build(t, { corsOrigins: [APP_ORIGIN] });
  // Over the 1 KiB below which answers are sent plain.
  for (let id = 1; id <= 20; id++) await store.plants.createPlant({ id: BigInt(id), name: `plant ${id} `.padEnd(100, 'x') });
  for (const url of ['/plants', '/openapi.json', '/openapi.yaml']) {
    for (const origin of [APP_ORIGIN, OTHER_ORIGIN]) {
      // Injected without api(): the compressed body is not what the check reads; the headers are.
      const answer = await app.inject({ url, headers: { ...AUTH, origin, 'accept-encoding': 'gzip' } });
      t.equal(answer.headers['content-encoding'], 'gzip', `${url} from ${origin}: compressed`);
      t.same(names(answer.headers.vary), ['accept-encoding', 'origin'], `${url} from ${origin}: Vary names both`);
    }
  }
});

t.test('the answer of an instance that is shutting down is readable by an allowed page', async (t) => {
  const { app } = await build(t, { corsOrigins: [APP_ORIGIN] });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as AddressInfo).port;
  const request = `GET /plants HTTP/1.1\r\nHost: plants.test\r\nOrigin: ${APP_ORIGIN}\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`;
  const connection = await openRaw(port);
  connection.socket.write(request);
  t.equal((await connection.response(0)).statusCode, 200, 'a keep-alive connection, idle');

  const closing = app.close();
  while ((await tryConnect(port)) !== 'ECONNREFUSED') {
    // accepted: close() has not reached the listener yet
  }
  connection.socket.write(request);
  const late = await connection.response(1);
  t.equal(late.statusCode, 200, 'the request that arrived while closing is served');
  t.equal(late.headers.connection, 'close', 'with Connection: close');
  t.equal(late.headers['access-control-allow-origin'], APP_ORIGIN, 'and the page may read it, Link and Retry-After included');
  t.match(String(late.headers['access-control-expose-headers']), /retry-after/i);
  await closing;
});

t.test('without CORS_ORIGINS nothing is cross-origin and CORS costs nothing', async (t) => {
  const { app } = await build(t, { corsOrigins: [] });
  t.notOk(app.hasPlugin('@fastify/cors'), 'no CORS hook runs on any request');
  const listed = await api(t, app, { url: '/plants', headers: { ...AUTH, origin: APP_ORIGIN } });
  t.same(corsHeaders(listed.headers), []);
  t.notOk(names(listed.headers.vary).includes('origin'));
  const refused = await api(t, app, preflight(APP_ORIGIN));
  t.equal(refused.statusCode, 404, 'the preflight is no operation, as before');
});

// ---- In a real browser -------------------------------------------------------------------------

const CHROMIUM = '/usr/bin/chromium';
const chromiumMissing = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is not installed`;
const skip = chromiumMissing !== undefined && process.env.CI !== 'true' ? `${chromiumMissing}; browser test skipped` : false;

/** What the page's script runs against the API, in the page's origin; its results come back to the test. */
function pageScript(apiUrl: string, token: string): string {
  return `
    const api = ${JSON.stringify(apiUrl)};
    const auth = { authorization: 'Bearer ' + ${JSON.stringify(token)} };
    async function run() {
      const results = {};
      for (const id of [1, 2]) {
        const created = await fetch(api + '/plants', {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json', 'x-request-id': 'page-create-' + id },
          body: JSON.stringify({ id, name: 'Monstera ' + id, tag: 'aroid' }),
        });
        results['create' + id] = { status: created.status, body: await created.json(), requestId: created.headers.get('x-request-id') };
      }
      const listed = await fetch(api + '/plants?limit=1', { headers: auth });
      results.list = {
        status: listed.status,
        body: await listed.json(),
        link: listed.headers.get('link'),
        rateLimitRemaining: listed.headers.get('x-ratelimit-remaining'),
      };
      const got = await fetch(api + '/plants/1', { headers: auth });
      results.get = { status: got.status, body: await got.json(), etag: got.headers.get('etag') };
      const unchanged = await fetch(api + '/plants/1', { headers: { ...auth, 'if-none-match': results.get.etag } });
      results.conditionalGet = { status: unchanged.status };
      const replaced = await fetch(api + '/plants/1', {
        method: 'PUT',
        headers: { ...auth, 'content-type': 'application/json', 'if-match': results.get.etag },
        body: JSON.stringify({ name: 'Monstera deliciosa', tag: 'aroid' }),
      });
      results.replace = { status: replaced.status, etag: replaced.headers.get('etag') };
      const anonymous = await fetch(api + '/plants');
      results.anonymous = { status: anonymous.status, wwwAuthenticate: anonymous.headers.get('www-authenticate') };
      return results;
    }
    async function attempt() {
      try {
        const created = await fetch(api + '/plants', {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ id: 3, name: 'Foreign fern' }),
        });
        return { status: created.status };
      } catch (error) {
        return { rejected: error.name };
      }
    }
  `;
}

/** A page server on 127.0.0.1: GET / answers the page; its script is filled in once the API's URL is known. */
async function pageServer(t: Test, script: () => string): Promise<string> {
  const server: Server = createServer((request, response) => {
    if (request.url !== '/') {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(`<!doctype html><title>plant app</title><script>${script()}</script>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

t.test('in headless Chromium, a page on an allowed origin uses the API with a token; another origin is refused', { skip, timeout: 120_000 }, async (t) => {
  const { chromium } = await import('playwright-core');
  let apiUrl = '';
  const appOrigin = await pageServer(t, () => pageScript(apiUrl, TOKEN));
  const foreignOrigin = await pageServer(t, () => pageScript(apiUrl, TOKEN));
  const dir = t.testdir();
  const server = await startServer(
    t,
    serverEnv(dir, { API_TOKENS: TOKEN, CORS_ORIGINS: appOrigin, RATE_LIMIT_PER_MINUTE: '1000' }),
  );
  apiUrl = server.url;

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  t.teardown(() => browser.close());
  const page = await browser.newPage();

  await page.goto(`${appOrigin}/`);
  const results = await page.evaluate('run()');
  t.match(results, {
    create1: { status: 200, body: { name: 'Monstera 1', tag: 'aroid' }, requestId: 'page-create-1' },
    create2: { status: 200, body: { name: 'Monstera 2' } },
    list: { status: 200, body: [{ id: 1 }], rateLimitRemaining: /^\d+$/ },
    get: { status: 200, body: { id: 1, name: 'Monstera 1' }, etag: /^"/ },
    conditionalGet: { status: 304 },
    replace: { status: 200, etag: /^"/ },
    anonymous: { status: 401, wwwAuthenticate: /^Bearer/ },
  });
  t.match((results as { list: { link: string } }).list.link, /rel="next"/, 'the page read Link');

  await page.goto(`${foreignOrigin}/`);
  t.same(await page.evaluate('attempt()'), { rejected: 'TypeError' }, 'the browser refused the foreign page its call');
  await browser.close();

  const stored = await fetch(`${apiUrl}/plants`, { headers: AUTH });
  t.same(
    ((await stored.json()) as { id: number }[]).map((plant) => plant.id),
    [1, 2],
    'the foreign page never got its POST through',
  );
});
