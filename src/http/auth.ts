// The `bearerAuth` security handler named in openapi.yaml. @fastify/bearer-auth parses the header
// (scheme compared case-insensitively, as RFC 9110 says); we add the RFC 6750 WWW-Authenticate
// challenge and the Error body. app.ts runs it as an onRequest hook, before the body is validated.
import fastifyBearerAuth from '@fastify/bearer-auth';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Principal, TokenVerifier } from '../tokens/verifier.ts';
import { HttpError } from './errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export const REALM = 'plants';
const CHALLENGE = `Bearer realm="${REALM}"`;

export type SecurityHandler = (request: FastifyRequest, reply: FastifyReply, scopes: string[]) => Promise<void>;

export async function createBearerAuth(app: FastifyInstance, verify: TokenVerifier): Promise<SecurityHandler> {
  app.decorateRequest('principal', null);
  await app.register(fastifyBearerAuth, {
    keys: [],
    addHook: false,
    specCompliance: 'rfc6749',
    verifyErrorLogLevel: 'debug',
    auth: async (token, request) => {
      request.principal = (await verify(token)) ?? null;
      return request.principal !== null;
    },
  });
  const verifyBearerAuth = app.verifyBearerAuth!;
  return (request, reply) =>
    new Promise((resolve, reject) => {
      verifyBearerAuth(request, reply, (error) => (error ? reject(toAuthError(error, request)) : resolve()));
    });
}

function toAuthError(error: Error, request: FastifyRequest): Error {
  switch ((error as FastifyError).code) {
    case 'FST_BEARER_AUTH_MISSING_AUTHORIZATION_HEADER':
      return new HttpError(401, 'This operation needs a bearer token: send "Authorization: Bearer <token>".', {
        'www-authenticate': CHALLENGE,
      });
    case 'FST_BEARER_AUTH_INVALID_AUTHORIZATION_HEADER':
      if (!/^bearer /i.test(request.headers.authorization ?? '')) {
        return new HttpError(401, 'The Authorization header must use the Bearer scheme: "Authorization: Bearer <token>".', {
          'www-authenticate': CHALLENGE,
        });
      }
      return new HttpError(401, 'The bearer token is not valid.', {
        'www-authenticate': `${CHALLENGE}, error="invalid_token", error_description="The bearer token is not valid"`,
      });
    default:
      return error; // the token lookup itself failed: a 500, not the client's fault
  }
}
