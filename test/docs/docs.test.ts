// The contract is served as written, stored once per content coding with its ETag; Swagger UI is
// wired to it; health checks answer.
import { readFileSync } from 'node:fs';
import { request, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { SPEC_PATH } from '../../src/spec-path.ts';
import { contractProblems } from '../harness/contract.ts';
import { api, build, TEST_ORIGIN } from '../harness/helper.ts';

const specFile = parseYaml(readFileSync(SPEC_PATH, 'utf8'));

t.test('GET /openapi.yaml is openapi.yaml byte for byte; /openapi.json is that file parsed', async (t) => {
  const { app } = await build(t);
  const yaml = await api(t, app, { method: 'GET', url: '/openapi.yaml' });
  t.equal(yaml.headers['content-type'], 'application/yaml');
  const served = (await app.inject({ method: 'GET', url: '/openapi.yaml' })).rawPayload;
  t.ok(served.equals(readFileSync(SPEC_PATH)), 'the bytes of the file, comments and folded text included');
  const json = await api(t, app, { method: 'GET', url: '/openapi.json' });
  t.equal(json.headers['content-type'], 'application/json; charset=utf-8');
  // Both sides exact: an int64 example above 2^53 must come through digit for digit.
  t.same(json.json(), parseYaml(readFileSync(SPEC_PATH, 'utf8'), { intAsBigInt: true }));
  t.same(JSON.parse(json.body), specFile);
});

t.test('Swagger UI at /docs loads the contract and offers bearer authorization', async (t) => {
  const { app } = await build(t);
  const redirect = await app.inject({ method: 'GET', url: '/docs' });
  t.ok([200, 302].includes(redirect.statusCode), '/docs answers');
  const page = await app.inject({ method: 'GET', url: '/docs/' });
  t.equal(page.statusCode, 200);
  t.match(page.headers['content-type'], /text\/html/);
  t.match(page.body, /swagger-ui/);
  const initializer = await app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
  t.equal(initializer.statusCode, 200);
  t.match(initializer.body, /url: "\.\/json"|"url":\s*"\.\/json"|\.\/json/, 'the UI loads ./json');
  const uiSpec = await app.inject({ method: 'GET', url: '/docs/json' });
  // The UI's copy names its schemas and merges allOf (documentForUi in src/docs/plugin.ts); same operations.
  const ui = JSON.parse(uiSpec.body);
  t.same(Object.keys(ui.paths), Object.keys(specFile.paths), 'which is the contract, drawn for people');
  t.equal(ui.components.schemas.NewPlant.title, 'NewPlant');
  t.same(specFile.components.securitySchemes.bearerAuth, { ...specFile.components.securitySchemes.bearerAuth, type: 'http', scheme: 'bearer' });
  t.same(specFile.security, [{ bearerAuth: [] }], 'so the Authorize button applies to every operation');
  const bundle = await app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
  t.equal(bundle.statusCode, 200, 'the UI bundle is served locally');
});

t.test('/healthz is live; /readyz follows the store', async (t) => {
  const { app, store } = await build(t);
  t.same((await api(t, app, { method: 'GET', url: '/healthz' })).json(), { status: 'ok' });
  t.same((await api(t, app, { method: 'GET', url: '/readyz' })).json(), { status: 'ok' });
  await store.close();
  const notReady = await api(t, app, { method: 'GET', url: '/readyz' });
  t.equal(notReady.statusCode, 503);
  t.same(notReady.json(), { error: 503n, message: 'The store does not answer; the service is not ready.' });
  t.equal((await api(t, app, { method: 'GET', url: '/healthz' })).statusCode, 200, 'liveness does not depend on the store');
});

interface Raw {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

function exchange(port: number, method: string, path: string, headers: Record<string, string>): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const outgoing = request({ port, host: '127.0.0.1', method, path, headers: { origin: TEST_ORIGIN, ...headers }, agent: false }, (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('end', () => resolve({ statusCode: incoming.statusCode ?? 0, headers: incoming.headers, body: Buffer.concat(chunks) }));
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}

function decoded(answer: Raw): string {
  const encoding = answer.headers['content-encoding'];
  return (encoding === 'br' ? brotliDecompressSync(answer.body) : encoding === 'gzip' ? gunzipSync(answer.body) : answer.body).toString();
}

// Headers a HEAD must repeat from its GET (Date and the request id differ by request).
const SAME_HEADERS = ['content-type', 'content-length', 'content-encoding', 'etag', 'vary'];

t.test('the documents are stored once per coding, each with its strong ETag; If-None-Match answers 304; HEAD has the same headers', async (t) => {
  const { app } = await build(t);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const codings: [string | undefined, string | undefined][] = [
    [undefined, undefined],
    ['identity', undefined],
    ['br', 'br'],
    ['gzip, br;q=0.5', 'gzip'],
    ['*', 'gzip'],
    ['x-gzip', 'gzip'],
    ['foo;br', 'br'],
    ['identity;q=0', undefined],
  ];
  for (const path of ['/openapi.yaml', '/openapi.json']) {
    const plain = (await exchange(port, 'GET', path, {})).body.toString();
    const etags = new Map<string | undefined, string>();
    for (const [acceptEncoding, coding] of codings) {
      const headers: Record<string, string> = acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding };
      const label = `${path}, Accept-Encoding: ${acceptEncoding ?? '(none)'}`;
      const answer = await exchange(port, 'GET', path, headers);
      t.equal(answer.statusCode, 200, label);
      t.same(contractProblems('GET', path, { ...answer, body: decoded(answer) }), [], `${label}: documented`);
      t.equal(answer.headers['content-encoding'], coding, `${label}: ${coding ?? 'plain'}`);
      t.match(answer.headers.vary, /accept-encoding/i, `${label}: Vary`);
      t.match(answer.headers.etag, /^"[\w-]+"$/, `${label}: a strong ETag`);
      t.equal(Number(answer.headers['content-length']), answer.body.length, `${label}: its length, not chunked`);
      t.equal(decoded(answer), plain, `${label}: the document`);
      const again = await exchange(port, 'GET', path, headers);
      t.ok(again.body.equals(answer.body), `${label}: the same bytes again`);
      t.equal(again.headers.etag, answer.headers.etag, `${label}: the same ETag`);
      if (etags.has(coding)) t.equal(etags.get(coding), answer.headers.etag, `${label}: the ETag of ${coding ?? 'plain'}`);
      etags.set(coding, answer.headers.etag!);

      const head = await exchange(port, 'HEAD', path, headers);
      t.same(pick(head.headers), pick(answer.headers), `${label}: HEAD has the headers of GET`);
      t.equal(head.body.length, 0, `${label}: and no body`);

      const etag = answer.headers.etag!;
      for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
        for (const method of ['GET', 'HEAD']) {
          const fresh = await exchange(port, method, path, { ...headers, 'if-none-match': ifNoneMatch });
          t.equal(fresh.statusCode, 304, `${label}, ${method} If-None-Match: ${ifNoneMatch}: 304`);
          t.equal(fresh.body.length, 0, 'without a body');
          t.equal(fresh.headers.etag, etag, 'with the ETag');
          t.match(fresh.headers.vary, /accept-encoding/i, 'and Vary');
          t.equal(fresh.headers['content-encoding'], undefined, 'and no Content-Encoding');
          t.same(contractProblems('GET', path, { ...fresh, body: '' }), [], 'documented');
        }
      }
      const stale = await exchange(port, 'GET', path, { ...headers, 'if-none-match': '"other"' });
      t.equal(stale.statusCode, 200, `${label}: another ETag gets the document`);
    }
    t.equal(new Set(etags.values()).size, 3, `${path}: plain, br and gzip each have their own ETag`);
    const otherCoding = await exchange(port, 'GET', path, { 'accept-encoding': 'br', 'if-none-match': etags.get(undefined)! });
    t.equal(otherCoding.statusCode, 200, `${path}: the plain copy's ETag does not validate the br one`);
    t.equal(otherCoding.headers['content-encoding'], 'br');
    const malformed = await exchange(port, 'GET', path, { 'if-none-match': 'not-quoted' });
    t.equal(malformed.statusCode, 400, `${path}: a malformed If-None-Match is refused`);
    t.same(contractProblems('GET', path, { ...malformed, body: malformed.body.toString() }), [], 'as documented');
  }
});

function pick(headers: IncomingHttpHeaders): Record<string, unknown> {
  return Object.fromEntries(SAME_HEADERS.map((name) => [name, headers[name]]));
}
