// Answers decided below Fastify's routing, where Node would otherwise answer for us or not at all:
// every one is an Error body, and none leaves a pipelined request unanswered.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { clientErrorRefusal, HttpError, rawErrorAnswer } from '../contract/errors.ts';

/** Fastify's server options that hand these cases to us (spread into `http`). */
export const TRANSPORT_SERVER_OPTIONS = {
  // Node's own answer to an HTTP/1.1 request without Host is a 400 with an empty body.
  requireHostHeader: false,
} as const;

export function answerTransportEdges(app: FastifyInstance): void {
  // By default Node ends a connection the moment the client half-closes it (sends its last
  // request and FIN), dropping every answer still being computed, pipelined ones included.
  // Half-open, it answers them all in order and then closes.
  (app.server as { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen = true;
  app.server.on('connect', refuseConnect);
  // Node answers an Expect it does not know with a bare 417 unless this event is handled; routed
  // instead, the hook below refuses it with the Error body and the request id, as any other refusal.
  app.server.on('checkExpectation', (request, response) => app.routing(request, response));
  app.addHook('onRequest', (request, _reply, done) => {
    const failure = edgeFailure(request.raw);
    done(failure ?? undefined);
  });
}

/** The refusal owed to a request before anything reads it, or null. */
function edgeFailure(request: IncomingMessage): HttpError | null {
  if (lacksRequiredHost(request)) return new HttpError(400, 'The request has no Host header, which HTTP/1.1 requires.', { connection: 'close' });
  if (hostCount(request.rawHeaders) > 1) return new HttpError(400, 'The request has more than one Host header; HTTP allows exactly one.', { connection: 'close' });
  const expect = request.headers.expect;
  if (expect !== undefined && expect.toLowerCase() !== '100-continue') {
    return new HttpError(417, 'The Expect header can only be 100-continue; this service meets no other expectation.');
  }
  return null;
}

// Node keeps the first of several Host headers and drops the others from `headers`; RFC 9112 §3.2 says 400.
function hostCount(rawHeaders: string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.length === 4 && rawHeaders[i]!.toLowerCase() === 'host') count++;
  return count;
}

// RFC 9112 §3.2: a server answers 400 to any HTTP/1.1 request without Host (HTTP/1.0 may omit it).
function lacksRequiredHost(request: IncomingMessage): boolean {
  return request.httpVersion === '1.1' && request.headers.host === undefined;
}

/** CONNECT asks for a tunnel; without a listener Node closes the socket without a word. */
function refuseConnect(_request: IncomingMessage, socket: Duplex): void {
  closeWith(socket, rawErrorAnswer(405, 'This service is not a proxy: CONNECT is not supported.', { allow: 'GET, HEAD, POST, PUT, DELETE' }));
}

/** Writes a last answer and closes the connection. */
function closeWith(socket: Duplex, answer: string): void {
  // Ended, then destroyed once written: the server allows half-open sockets, so end() alone could linger.
  socket.end(answer, () => socket.destroy());
}

/** Fastify's `clientErrorHandler` option: a request that HTTP parsing refused, or that took too long to arrive. */
export function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const refusal = clientErrorRefusal(error);
  if (socket.writable) socket.write(rawErrorAnswer(refusal.statusCode, refusal.message));
  socket.destroy(error);
}
