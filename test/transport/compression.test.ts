// Compression of large answers by Accept-Encoding, over app.inject and a real socket: each answer
// is decoded as a client would and checked against openapi.yaml, its headers included.
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { FastifyInstance } from 'fastify';
import t, { type Test } from 'tap';
import { contractProblems } from '../harness/contract.ts';
import { AUTH, build, createPlant, fromTestOrigin } from '../harness/helper.ts';
import { STREAM_THRESHOLD_BYTES } from '../../src/transport/compression.ts';

const PAGE = '/plants?limit=1000';

interface Decoded {
  statusCode: number;
  headers: Record<string, unknown>;
  /** The bytes on the wire, before decoding. */
  wireBytes: number;
  /** The body once decoded by its Content-Encoding. */
  body: string;
}

function decode(encoding: unknown, raw: Buffer): string {
  if (encoding === 'br') return brotliDecompressSync(raw).toString();
  if (encoding === 'gzip') return gunzipSync(raw).toString();
  if (encoding === undefined) return raw.toString();
  throw new Error(`unexpected Content-Encoding ${String(encoding)}`);
}

/** Injects a GET from TEST_ORIGIN, decodes the answer and fails the test when it is not what openapi.yaml documents. */
async function get(t: Test, app: FastifyInstance, url: string, headers: Record<string, string>): Promise<Decoded> {
  const response = await app.inject({ method: 'GET', url, headers: fromTestOrigin(headers) });
  const decoded = {
    statusCode: response.statusCode,
    headers: response.headers,
    wireBytes: response.rawPayload.length,
    body: decode(response.headers['content-encoding'], response.rawPayload),
  };
  t.same(contractProblems('GET', url, decoded), [], `GET ${url} ${response.statusCode} matches openapi.yaml`);
  return decoded;
}

/** A store of 1,000 plants, and their page as plain JSON; longer names make a page of over 64 KiB. */
async function storeWithPage(t: Test, nameLength = 0): Promise<{ app: FastifyInstance; plain: string }> {
  const built = await build(t);
  for (let id = 1; id <= 1000; id++) {
    await built.store.plants.createPlant({ id: BigInt(id), name: `plant number ${id}`.padEnd(nameLength, '.'), ...(id % 3 === 0 && { tag: 'fern' }) });
  }
  const plain = await get(t, built.app, PAGE, AUTH);
  t.equal(plain.headers['content-encoding'], undefined, 'no Accept-Encoding: plain JSON');
  t.equal(JSON.parse(plain.body).length, 1000);
  return { app: built.app, plain: plain.body };
}

t.test('a page of 1,000 plants is compressed by the encoding the client accepts', async (t) => {
  const { app, plain } = await storeWithPage(t);
  const cases: [string, string | undefined][] = [
    ['br', 'br'],
    ['gzip', 'gzip'],
    ['gzip, deflate, br, zstd', 'br'],
    ['br;q=0, gzip', 'gzip'],
    ['gzip;q=0.5, br;q=0.4', 'gzip'],
    ['*', 'gzip'],
    ['identity', undefined],
    ['deflate, compress', undefined],
    // Nothing acceptable, not even identity: plain JSON all the same, rather than a 406.
    ['identity;q=0, br;q=0, gzip;q=0', undefined],
  ];
  for (const [acceptEncoding, expected] of cases) {
    const answer = await get(t, app, PAGE, { ...AUTH, 'accept-encoding': acceptEncoding });
    t.equal(answer.statusCode, 200);
    t.equal(answer.headers['content-encoding'], expected, `Accept-Encoding: ${acceptEncoding}`);
    t.equal(answer.body, plain, `Accept-Encoding: ${acceptEncoding} decodes to the same JSON`);
    if (expected === undefined) continue;
    t.match(answer.headers.vary, /accept-encoding/i, 'a compressed answer says Vary: Accept-Encoding');
    t.ok(answer.wireBytes < plain.length / 5, `${expected}: ${answer.wireBytes} bytes for ${plain.length}`);
    t.equal(answer.headers.etag, undefined, 'a page has no ETag that could be taken for the plain one');
  }
});

t.test('small answers stay plain whatever the client accepts', async (t) => {
  const { app } = await build(t);
  const everything = { 'accept-encoding': 'br, gzip' };
  await createPlant(t, app, '{"id":7,"name":"Monstera","tag":"aroid"}');
  const plant = await get(t, app, '/plants/7', { ...AUTH, ...everything });
  t.equal(plant.statusCode, 200);
  t.equal(plant.headers['content-encoding'], undefined, 'a single plant is sent plain');
  t.notMatch(String(plant.headers.vary), /accept-encoding/i, 'and does not vary with Accept-Encoding (Vary: Origin is CORS\'s)');
  t.match(plant.headers.etag, /^"/, 'and keeps its strong ETag');

  const notModified = await get(t, app, '/plants/7', { ...AUTH, ...everything, 'if-none-match': String(plant.headers.etag) });
  t.equal(notModified.statusCode, 304);
  t.equal(notModified.headers['content-encoding'], undefined, 'a 304 is not compressed');

  for (const url of ['/plants/7', PAGE]) {
    const unauthenticated = await get(t, app, url, everything);
    t.equal(unauthenticated.statusCode, 401);
    t.equal(unauthenticated.headers['content-encoding'], undefined, `a 401 on ${url} is sent plain`);
  }

  const shortPage = await get(t, app, PAGE, { ...AUTH, ...everything });
  t.equal(shortPage.body, '[{"id":7,"name":"Monstera","tag":"aroid"}]');
  t.equal(shortPage.headers['content-encoding'], undefined, 'a page under the threshold is sent plain');
});

// @fastify/compress's own default on a host of 2 or more cores is 8 KiB or less: a typical page would stream.
t.test('a page of up to STREAM_THRESHOLD_BYTES is compressed in one call: it has a Content-Length', async (t) => {
  const { app, plain } = await storeWithPage(t);
  t.ok(plain.length > 8 * 1024 && plain.length <= STREAM_THRESHOLD_BYTES, `a page of ${plain.length} bytes`);
  const answer = await get(t, app, PAGE, { ...AUTH, 'accept-encoding': 'br' });
  t.equal(answer.headers['content-encoding'], 'br');
  t.ok(Number(answer.headers['content-length']) > 0, 'compressed whole, not streamed');
});

// Pages over STREAM_THRESHOLD_BYTES are compressed as a stream (chunked): this one streams.
t.test('over a real socket, a brotli page of over STREAM_THRESHOLD_BYTES arrives whole and decodes to the plain one', async (t) => {
  const { app, plain } = await storeWithPage(t, 100);
  t.ok(plain.length > STREAM_THRESHOLD_BYTES, `a page of ${plain.length} bytes`);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const answer = await new Promise<{ headers: Record<string, unknown>; raw: Buffer }>((resolve, reject) => {
    const outgoing = httpRequest({ port, host: '127.0.0.1', path: PAGE, headers: { ...AUTH, 'accept-encoding': 'br' } }, (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('end', () => resolve({ headers: incoming.headers, raw: Buffer.concat(chunks) }));
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
  t.equal(answer.headers['content-encoding'], 'br');
  t.match(answer.headers.vary, /accept-encoding/i);
  t.equal(decode('br', answer.raw), plain);
});
