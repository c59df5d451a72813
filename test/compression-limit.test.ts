// Answers over 64 KiB are compressed by a stream each; at most COMPRESSION_CONCURRENCY at once, the
// others are sent uncompressed, so a burst of large reads cannot multiply memory. Over real
// sockets: a client that does not read holds its compression open, as a slow client does.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import t from 'tap';
import { contractProblems } from './contract.ts';
import { AUTH, build } from './helper.ts';
import { DEFAULT_LIMITS } from '../src/transport/plugin.ts';

const PAGE = '/plants?limit=1000';

function get(port: number, encoding: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ port, host: '127.0.0.1', path: PAGE, agent: false, headers: { ...AUTH, 'accept-encoding': encoding } }, resolve);
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
  const { app, store } = await build(t, { limits: { ...DEFAULT_LIMITS, compressions: 1 } });
  for (let id = 1; id <= 1000; id++) await store.createPlant({ id: BigInt(id), name: randomName() });
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
  const overBody = await body(over);
  t.equal(overBody, plain, 'whole');
  t.same(contractProblems('GET', PAGE, { statusCode: over.statusCode!, headers: over.headers, body: overBody }), []);

  held.resume();
  t.equal(await body(held), plain, 'the held answer arrives whole once read');
  const after = await get(port, 'gzip');
  t.equal(after.headers['content-encoding'], 'gzip', 'once it is sent, the next large answer is compressed again');
  t.equal(await body(after), plain);
});
