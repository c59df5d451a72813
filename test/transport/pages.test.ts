// Pages are written item by item as the client reads them: a client that stops reading has been written a chunk, not the
// page (app.inject's answer as a stream, which takes what is written as a socket would); what a client reads over a real
// socket is the page's JSON byte for byte, int64 ids exact.
import { request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import t from 'tap';
import { AUTH, build } from '../harness/helper.ts';
import { STREAM_THRESHOLD_BYTES } from '../../src/transport/compression.ts';

// Ids above 2^53, which a float would round.
const FIRST_ID = 2n ** 60n;

function get(app: FastifyInstance, path: string): Promise<IncomingMessage> {
  const { port } = app.server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    request({ port, host: '127.0.0.1', path, headers: AUTH, agent: false }, resolve).on('error', reject).end();
  });
}

async function bodyOf(readable: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of readable) text += String(chunk);
  return text;
}

t.test('a page over STREAM_THRESHOLD_BYTES is written as the client reads it, and reads as the JSON of the whole page', async (t) => {
  const { app, store } = await build(t);
  const expected: string[] = [];
  // Names of 256 characters of three UTF-8 bytes: a page of 1,000 is about 0.8 MB.
  for (let i = 0; i <= 1000; i++) {
    const id = FIRST_ID + BigInt(i);
    const name = Array.from({ length: 256 }, (_, at) => String.fromCharCode(0x4e00 + ((i * 31 + at * 7) % 20000))).join('');
    const tag = i % 3 === 0 ? `tag ${i}` : undefined;
    await store.plants.createPlant({ id, name, ...(tag !== undefined && { tag }) });
    expected.push(`{"id":${id},"name":${JSON.stringify(name)}${tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`}}`);
  }
  const page = `[${expected.slice(0, 1000).join(',')}]`;

  // Answered once its head is written; nothing is read from the stream until the check.
  const unread = await app.inject({ method: 'GET', url: '/plants?limit=1000', headers: AUTH, payloadAsStream: true });
  const written = unread.stream();
  t.ok(written.readableLength < Buffer.byteLength(page) / 2, `${written.readableLength} bytes written of a page of ${Buffer.byteLength(page)}`);
  t.equal(await bodyOf(written.setEncoding('utf8')), page, 'the rest is written as it is read');

  await app.listen({ host: '127.0.0.1', port: 0 });
  const large = await get(app, '/plants?limit=1000');
  t.equal(large.headers['transfer-encoding'], 'chunked', 'its length unknown until written');
  t.equal(large.headers['content-length'], undefined);
  t.equal(large.headers['content-type'], 'application/json; charset=utf-8');
  t.match(large.headers.link, /rel="next"/);
  t.equal(await bodyOf(large.setEncoding('utf8')), page, 'the whole page, byte for byte');

  const head = await app.inject({ method: 'HEAD', url: '/plants?limit=1000', headers: AUTH });
  t.equal(head.headers['transfer-encoding'], 'chunked', 'HEAD says what GET does');
  t.equal(head.headers['content-length'], undefined);

  // A page that compression would send whole is sent whole: its Content-Length and bytes are as before.
  const small = await get(app, '/plants?limit=10');
  const smallPage = `[${expected.slice(0, 10).join(',')}]`;
  t.ok(Buffer.byteLength(smallPage) <= STREAM_THRESHOLD_BYTES);
  t.equal(small.headers['content-length'], String(Buffer.byteLength(smallPage)));
  t.equal(await bodyOf(small.setEncoding('utf8')), smallPage);
});
