// Logger options: JSON lines at the configured level, with credentials kept out of every line.
import type { FastifyRequest, FastifyServerOptions } from 'fastify';
import { REDACTED, type Redact } from './redaction.ts';

export function loggerOptions(level: string, redact: Redact, stream?: NodeJS.WritableStream): FastifyServerOptions['logger'] {
  return {
    level,
    redact: { paths: ['req.headers.authorization'], censor: REDACTED },
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
