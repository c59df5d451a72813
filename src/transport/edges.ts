// Answers decided below routing, where Node would answer for us or not at all: each an Error body, none overtaking a pipelined one.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { HttpError, refuse } from '../contract/errors.ts';

const CLOSE = { connection: 'close' };

/** Fastify's server options that hand these cases to us (spread into `http`). */
export const TRANSPORT_SERVER_OPTIONS = {
  // Node's own answer to an HTTP/1.1 request without Host is a 400 with an empty body.
  requireHostHeader: false,
} as const;

export function answerTransportEdges(app: FastifyInstance): void {
  // Else Node ends a connection as soon as the client half-closes it, dropping the answers still being computed.
  (app.server as { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen = true;
  app.server.on('connect', refuseConnect);
  app.server.on('request', noteAnswer);
  // Else Node answers an unknown Expect with a bare 417; routed, the hook below refuses it as any other refusal.
  app.server.on('checkExpectation', (request, response) => {
    noteAnswer(request, response);
    app.routing(request, response);
  });
  app.addHook('onRequest', (request, reply, done) => {
    // After a timeout Node goes on parsing: a request completed then is refused unread, as the connection was.
    const late = failed.get(request.raw.socket);
    if (late !== undefined) refuse(reply, late);
    else done(edgeFailure(request.raw));
  });
}

/** The refusal owed to a request before anything reads it. */
function edgeFailure(request: IncomingMessage): HttpError | undefined {
  // RFC 9112 §3.2: a server answers 400 to any HTTP/1.1 request without Host (HTTP/1.0 may omit it).
  if (request.httpVersion === '1.1' && request.headers.host === undefined) {
    return new HttpError(400, 'The request has no Host header, which HTTP/1.1 requires.', CLOSE);
  }
  if (hostCount(request.rawHeaders) > 1) return new HttpError(400, 'The request has more than one Host header; HTTP allows exactly one.', CLOSE);
  const expect = request.headers.expect;
  if (expect === undefined || expect.toLowerCase() === '100-continue') return undefined;
  return new HttpError(417, 'The Expect header can only be 100-continue; this service meets no other expectation.');
}

// Node keeps the first of several Host headers and drops the others from `headers`; RFC 9112 §3.2 says 400.
function hostCount(rawHeaders: string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.length === 4 && rawHeaders[i]!.toLowerCase() === 'host') count++;
  return count;
}

/** CONNECT asks for a tunnel; without a listener Node closes the socket without a word. */
function refuseConnect(_request: IncomingMessage, socket: Duplex): void {
  closeWith(socket, rawErrorAnswer(new HttpError(405, 'This service is not a proxy: CONNECT is not supported.', { allow: 'GET, HEAD, POST, PUT, DELETE' })));
}

// Ended, then destroyed once written: the server allows half-open sockets, so end() alone could linger.
function closeWith(socket: Duplex, answer: string): void {
  socket.end(answer, () => socket.destroy());
}

// A parse error's answer must not overtake those of the requests before it: it follows one of the last two begun.
const begun = new WeakMap<Socket, { last: ServerResponse | undefined; previous: ServerResponse | undefined }>();
// The refusal each failed connection ends with. Node reports a failed parse again with each further chunk.
const failed = new WeakMap<Socket, HttpError>();

function noteAnswer(request: IncomingMessage, response: ServerResponse): void {
  response.on('finish', forgetAnswer);
  let seen = begun.get(request.socket);
  if (seen === undefined) begun.set(request.socket, (seen = { last: undefined, previous: undefined }));
  seen.previous = seen.last;
  seen.last = response;
}

/** A finished answer needs no following, and is not kept alive by an idle connection. */
function forgetAnswer(this: ServerResponse): void {
  const seen = begun.get(this.req.socket);
  // While an error answer waits, the last answer begun tells whether a request came since.
  if (seen === undefined || failed.has(this.req.socket)) return;
  // Answers finish in order: after the last, none is left.
  if (seen.last === this) seen.last = seen.previous = undefined;
  else if (seen.previous === this) seen.previous = undefined;
}

/** Fastify's `clientErrorHandler`: a request parsing refused, or too slow to arrive, is answered after those before it. */
export function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed || failed.has(socket)) return;
  const refusal = CLIENT_ERRORS[error.code ?? ''] ?? NOT_HTTP;
  failed.set(socket, refusal);
  const answer = rawErrorAnswer(refusal);
  const before = answerBefore(socket);
  if (before === undefined || before.writableFinished) {
    if (socket.writable) closeWith(socket, answer);
    return;
  }
  // A failed parse parses nothing more; after a timeout, the parser goes on.
  const last = begun.get(socket)?.last;
  const lastComplete = last?.req.complete;
  const send = (): void => {
    // Not writable: Node closes the connection after that answer, which said Connection: close.
    if (!socket.writable) return;
    // A request completed since was refused as the connection was, and that answer closes it.
    if (begun.get(socket)?.last !== last) return;
    // The body that timed out arrived whole after all: it is served, and the connection goes on.
    if (last !== undefined && last.req.complete !== lastComplete) failed.delete(socket);
    else closeWith(socket, answer);
  };
  // The client half-closed, so Node ends the connection as soon as this answer is sent: go first.
  before.prependOnceListener('finish', () => socket.readableEnded && send());
  before.once('finish', send);
}

/** The answer the error answer follows: the last one begun, unless its request is the one broken off unanswered. */
function answerBefore(socket: Socket): ServerResponse | undefined {
  const seen = begun.get(socket);
  if (seen?.last === undefined) return undefined;
  return seen.last.req.complete || seen.last.writableEnded ? seen.last : seen.previous;
}

// Not node:http's STATUS_CODES: importing node:http as an ES module loads Node's bundled fetch client at start.
const REASON_PHRASES: Record<number, string> = { 400: 'Bad Request', 405: 'Method Not Allowed', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };
// The refusal of a request whose parsing failed, or that took too long to arrive: the connection closes after it.
const CLIENT_ERRORS: Record<string, HttpError> = {
  ERR_HTTP_REQUEST_TIMEOUT: new HttpError(408, 'The request took too long to arrive.', CLOSE),
  HPE_HEADER_OVERFLOW: new HttpError(431, 'The request headers are too large.', CLOSE),
};
const NOT_HTTP = new HttpError(400, 'The request is not valid HTTP.', CLOSE);

/** A whole HTTP answer for a socket Fastify never sees; no request named itself, so it gets a new X-Request-Id. */
function rawErrorAnswer({ statusCode, headers, body }: HttpError): string {
  const fields = {
    'content-type': 'application/json; charset=utf-8',
    ...headers,
    'x-request-id': randomUUID(),
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  };
  const head = Object.entries(fields).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return `HTTP/1.1 ${statusCode} ${REASON_PHRASES[statusCode]}\r\n${head}\r\n${body}`;
}
