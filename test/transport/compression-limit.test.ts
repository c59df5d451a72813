// Answers over 64 KiB are compressed by a stream each; at most COMPRESSION_CONCURRENCY at once, the
// others are sent uncompressed, so a burst of large reads cannot multiply memory. Over real
// sockets: a client that does not read holds its compression open, as a slow client does.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import t from 'tap';
import { contractProblems } from '../harness/contract.ts';
import { AUTH, build, TEST_ORIGIN } from '../harness/helper.ts';
import { loadConfig } from '../../src/config.ts';

const PAGE = '/plants?limit=1000';

function get(port: number, encoding: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ port, host: '127.0.0.1', path: PAGE, agent: false, headers: { ...AUTH, origin: TEST_ORIGIN, 'accept-encoding': encoding } }, resolve);
    outgoing.on('error', reject);
    outgoing.end();
  });
}

async function body(incoming: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of incoming) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  const encoding = incoming.headers['content-encoding'];
  return (encoding === 'br' ? brotliDecompressSync(raw) : encoding === 'gzip' ? gunzipSync(raw) : raw).toString();
}

/** Names of random printable characters compress poorly: the page outgrows the socket buffers. */
function randomName(): string {
  return Array.from({ length: 256 }, () => String.fromCharCode(33 + Math.floor(Math.random() * 94))).join('');
}

t.test('past COMPRESSION_CONCURRENCY, large answers are sent uncompressed, and the slot returns once an answer is sent', async (t) => {
  const { app, store } = await build(t, { limits: { ...loadConfig({}).limits, compressions: 1 } });
  for (let id = 1; id <= 1000; id++) await store.plants.createPlant({ id: BigInt(id), name: randomName() });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const plain = await body(await get(port, 'identity'));
  t.ok(plain.length > 200 * 1024, `a page of ${plain.length} bytes`);

  // Not read: its compression stream waits on the socket, holding the only slot.
  const held = await get(port, 'br');
  held.pause();
  t.equal(held.headers['content-encoding'], 'br', 'the first large answer is compressed');

  const over = await get(port, 'gzip, br');
  t.equal(over.headers['content-encoding'], undefined, 'past the limit the answer is sent uncompressed');
  t.match(over.headers.vary, /accept-encoding/i, 'and still says it varies with Accept-Encoding');
  t.match(over.headers.vary, /\borigin\b/i, 'and with Origin (CORS_ORIGINS is set): Accept-Encoding is added, not put in its place');
  const overBody = await body(over);
  t.equal(overBody, plain, 'whole');
  t.same(contractProblems('GET', PAGE, { statusCode: over.statusCode!, headers: over.headers, body: overBody }), []);

  held.resume();
  t.equal(await body(held), plain, 'the held answer arrives whole once read');
  const after = await get(port, 'gzip');
  t.equal(after.headers['content-encoding'], 'gzip', 'once it is sent, the next large answer is compressed again');
  t.equal(await body(after), plain);
});

// Each form RFC 9110 §12.5.3 allows (codings, weights, OWS, empty elements, case, repeated fields)
// and odd ones, with the Content-Encoding @fastify/compress's reading gives it: `*` and `x-gzip`
// as gzip, nothing acceptable (not even identity) as plain rather than 406, and what its negotiator
// makes of what RFC 9110 does not allow (`foo;br` reads as br; `gzip;q=0, *` as gzip).
const FORMS: [string | string[] | undefined, string | undefined][] = [
  [undefined, undefined],
  ['', undefined],
  ['br', 'br'],
  ['gzip', 'gzip'],
  ['identity', undefined],
  ['*', 'gzip'],
  ['gzip, br', 'br'],
  ['br;q=0.5, gzip;q=0.9', 'gzip'],
  ['gzip;q=1.000, br;q=0.999', 'gzip'],
  ['br ; q=0.5 ,\tgzip;q=0.4', 'br'],
  ['br;Q=0, gzip', 'gzip'],
  ['BR', 'br'],
  ['GZip', 'gzip'],
  [', ,br,', 'br'],
  ['br;q=0', undefined],
  ['br;q=0.000, gzip;q=0', undefined],
  ['*;q=0', undefined],
  ['identity;q=0', undefined],
  ['identity;q=0, *;q=0', undefined],
  ['gzip;q=1.0, identity; q=0.5, *;q=0', 'gzip'],
  ['deflate, compress, zstd', undefined],
  ['br, br', 'br'],
  ['br;q=0, br', 'br'],
  ['gzip, gzip;q=0', 'gzip'],
  [['gzip', 'br'], 'br'],
  ['x-gzip', 'gzip'],
  ['X-GZIP;q=0.5, deflate', 'gzip'],
  ['foo;br', 'br'],
  ['foo;gzip', 'gzip'],
  ['gzip;q=0, *', 'gzip'],
];

function getWith(port: number, encoding: string | string[] | undefined): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ port, host: '127.0.0.1', path: PAGE, agent: false, headers: AUTH }, resolve);
    // An array is sent as that many Accept-Encoding fields, which the server joins into one list.
    if (encoding !== undefined) outgoing.setHeader('accept-encoding', encoding);
    outgoing.on('error', reject);
    outgoing.end();
  });
}

t.test('for every form of Accept-Encoding, a large answer is compressed exactly when COMPRESSION_CONCURRENCY counts it', async (t) => {
  const { app, store } = await build(t, { limits: { ...loadConfig({}).limits, compressions: 1 } });
  for (let id = 1; id <= 1000; id++) await store.plants.createPlant({ id: BigInt(id), name: randomName() });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const plain = await body(await get(port, 'identity'));

  for (const [form, expected] of FORMS) {
    const label = `Accept-Encoding: ${JSON.stringify(form)}`;
    // Not read: compressed, it holds the only slot; plain, it holds none.
    const held = await getWith(port, form);
    held.pause();
    t.equal(held.headers['content-encoding'], expected, `${label}: ${expected ?? 'plain'}`);
    const probe = await get(port, 'br');
    const counted = probe.headers['content-encoding'] === undefined;
    t.equal(counted, expected !== undefined, `${label}: ${counted ? 'counted' : 'not counted'} against the limit, as it is ${expected ?? 'plain'}`);
    t.equal(await body(probe), plain);
    held.resume();
    t.equal(await body(held), plain, `${label}: decodes to the plain page`);
  }
});
