// Per-token request budget (RATE_LIMIT_PER_MINUTE) with @fastify/rate-limit. It runs as a
// preParsing hook, after authentication, so the key is the token and not the address; with
// REDIS_URL the budget is shared by every instance through the plugin's Redis store.
import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { HttpError } from './errors.ts';

export async function registerRateLimit(app: FastifyInstance, options: { perMinute?: number; redisUrl?: string }): Promise<void> {
  if (options.perMinute === undefined) return;
  // No offline queue: while Redis is down a check fails at once and is skipped (skipOnError)
  // instead of holding requests; serving without a limit beats not serving.
  // ioredis is loaded only when REDIS_URL asks for it.
  const redis = options.redisUrl
    ? new (await import('ioredis')).Redis(options.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: false })
    : undefined;
  redis?.on('error', (error: Error) => app.log.warn({ err: error }, 'rate-limit store (Redis) unavailable'));
  if (redis) app.addHook('onClose', async () => void (await redis.quit().catch(() => redis.disconnect())));
  await app.register(fastifyRateLimit, {
    global: true,
    hook: 'preParsing',
    max: options.perMinute,
    timeWindow: 60_000,
    // Only authenticated requests count; the health checks and the docs are never limited.
    allowList: (request) => request.principal === null,
    keyGenerator: (request) => request.principal?.key ?? request.ip,
    skipOnError: true,
    ...(redis && { redis, nameSpace: 'plant-store:rate-limit:' }),
    errorResponseBuilder: (_request, context) =>
      new HttpError(429, `This token made more than ${context.max} requests in a minute; retry in ${context.after}.`),
  });
}
