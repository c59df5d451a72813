// Logger options: JSON lines at the configured level, with credentials kept out of every line.
import type { FastifyRequest, FastifyServerOptions } from 'fastify';
import { REDACTED, redactTokens } from './redaction.ts';

export function loggerOptions(level: string, stream?: NodeJS.WritableStream): FastifyServerOptions['logger'] {
  return {
    level,
    redact: { paths: ['req.headers.authorization'], censor: REDACTED },
    serializers: {
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: redactTokens(request.url),
        host: request.host,
        remoteAddress: request.ip,
      }),
      // A refusal's message may quote the client's input ("the unknown field …").
      reason: (reason: unknown) => (typeof reason === 'string' ? redactTokens(reason) : reason),
    },
    ...(stream && { stream }),
  };
}
