// X-Request-Id: the client's when a plain word holding no token (it is in every log line), else generated; on every answer.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redact } from './redaction.ts';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** Fastify's genReqId. An id is in every log line, so one that holds a token is not adopted. */
export function requestIds(redact: Redact): (request: IncomingMessage) => string {
  return (request) => {
    const given = request.headers['x-request-id'];
    return typeof given === 'string' && SAFE_REQUEST_ID.test(given) && redact(given) === given ? given : randomUUID();
  };
}

export function returnRequestIds(app: FastifyInstance): void {
  // Set as the request arrives: error answers keep the headers set before the error.
  app.addHook('onRequest', (request, reply, done) => {
    returnRequestId(request, reply);
    done();
  });
}

/** Puts the request's id on its answer; for answers given before any onRequest hook runs. */
export function returnRequestId(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id);
}
