// Bodies nobody will read. After an answer, Node reads and discards whatever is left of the
// request body so that the connection can carry the next request: a client refused with 401
// could stream gigabytes into that discard, a whole core's worth, until REQUEST_TIMEOUT. So an
// answer given before its request's body arrived says `Connection: close`, and Node closes the
// connection as soon as the answer is written. The one exception is a small declared body (a
// Content-Length up to DRAIN_LIMIT): Node discards its rest and the connection lives on, since
// reading 64 KiB is what accepting the body would have cost anyway.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

/** The most a connection reads of a body it will not use before carrying the next request. */
export const DRAIN_LIMIT = 64 * 1024;

export function closeOnUnreadBodies(app: FastifyInstance): void {
  // A callback-style hook: it runs on every answer, and an async one costs a promise each time.
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
