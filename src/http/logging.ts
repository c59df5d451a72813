// Logger options: JSON lines at the configured level, with credentials kept out of every line.
import type { FastifyRequest, FastifyServerOptions } from 'fastify';

/** Replaces the value of an `access_token` query parameter, which a client may send by mistake. */
export function redactUrl(url: string): string {
  return url.replace(/([?&]access_token=)[^&#]*/gi, '$1[redacted]');
}

export function loggerOptions(level: string, stream?: NodeJS.WritableStream): FastifyServerOptions['logger'] {
  return {
    level,
    redact: { paths: ['req.headers.authorization'], censor: '[redacted]' },
    serializers: {
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: redactUrl(request.url),
        host: request.host,
        remoteAddress: request.ip,
      }),
    },
    ...(stream && { stream }),
  };
}
