// HTTP edges answered inside the contract, over real sockets: several Host headers, an Expect
// other than 100-continue, a JSON body giving a key twice (each a documented Error body); HEAD
// answering the GET's headers, compressed ones included; what is compressed, and with what.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import t, { type Test } from 'tap';
import { contractProblems, isErrorBody } from '../harness/contract.ts';
import { AUTH, build, TEST_ORIGIN } from '../harness/helper.ts';
import { rawExchange, rawResponses } from '../harness/raw-http.ts';

async function listening(t: Test) {
  const built = await build(t);
  await built.app.listen({ host: '127.0.0.1', port: 0 });
  return { ...built, port: (built.app.server.address() as AddressInfo).port };
}


const post = (body: string, extra = ''): string =>
  `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

t.test('two Host headers: a documented 400 Error naming Host, then the connection closes', async (t) => {
  const { port } = await listening(t);
  const [answer, ...more] = rawResponses(await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n\r\n'));
  isErrorBody(t, answer, 400, 'two Hosts');
  t.match(JSON.parse(answer!.body).message, /Host/, 'the message names Host');
  t.equal(answer!.headers.connection, 'close', 'Connection: close');
  t.ok(answer!.headers['x-request-id'], 'with X-Request-Id');
  t.same(more, [], 'nothing after it');
  t.same(contractProblems('GET', '/healthz', answer!), [], 'documented on GET /healthz');
  const [one] = rawResponses(await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'));
  t.equal(one?.statusCode, 200, 'one Host is fine');
});

t.test('an Expect other than 100-continue: a documented 417 Error with X-Request-Id', async (t) => {
  const { port } = await listening(t);
  const [answer] = rawResponses(await rawExchange(port, 'GET /plants HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nX-Request-Id: edge-417\r\nConnection: close\r\n\r\n'));
  isErrorBody(t, answer, 417, 'Expect: 200-ok');
  t.equal(answer!.headers['x-request-id'], 'edge-417', 'the request id comes back');
  t.match(JSON.parse(answer!.body).message, /Expect/, 'the message names Expect');
  t.same(contractProblems('GET', '/plants', answer!), [], 'documented on GET /plants');
  // With a body sent at once: refused without storing it, and the next request on the connection is answered.
  const both = rawResponses(await rawExchange(port, post('{"id":6,"name":"six"}', 'Expect: 200-ok\r\n') + 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
  t.same(both.map((answer) => answer.statusCode), [417, 200], 'a POST with Expect: 200-ok is refused, then the next request served');
  // 100-continue still works: Node answers 100 Continue, then the request is served.
  const received = await rawExchange(port, post('{"id":7,"name":"seven"}', 'Expect: 100-continue\r\nConnection: close\r\n'));
  t.match(received, /^HTTP\/1\.1 100 Continue\r\n\r\n/, '100-continue gets 100 Continue');
  const [created] = rawResponses(received.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, ''));
  t.equal(created?.statusCode, 200, 'and then the plant is created');
});

t.test('a JSON body giving a key twice: a documented 400 naming the key, nothing stored', async (t) => {
  const { app, port } = await listening(t);
  const bodies = {
    '{"id":1,"id":2,"name":"twice"}': '"id"',
    '{"id":3,"name":"a","name":"b"}': '"name"',
    '{"id":4.0,"name":"a","id":5}': '"id"',
    '{"id":6,"name":"x:y","tag":"a","tag":"b"}': '"tag"',
  };
  for (const [body, key] of Object.entries(bodies)) {
    const [answer] = rawResponses(await rawExchange(port, post(body, 'Connection: close\r\n')));
    isErrorBody(t, answer, 400, body);
    t.ok(JSON.parse(answer!.body).message.includes(`key ${key}`), `${body}: the message names ${key}`);
    t.same(contractProblems('POST', '/plants', answer!), [], `${body}: documented`);
  }
  const list = await app.inject({ method: 'GET', url: '/plants', headers: AUTH });
  t.same(JSON.parse(list.body), [], 'no plant was stored');
  // Colons inside strings and the same key in sibling objects are no duplicates.
  const [fine] = rawResponses(await rawExchange(port, post('{"id":8,"name":"a:b","tag":"c\\":"}', 'Connection: close\r\n')));
  t.equal(fine?.statusCode, 200, 'a colon inside a string is no duplicate');
});

interface Answer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** One request over a real socket through node:http, which knows that a HEAD answer has no body. */
function send(port: number, method: string, path: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ port, host: '127.0.0.1', method, path, headers: { ...AUTH, origin: TEST_ORIGIN, ...headers }, agent: false }, (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('end', () => resolve({ statusCode: incoming.statusCode!, headers: incoming.headers, body: Buffer.concat(chunks) }));
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}

/** The headers that may differ between two answers to the same request: the rate limit counts each one. */
function comparable(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const { date: _date, 'x-request-id': _id, connection: _connection, 'keep-alive': _keepAlive, 'x-ratelimit-remaining': _left, 'x-ratelimit-reset': _reset, ...rest } =
    headers;
  return rest;
}

function decoded(answer: Answer): string {
  const encoding = answer.headers['content-encoding'];
  if (encoding === 'br') return brotliDecompressSync(answer.body).toString();
  if (encoding === 'gzip') return gunzipSync(answer.body).toString();
  return answer.body.toString();
}

async function withPlants(t: Test, count: number, nameLength: number) {
  const listened = await listening(t);
  for (let id = 1; id <= count; id++) {
    await listened.store.plants.createPlant({ id: BigInt(id), name: `plant ${id} `.padEnd(nameLength, 'x'), tag: 'edge' });
  }
  return listened;
}

t.test('HEAD answers exactly the headers of the GET, compressed or not', async (t) => {
  // Pages of 100 (about 12 KB, compressed in one call) and of 1,000 (about 120 KB, compressed as a stream).
  const { port } = await withPlants(t, 1000, 100);
  const paths = ['/plants?limit=100', '/plants?limit=1000', '/openapi.json', '/openapi.yaml', '/plants/1', '/healthz', '/plants/0'];
  for (const path of paths) {
    for (const encoding of ['br', 'gzip', '*', 'identity']) {
      const get = await send(port, 'GET', path, { 'accept-encoding': encoding });
      const head = await send(port, 'HEAD', path, { 'accept-encoding': encoding });
      const label = `${path}, Accept-Encoding: ${encoding}`;
      t.equal(head.statusCode, get.statusCode, `${label}: the same status`);
      t.same(comparable(head.headers), comparable(get.headers), `${label}: the same headers`);
      t.equal(head.body.length, 0, `${label}: HEAD has no body`);
      t.same(contractProblems('GET', path, { ...get, body: decoded(get) }), [], `${label}: the GET, so the HEAD, documented`);
    }
  }
});

t.test('what is compressed, and with what: as docs/api.md says', async (t) => {
  const { port } = await withPlants(t, 100, 100);
  const cases: [string, string, string | undefined][] = [
    ['/plants?limit=100', 'br', 'br'],
    ['/plants?limit=100', 'gzip', 'gzip'],
    ['/plants?limit=100', 'gzip, br', 'br'], // a tie: brotli
    ['/plants?limit=100', 'gzip;q=1, br;q=0.5', 'gzip'], // q-values honoured
    ['/plants?limit=100', '*', 'gzip'], // `*` alone counts as gzip
    ['/plants?limit=100', 'identity', undefined],
    ['/openapi.yaml', 'br', 'br'], // the contract, YAML too
    ['/openapi.json', 'gzip', 'gzip'],
    ['/plants?limit=1', 'br', undefined], // under 1 KiB: plain
    ['/plants/1', 'br', undefined], // a single plant: never
  ];
  for (const [path, acceptEncoding, expected] of cases) {
    const answer = await send(port, 'GET', path, { 'accept-encoding': acceptEncoding });
    const plain = await send(port, 'GET', path, {});
    const label = `${path}, Accept-Encoding: ${acceptEncoding}`;
    t.equal(answer.headers['content-encoding'], expected, `${label}: ${expected ?? 'plain'}`);
    if (expected !== undefined) t.match(answer.headers.vary, /accept-encoding/i, `${label}: Vary: Accept-Encoding`);
    t.equal(decoded(answer), plain.body.toString(), `${label}: decodes to the plain answer`);
    t.same(contractProblems('GET', path, { ...answer, body: decoded(answer) }), [], `${label}: documented`);
  }
});

t.test('/docs may not be framed: CSP frame-ancestors none, and X-Frame-Options for older browsers', async (t) => {
  const { port } = await listening(t);
  for (const path of ['/docs', '/docs/']) {
    const [answer] = rawResponses(await rawExchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    t.equal(answer?.statusCode, 200, `${path}: 200`);
    const policy = answer?.headers['content-security-policy'] ?? '';
    t.match(policy, /(?:^|;\s*)frame-ancestors 'none'(?:;|$)/, `${path}: frame-ancestors 'none'`);
    t.match(policy, /(?:^|;\s*)script-src 'self'(?:;|$)/, `${path}: scripts from this origin only`);
    t.equal(answer?.headers['x-frame-options'], 'DENY', `${path}: X-Frame-Options: DENY`);
  }
});
