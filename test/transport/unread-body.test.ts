// Bodies nobody will read: an answer given before the body arrived (401, 404, 413, 415) closes
// the connection, so a client cannot make the service read and discard an endless body.
// Real sockets throughout: app.inject has no connection to close.
import { connect, type AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { contractProblems } from '../harness/contract.ts';
import { AUTH, build } from '../harness/helper.ts';
import { rawExchange, rawResponses } from '../harness/raw-http.ts';

/** The client gives up after writing this much; a server that never closes fails the test here. */
const CLIENT_WRITE_CAP = 256 * 1024 * 1024;
/** What may sit in kernel buffers (client send + server receive, autotuned to a few MiB each) plus the drain. */
const ACCEPTED_BOUND = 32 * 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 'a');

interface Streamed {
  /** Everything the server wrote before the connection ended. */
  received: string;
  /** Bytes of body the client's socket accepted before it closed (or before the client gave up). */
  written: number;
  /** Whether the server ended the connection (true) or the client gave up at CLIENT_WRITE_CAP (false). */
  closedByServer: boolean;
}

/** Sends `head`, then writes body bytes without pause until the connection closes or the cap is reached. */
function streamBody(port: number, head: string, frame: (chunk: Buffer) => Buffer | string): Promise<Streamed> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let written = 0;
    let gaveUp = false;
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    socket.on('error', () => {}); // EPIPE / ECONNRESET once the server closed: the outcome under test
    socket.on('close', () => resolve({ received, written, closedByServer: !gaveUp }));
    const pump = (): void => {
      while (!socket.destroyed && socket.writable) {
        if (written >= CLIENT_WRITE_CAP) {
          gaveUp = true;
          socket.destroy();
          return;
        }
        written += CHUNK.length;
        if (!socket.write(frame(CHUNK))) {
          socket.once('drain', pump);
          return;
        }
      }
    };
    socket.on('connect', () => {
      socket.write(head);
      pump();
    });
  });
}

const chunked = (chunk: Buffer): string => `${chunk.length.toString(16)}\r\n${chunk.toString('latin1')}\r\n`;
const plain = (chunk: Buffer): Buffer => chunk;

async function listening(t: Test) {
  const built = await build(t);
  await built.app.listen({ host: '127.0.0.1', port: 0 });
  return { ...built, port: (built.app.server.address() as AddressInfo).port };
}

function checkClosed(t: Test, streamed: Streamed, status: number, label: string, operation?: [string, string]): void {
  const response = rawResponses(streamed.received)[0] ?? { statusCode: 0, headers: {}, body: '' };
  t.equal(response.statusCode, status, `${label}: answered ${status}`);
  t.equal(response.headers.connection, 'close', `${label}: the answer says Connection: close`);
  t.same(JSON.parse(response.body || 'null'), { error: status, message: JSON.parse(response.body || '{}').message }, `${label}: the Error body`);
  if (operation) t.same(contractProblems(operation[0], operation[1], response), [], `${label}: documented`);
  t.ok(streamed.closedByServer, `${label}: the server closed the connection`);
  t.ok(streamed.written < ACCEPTED_BOUND, `${label}: the client could write only ${(streamed.written / 2 ** 20).toFixed(1)} MiB before it closed`);
}

t.test('a 401 before the body: the connection closes, however the body is framed', async (t) => {
  const { port } = await listening(t);
  const chunkedHead = 'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
  checkClosed(t, await streamBody(port, chunkedHead, chunked), 401, 'chunked', ['POST', '/plants']);
  const hugeHead = `POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${2 ** 40}\r\n\r\n`;
  checkClosed(t, await streamBody(port, hugeHead, plain), 401, 'a huge Content-Length', ['POST', '/plants']);
  const badToken = 'PUT /plants/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
  checkClosed(t, await streamBody(port, badToken, chunked), 401, 'an unknown token', ['PUT', '/plants/1']);
});

t.test('a 404 for an unknown route before the body: the connection closes', async (t) => {
  const { port } = await listening(t);
  const head = `POST /nothing HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`;
  checkClosed(t, await streamBody(port, head, chunked), 404, 'unknown route, chunked');
  const huge = `PUT /nothing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${2 ** 40}\r\n\r\n`;
  checkClosed(t, await streamBody(port, huge, plain), 404, 'unknown route, huge Content-Length');
});

t.test('a 413 or 415 before the whole body: the connection closes', async (t) => {
  const { port } = await listening(t);
  const tooLarge = `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${2 ** 40}\r\n\r\n`;
  checkClosed(t, await streamBody(port, tooLarge, plain), 413, 'declared over the limit', ['POST', '/plants']);
  const chunkedTooLarge = `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`;
  checkClosed(t, await streamBody(port, chunkedTooLarge, chunked), 413, 'chunked past the limit', ['POST', '/plants']);
  const unsupported = `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n`;
  checkClosed(t, await streamBody(port, unsupported, chunked), 415, 'text/plain, chunked', ['POST', '/plants']);
});

t.test('a small body with a Content-Length is read to its end and the connection carries the next request', async (t) => {
  const { port } = await listening(t);
  const body = '{"id":1,"name":"x"}';
  const refused = `POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  const next = 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
  const received = await rawExchange(port, refused + next);
  const answers = rawResponses(received);
  t.same(answers.map((answer) => answer.statusCode), [401, 200], 'the 401, then the next request answered');
  t.equal(answers[0]?.headers.connection, 'keep-alive', 'the 401 keeps the connection');
});
