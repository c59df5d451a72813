// CORS for the browser apps of CORS_ORIGINS through @fastify/cors: before authentication, as a preflight
// carries no token; not registered at all without origins, so no request runs its hook.
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { HttpError } from '../contract/errors.ts';

const RATE_LIMIT_HEADERS = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];

export async function allowCrossOrigin(app: FastifyInstance, origins: readonly string[]): Promise<void> {
  if (origins.length === 0) return;
  const allowed = new Set(origins);
  const { fastifyCors } = await import('@fastify/cors'); // loaded only when used
  await app.register(fastifyCors, {
    // An origin not listed gets no CORS header at all (a static list would still send the others).
    origin: (origin, callback) => callback(null, origin !== undefined && allowed.has(origin)),
    // The methods of openapi.yaml's operations; the headers a page may send and read beyond the safelisted ones.
    methods: ['GET', 'POST', 'PUT', 'DELETE'],
    allowedHeaders: ['Authorization', 'Content-Type', 'If-Match', 'If-None-Match', 'X-Request-Id'],
    exposedHeaders: ['ETag', 'Link', 'Retry-After', 'WWW-Authenticate', 'X-Request-Id', ...RATE_LIMIT_HEADERS],
    maxAge: 600, // seconds a browser may reuse a preflight's answer (Chromium caps it at 7200)
    // Strict mode answers a bare OPTIONS with a text/plain 400, not the Error body.
    strictPreflight: false,
  });
  app.addHook('onRequest', refuseForeignPreflights);
}

// An OPTIONS reaching this hook is from an origin not listed: a preflight gets a 403 that says why, any
// other OPTIONS the 404 of no operation, as without CORS_ORIGINS, before its body is read.
function refuseForeignPreflights(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (request.method !== 'OPTIONS') return done();
  if (request.headers['access-control-request-method'] === undefined) return reply.callNotFound();
  done(new HttpError(403, 'This origin may not call the API from a browser: it is not one of the CORS_ORIGINS of the service.'));
}
