// The `bearerAuth` security handler named in openapi.yaml. It receives the scopes the operation's
// security requirement lists, so what each operation needs is written once, in the contract.
// @fastify/bearer-auth parses the header (scheme compared case-insensitively, as RFC 9110 says);
// around it we refuse malformed credentials (RFC 6750), slow token guessing per address
// (failure-limiter.ts), check scopes, and answer with RFC 6750 challenges. Each operation's route
// runs it as an onRequest hook (contract/routes.ts), before the body is parsed or validated.
import { setTimeout as sleep } from 'node:timers/promises';
import fastifyBearerAuth from '@fastify/bearer-auth';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { missingScopes } from '../tokens/scopes.ts';
import { keyOfToken, type Principal, type TokenVerifier } from '../tokens/verifier.ts';
import { HttpError, refuse } from '../contract/errors.ts';
import type { FailureLimiter } from './failure-limiter.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export const REALM = 'plants';
const CHALLENGE = `Bearer realm="${REALM}"`;
const ONE_BEARER_TOKEN = /^bearer +([^\s,]+) *$/i;

type SecurityHandler = (request: FastifyRequest, reply: FastifyReply, scopes: string[]) => Promise<void>;

export interface BearerAuth {
  /**
   * The check as a callback-style onRequest hook for an operation needing `scopes`. A request
   * without any Authorization header is refused at once, without a promise or an error object
   * travelling through Fastify's error path.
   */
  hookFor: (scopes: string[]) => onRequestHookHandler;
}

export async function createBearerAuth(
  app: FastifyInstance,
  options: { verifier: TokenVerifier; failures: FailureLimiter },
): Promise<BearerAuth> {
  app.decorateRequest('principal', null);
  await app.register(fastifyBearerAuth, {
    keys: [],
    addHook: false,
    specCompliance: 'rfc6749',
    verifyErrorLogLevel: 'debug',
    auth: async (token, request) => {
      request.principal = (await options.verifier.verify(token)) ?? null;
      return request.principal !== null;
    },
  });
  // Closing must not wait for queued guesses: they are checked at once.
  const closing = new AbortController();
  app.addHook('preClose', (done) => {
    closing.abort();
    done();
  });
  const waitTurn = (ms: number) => (ms > 0 ? sleep(ms, undefined, { signal: closing.signal }).catch(() => undefined) : undefined);
  const verifyBearerAuth = app.verifyBearerAuth!;
  const authenticate = (request: FastifyRequest, reply: FastifyReply) =>
    new Promise<void>((resolve, reject) => {
      verifyBearerAuth(request, reply, (error) => (error ? reject(toAuthError(error, request)) : resolve()));
    });

  const handler: SecurityHandler = async (request, reply, scopes) => {
    refuseMalformedCredentials(request);
    // The commonest refusal answered here: the plugin would build an error object to say the same.
    if (!request.headers.authorization) throw missingToken();
    // One map lookup, as cheap as before; undefined unless this address has sent wrong tokens.
    const record = options.failures.recordOf(request.ip);
    const token = record && bearerToken(request);
    const turn = token === undefined ? undefined : record!.take(() => keyOfToken(token));
    if (turn) await waitTurn(turn.waitMs);
    try {
      await authenticate(request, reply);
    } catch (error) {
      // Only a wrong token is a guess; a missing one or another scheme tells a guesser nothing.
      if (error instanceof InvalidTokenError) {
        const retryAfter = options.failures.recordFailure(request.ip);
        if (retryAfter !== undefined) throw tooManyFailures(retryAfter);
      }
      throw error;
    } finally {
      turn?.done();
    }
    if (token) record!.remember(request.principal!.key);
    const missing = missingScopes(request.principal!.scopes, scopes);
    if (missing.length > 0) {
      throw new HttpError(403, `This token lacks the scope ${missing.join(' and ')} that this operation needs.`, {
        'www-authenticate': `${CHALLENGE}, error="insufficient_scope", scope="${scopes.join(' ')}"`,
      });
    }
  };
  // The commonest request: one well-formed bearer token, known without the store, from an address
  // that has sent no wrong token (such addresses take their turn in the handler). Answered without
  // a promise or bearer-auth's callbacks, which were most of the check's cost.
  const knownPrincipal = (request: FastifyRequest): Principal | undefined => {
    const token = ONE_BEARER_TOKEN.exec(request.headers.authorization!)?.[1];
    if (token === undefined || options.failures.recordOf(request.ip) || hasMalformedCredentials(request)) return undefined;
    return options.verifier.verifyKnown(token);
  };
  const hookFor = (scopes: string[]): onRequestHookHandler =>
    function bearerAuth(request, reply, done) {
      // No header at all (an empty one may hide a second one, which is a 400): the one check left is
      // a token in the query string, which refuseMalformedCredentials answers with its own 400.
      if (request.headers.authorization === undefined) {
        if (!Object.hasOwn(request.query as object, 'access_token')) {
          refuse(request, reply, MISSING_TOKEN);
          return;
        }
      } else {
        const principal = knownPrincipal(request);
        if (principal !== undefined && missingScopes(principal.scopes, scopes).length === 0) {
          request.principal = principal;
          return done();
        }
      }
      handler(request, reply, scopes).then(() => done(), done);
    };
  return { hookFor };
}

class InvalidTokenError extends HttpError {}

function tooManyFailures(retryAfter: number): HttpError {
  return new HttpError(429, `Too many failed authentications from this address; retry in ${retryAfter} seconds.`, {
    'retry-after': String(retryAfter),
  });
}

/** The token of a well-formed `Bearer <token>` header (refuseMalformedCredentials ran first). */
function bearerToken(request: FastifyRequest): string | undefined {
  return /^bearer +(\S+)/i.exec(request.headers.authorization ?? '')?.[1];
}

// RFC 6750: credentials must come once, in the header, as one token; anything else is ambiguous
// and never authenticates (a proxy and the service might otherwise read different tokens).
function refuseMalformedCredentials(request: FastifyRequest): void {
  const invalid = (message: string) =>
    new HttpError(400, message, { 'www-authenticate': `${CHALLENGE}, error="invalid_request"` });
  if (Object.hasOwn(request.query as object, 'access_token')) {
    throw invalid('Send the token in the Authorization header; a token in the query string is never accepted.');
  }
  if (authorizationHeaders(request) > 1) throw invalid('Send exactly one Authorization header.');
  const header = request.headers.authorization ?? '';
  if (/^bearer /i.test(header) && header.trim().length > 'bearer'.length && !ONE_BEARER_TOKEN.test(header)) {
    throw invalid('Send exactly one bearer token: "Authorization: Bearer <token>".');
  }
}

/** What refuseMalformedCredentials would refuse, for a header already known to hold one bearer token. */
function hasMalformedCredentials(request: FastifyRequest): boolean {
  return Object.hasOwn(request.query as object, 'access_token') || authorizationHeaders(request) > 1;
}

// Node keeps only the first of repeated Authorization headers; the raw list shows them all.
function authorizationHeaders(request: FastifyRequest): number {
  const { rawHeaders } = request.raw;
  let headers = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') headers++;
  }
  return headers;
}

function missingToken(): HttpError {
  return new HttpError(401, 'This operation needs a bearer token: send "Authorization: Bearer <token>".', {
    'www-authenticate': CHALLENGE,
  });
}

/** Only ever read: the answer to the commonest refusal, built once. */
const MISSING_TOKEN = missingToken();

function toAuthError(error: Error, request: FastifyRequest): Error {
  switch ((error as FastifyError).code) {
    case 'FST_BEARER_AUTH_MISSING_AUTHORIZATION_HEADER':
      return missingToken();
    case 'FST_BEARER_AUTH_INVALID_AUTHORIZATION_HEADER':
      if (!/^bearer /i.test(request.headers.authorization ?? '')) {
        return new HttpError(401, 'The Authorization header must use the Bearer scheme: "Authorization: Bearer <token>".', {
          'www-authenticate': CHALLENGE,
        });
      }
      return new InvalidTokenError(401, 'The bearer token is not valid: unknown, revoked or expired.', {
        'www-authenticate': `${CHALLENGE}, error="invalid_token", error_description="The bearer token is not valid"`,
      });
    default:
      return error; // the token lookup itself failed: a 500, not the client's fault
  }
}
