// An answer given before its request's body arrived closes the connection: Node would read and discard the rest,
// and a client refused with 401 could stream gigabytes into that. A small declared body is discarded, as accepting it would cost as much.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

/** The most a connection reads of a body it will not use before carrying the next request. */
export const DRAIN_LIMIT = 64 * 1024;

export function closeOnUnreadBodies(app: FastifyInstance): void {
  // Callback-style: it runs on every answer, and an async hook costs a promise each time.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (bodyStillArriving(request.raw)) reply.header('connection', 'close');
    done(null, payload);
  });
}

function bodyStillArriving(request: IncomingMessage): boolean {
  if (request.complete) return false;
  // A chunked body has no length to bound the discard by.
  if (request.headers['transfer-encoding'] !== undefined) return true;
  const declared = Number(request.headers['content-length'] ?? 0);
  return !(declared <= DRAIN_LIMIT);
}
