// Who may call what, and how often: CORS for the browser apps in CORS_ORIGINS, the bearer token check each
// operation's route runs (app.bearerAuth.hookFor(scopes)), the guard against guessing, the per-token rate limit.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { createTokenVerifier, type VerifierOptions } from '../tokens/verifier.ts';
import { createBearerAuth } from './auth.ts';
import { allowCrossOrigin } from './cors.ts';
import { createFailureLimiter } from './failure-limiter.ts';
import { registerRateLimit, type RateLimitOptions } from './rate-limit.ts';

export interface SecurityOptions {
  corsOrigins: readonly string[];
  tokens: VerifierOptions;
  /** Failed authentications an address may make per minute before its guesses are slowed. */
  authFailuresPerMinute: number;
  rateLimit: RateLimitOptions;
}

async function security(app: FastifyInstance, options: SecurityOptions): Promise<void> {
  await allowCrossOrigin(app, options.corsOrigins);
  const verifier = createTokenVerifier(options.tokens);
  app.addHook('onClose', () => verifier.close());
  const failures = createFailureLimiter({ max: options.authFailuresPerMinute, windowMs: 60_000, now: options.tokens.now });
  app.decorate('bearerAuth', await createBearerAuth(app, { verifier, failures }));
  await registerRateLimit(app, options.rateLimit);
}

// After the contract (CORS's preflight route answers Error bodies) and observability (/metrics counts skipped checks).
export default fp(security, { name: 'security', fastify: '5.x', dependencies: ['contract', 'observability'] });
