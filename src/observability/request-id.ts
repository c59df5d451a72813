// X-Request-Id: taken from the request when it is a plain token (so it cannot forge log lines),
// otherwise generated; logged with every line about the request and returned on every answer
// that reaches routing (a request too malformed to parse as HTTP has no id yet).
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export function requestIdFor(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && SAFE_REQUEST_ID.test(given) ? given : randomUUID();
}

export function returnRequestIds(app: FastifyInstance): void {
  // Set as the request arrives: error answers keep the headers set before the error.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
}
