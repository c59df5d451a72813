// Answers given below routing, over real sockets: pipelined requests, a request without Host,
// CONNECT, headers too large, and the docs' static files refusing a path. Each is an Error body
// that openapi.yaml documents, and no request is left unanswered.
import { connect, type AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { contractProblems, isErrorBody } from '../harness/contract.ts';
import { AUTH, build, createPlant } from '../harness/helper.ts';
import { rawExchange, rawResponses, type RawResponse } from '../harness/raw-http.ts';

async function listening(t: Test) {
  const built = await build(t);
  await built.app.listen({ host: '127.0.0.1', port: 0 });
  return { ...built, port: (built.app.server.address() as AddressInfo).port };
}

const get = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\n${extra}\r\n`;

/** Writes `requests` in one write without half-closing, and reads until `count` answers arrived or the server closed. */
function pipelined(port: number, requests: string, count: number): Promise<RawResponse[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(requests));
    let received = '';
    const done = (): void => resolve(rawResponses(received));
    socket.on('data', (chunk) => {
      received += chunk.toString();
      if (rawResponses(received).length >= count) socket.destroy();
    });
    socket.on('close', done);
    socket.on('error', reject);
  });
}


t.test('requests pipelined after a 404 are all answered, in order', async (t) => {
  const { app, port } = await listening(t);
  await createPlant(t, app, '{"id":1,"name":"one"}');
  const requests = [get('/nothing'), get('/docs/static/nothing.js'), get('/plants/1'), get('/healthz')].join('');
  // The client sends everything and half-closes, as `printf ... | nc` does: every answer still comes.
  const halfClosed = rawResponses(await rawExchange(port, requests));
  t.same(halfClosed.map((answer) => answer.statusCode), [404, 404, 200, 200], 'half-closed: four answers in order');
  isErrorBody(t, halfClosed[1], 404, 'a missing docs file');
  const open = await pipelined(port, requests, 4);
  t.same(open.map((answer) => answer.statusCode), [404, 404, 200, 200], 'kept open: four answers in order');
  t.same(JSON.parse(open[3]?.body ?? 'null'), { status: 'ok' }, 'the last is the health check');
});

t.test('a 404 that closes the connection says so on the last answer', async (t) => {
  const { port } = await listening(t);
  // A body the not-found route could not parse: Fastify closes the connection after its answer.
  const unparsable = 'POST /nothing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1\r\n\r\n{';
  const answers = await pipelined(port, unparsable + get('/healthz'), 2);
  t.ok(answers.length >= 1, 'the 404 is answered');
  const last = answers.at(-1)!;
  if (answers.length === 1) t.equal(last.headers.connection, 'close', 'and, as the last answer, says Connection: close');
  else t.equal(last.statusCode, 200, 'or the next request is answered too');
});

t.test('an HTTP/1.1 request without Host: a documented 400 Error, then the connection closes', async (t) => {
  const { port } = await listening(t);
  const [answer, ...more] = rawResponses(await rawExchange(port, 'GET /healthz HTTP/1.1\r\n\r\n' + get('/healthz')));
  isErrorBody(t, answer, 400, 'no Host');
  t.match(JSON.parse(answer!.body).message, /Host/, 'the message names Host');
  t.equal(answer!.headers.connection, 'close', 'Connection: close');
  t.same(more, [], 'nothing after it');
  t.same(contractProblems('GET', '/healthz', answer!), [], 'documented on GET /healthz');
  const http10 = rawResponses(await rawExchange(port, 'GET /healthz HTTP/1.0\r\n\r\n'));
  t.equal(http10[0]?.statusCode, 200, 'HTTP/1.0 may omit Host');
});

t.test('logged at info, a request whose client is gone before its line is written is still logged (HAProxy health checks)', async (t) => {
  const built = await build(t, { logLevel: 'info' });
  await built.app.listen({ host: '127.0.0.1', port: 0 });
  const port = (built.app.server.address() as AddressInfo).port;
  const logged = new Promise<void>((resolve) => built.app.server.once('request', (_request, response) => response.once('close', resolve)));
  const socket = connect(port, '127.0.0.1', () => socket.end('GET /readyz?gone HTTP/1.0\r\n\r\n', () => socket.resetAndDestroy()));
  socket.on('error', () => undefined);
  await logged;
  const [answer] = rawResponses(await rawExchange(port, 'GET /readyz HTTP/1.0\r\n\r\n'));
  t.equal(answer?.statusCode, 200, 'the service still answers');
  t.match(built.logs(), '/readyz?gone', 'and logged the request of the client that left');
});

t.test('CONNECT: a 405 Error with Connection: close, not a silent close', async (t) => {
  const { port } = await listening(t);
  const [answer, ...more] = rawResponses(await rawExchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'));
  isErrorBody(t, answer, 405, 'CONNECT');
  t.equal(answer!.headers.connection, 'close', 'Connection: close');
  t.ok(answer!.headers.allow, 'with Allow');
  t.same(more, []);
  t.same(contractProblems('CONNECT', '/', answer!), [], 'documented as a transport-level answer');
});

t.test('headers too large: a documented 431 Error', async (t) => {
  const { port } = await listening(t);
  const [answer] = rawResponses(await rawExchange(port, `GET /plants HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
  isErrorBody(t, answer, 431, 'headers too large');
  t.same(contractProblems('GET', '/plants', answer!), [], 'documented on GET /plants');
  const [garbage] = rawResponses(await rawExchange(port, 'NOT HTTP AT ALL\r\n\r\n'));
  isErrorBody(t, garbage, 400, 'not HTTP');
  t.same(contractProblems('NOT', 'HTTP', garbage!), [], 'documented as a transport-level answer');
});

t.test('the docs never answer 403: a path escaping their folder is a 404 Error', async (t) => {
  const { port } = await listening(t);
  for (const path of ['/docs/static/%2e%2e/x', '/docs/static/../../package.json', '/docs/static/index.html/..', '/docs/static/.hidden', '/docs/static/..%2f..%2fpackage.json']) {
    const [answer] = rawResponses(await rawExchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    isErrorBody(t, answer, 404, path);
    t.notMatch(answer?.body ?? '', /devDependencies/, `${path}: no file outside the docs`);
  }
});
