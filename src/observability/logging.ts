// Logger options and request ids: JSON lines at the configured level, with credentials kept out of every line.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import type { Redact } from './redaction.ts';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export function loggerOptions(level: string, redact: Redact, stream?: NodeJS.WritableStream): FastifyServerOptions['logger'] {
  return {
    level,
    // No header is written: Authorization never reaches a line.
    serializers: {
      // Host and the address come from headers a client may fill with a token; a client already gone leaves neither.
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: redact(request.url),
        host: request.host === undefined ? undefined : redact(request.host),
        remoteAddress: request.ip === undefined ? undefined : redact(request.ip),
      }),
      // A refusal's message may quote the client's input ("the unknown field …").
      reason: (reason: unknown) => (typeof reason === 'string' ? redact(reason) : reason),
      // A webhook target (the dispatcher's lines) is a subscriber's URL, which may carry a token.
      url: (url: unknown) => (typeof url === 'string' ? redact(url) : url),
    },
    ...(stream && { stream }),
  };
}

/** Fastify's genReqId: the client's X-Request-Id when a plain word holding no token (it is in every log line), else generated. */
export function requestIds(redact: Redact): (request: IncomingMessage) => string {
  return (request) => {
    const given = request.headers['x-request-id'];
    return typeof given === 'string' && SAFE_REQUEST_ID.test(given) && redact(given) === given ? given : randomUUID();
  };
}

/** Puts the request's id on its answer: as the request arrives (error answers keep the headers set before the error), or earlier. */
export function returnRequestId(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id);
}
