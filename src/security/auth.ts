// openapi.yaml's `bearerAuth`, per operation an onRequest hook: @fastify/bearer-auth reads the header and
// hands the token to `auth`; around it, RFC 6750's refusals, the guard against guessing and the scopes.
import { setTimeout as sleep } from 'node:timers/promises';
import fastifyBearerAuth from '@fastify/bearer-auth';
import type { FastifyError, FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify';
import { HttpError, refuse } from '../contract/errors.ts';
import { keyOfToken, missingScopes, type Principal, type TokenVerifier } from '../tokens/verifier.ts';
import type { FailureLimiter } from './failure-limiter.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyInstance {
    /** The check for an operation needing `scopes`, as an onRequest hook. */
    bearerAuth: { hookFor: (scopes: string[]) => onRequestHookHandler };
  }
}

// Refusals whose text never changes are built once, so each is sent as the same bytes every time.
const refusal = (status: number, message: string, error?: string) =>
  new HttpError(status, message, { 'www-authenticate': `Bearer realm="plants"${error ? `, ${error}` : ''}` });
const MISSING_TOKEN = refusal(401, 'This operation needs a bearer token: send "Authorization: Bearer <token>".');
const NOT_BEARER = refusal(401, 'The Authorization header must use the Bearer scheme: "Authorization: Bearer <token>".');
const INVALID_TOKEN = refusal(
  401,
  'The bearer token is not valid: unknown, revoked or expired.',
  'error="invalid_token", error_description="The bearer token is not valid"',
);
// RFC 6750: one token, in one header; anything else is ambiguous (a proxy might read another token).
const invalidRequest = (message: string) => refusal(400, message, 'error="invalid_request"');
const TOKEN_IN_QUERY = invalidRequest('Send the token in the Authorization header; a token in the query string is never accepted.');
const SEVERAL_HEADERS = invalidRequest('Send exactly one Authorization header.');
const SEVERAL_TOKENS = invalidRequest('Send exactly one bearer token: "Authorization: Bearer <token>".');

export async function createBearerAuth(
  app: FastifyInstance,
  { verifier, failures }: { verifier: TokenVerifier; failures: FailureLimiter },
): Promise<FastifyInstance['bearerAuth']> {
  app.decorateRequest('principal', null);
  // Closing must not wait for queued guesses: they are checked at once.
  const closing = new AbortController();
  app.addHook('preClose', async () => closing.abort());

  await app.register(fastifyBearerAuth, {
    keys: [],
    addHook: false,
    specCompliance: 'rfc6749',
    verifyErrorLogLevel: 'debug',
    // Refusals are thrown: with addHook false, bearer-auth hands what auth throws to the hook's callback.
    auth: async (token, request) => {
      if (/[\s,]/.test(token)) throw SEVERAL_TOKENS;
      // An address that sent wrong tokens: a token new to it waits its turn (failure-limiter.ts).
      const record = failures.recordOf(request.ip);
      const turn = record?.take(() => keyOfToken(token));
      try {
        if (turn && turn.waitMs > 0) await sleep(turn.waitMs, undefined, { signal: closing.signal }).catch(() => undefined);
        const principal = await verifier.verify(token);
        if (principal !== undefined) {
          request.principal = principal;
          record?.remember(principal.key); // it skips the address's queue from now on
          return true;
        }
      } finally {
        turn?.done();
      }
      // Only a wrong token is a guess: a missing one or another scheme tells a guesser nothing.
      const retryAfter = failures.recordFailure(request.ip);
      if (retryAfter === undefined) throw INVALID_TOKEN;
      const message = `Too many failed authentications from this address; retry in ${retryAfter} seconds.`;
      throw new HttpError(429, message, { 'retry-after': String(retryAfter) });
    },
  });
  const verifyBearerAuth = app.verifyBearerAuth!;

  const hookFor = (scopes: string[]): onRequestHookHandler =>
    function bearerAuth(request, reply, done) {
      const refusal = credentialsRefusal(request);
      if (refusal !== undefined) {
        refuse(reply, refusal);
        return;
      }
      verifyBearerAuth(request, reply, (error) => {
        // auth throws its own refusals: the only one left to bearer-auth is another scheme.
        const otherScheme = (error as FastifyError)?.code === 'FST_BEARER_AUTH_INVALID_AUTHORIZATION_HEADER';
        const failure = otherScheme ? NOT_BEARER : (error ?? scopeRefusal(request.principal!, scopes));
        if (failure instanceof HttpError) refuse(reply, failure);
        else done(failure); // undefined: authenticated; another error: the token lookup failed (500 or 503)
      });
    };
  return { hookFor };
}

function scopeRefusal(principal: Principal, scopes: string[]): HttpError | undefined {
  const missing = missingScopes(principal.scopes, scopes);
  if (missing.length === 0) return undefined;
  const message = `This token lacks the scope ${missing.join(' and ')} that this operation needs.`;
  return refusal(403, message, `error="insufficient_scope", scope="${scopes.join(' ')}"`);
}

/** RFC 6750's refusals of credentials that are absent, or not one header's one token (checked by auth). */
function credentialsRefusal(request: FastifyRequest): HttpError | undefined {
  if (Object.hasOwn(request.query as object, 'access_token')) return TOKEN_IN_QUERY;
  // Nothing for bearer-auth to read: answered at once, as its refusal would build an error object and its stack.
  if (!request.headers.authorization) return MISSING_TOKEN;
  // Node keeps only the first of repeated Authorization headers; the raw list shows them all.
  const { rawHeaders } = request.raw;
  let headers = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.length === 13 && rawHeaders[i]!.toLowerCase() === 'authorization') headers++;
  }
  return headers > 1 ? SEVERAL_HEADERS : undefined;
}

