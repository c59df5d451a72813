// Answers decided below Fastify's routing, where Node would otherwise answer for us or not at all:
// every one is an Error body, and none leaves a pipelined request unanswered.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { HttpError, rawErrorAnswer } from '../contract/errors.ts';

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
  app.addHook('onRequest', (request, _reply, done) => {
    if (!lacksRequiredHost(request.raw)) return done();
    done(new HttpError(400, 'The request has no Host header, which HTTP/1.1 requires.', { connection: 'close' }));
  });
}

// RFC 9112 §3.2: a server answers 400 to any HTTP/1.1 request without Host (HTTP/1.0 may omit it).
function lacksRequiredHost(request: IncomingMessage): boolean {
  return request.httpVersion === '1.1' && request.headers.host === undefined;
}

/** CONNECT asks for a tunnel; without a listener Node closes the socket without a word. */
function refuseConnect(_request: IncomingMessage, socket: Duplex): void {
  const answer = rawErrorAnswer(405, 'This service is not a proxy: CONNECT is not supported.', { allow: 'GET, HEAD, POST, PUT, DELETE' });
  // Ended, then destroyed once written: the server allows half-open sockets, so end() alone could linger.
  socket.end(answer, () => socket.destroy());
}
