// Per-token request budget (RATE_LIMIT_PER_MINUTE) with @fastify/rate-limit. It runs as a
// preParsing hook, after authentication, so the key is the token and not the address; with
// REDIS_URL the budget is shared by every instance through a Redis store (the plugin's documented
// custom store interface), each call bounded by REDIS_TIMEOUT (redis-deadline.ts): past it, or with
// Redis down, the check is skipped (skipOnError) and the request served unlimited; serving without
// a limit beats not serving.
import fastifyRateLimit, { type FastifyRateLimitStore } from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { setTimeout as delay } from 'node:timers/promises';
import { HttpError } from '../contract/errors.ts';
import { createRedisDeadline, type RedisDeadline, type RedisSkipReason } from './redis-deadline.ts';

export interface RateLimitOptions {
  perMinute?: number;
  redisUrl?: string;
  /** The longest a request waits for Redis. */
  redisTimeoutMs: number;
  /** Called for each check skipped because Redis failed or was late. */
  onSkip?: (reason: RedisSkipReason) => void;
}

const NAMESPACE = 'plant-store:rate-limit:';
// A command is sent, or queued while a connection is being set up; otherwise it fails at once.
const CONNECTED = new Set(['connecting', 'connect', 'ready']);

export async function registerRateLimit(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  if (options.perMinute === undefined) return;
  const store = options.redisUrl ? await sharedStore(app, options.redisUrl, options) : undefined;
  await app.register(fastifyRateLimit, {
    global: true,
    hook: 'preParsing',
    max: options.perMinute,
    timeWindow: 60_000,
    // Only authenticated requests count; the health checks and the docs are never limited.
    allowList: (request) => request.principal === null,
    keyGenerator: (request) => request.principal?.key ?? request.ip,
    skipOnError: true,
    ...(store && { store }),
    errorResponseBuilder: (_request, context) =>
      new HttpError(429, `This token made more than ${context.max} requests in a minute; retry in ${context.after}.`),
  });
}

/** The plugin's Redis store, each call bounded by REDIS_TIMEOUT. */
async function sharedStore(app: FastifyInstance, url: string, options: RateLimitOptions) {
  const redis = await connectRedis(app, url, options.redisTimeoutMs);
  const deadline = createRedisDeadline({
    timeoutMs: options.redisTimeoutMs,
    connected: () => CONNECTED.has(redis.status),
    log: app.log,
    ...(options.onSkip && { onSkip: options.onSkip }),
  });
  redis.on('error', (error: Error) => deadline.connectionError(error));
  redis.on('ready', () => deadline.connectionReady());
  return redisStore(redis, deadline);
}

// ioredis is loaded only when REDIS_URL asks for it. Its offline queue holds a command only while a
// connection is being set up (the deadline fails it at once otherwise), so an instance's first
// requests wait for Redis rather than skip it; maxRetriesPerRequest fails queued commands when a
// reconnection fails.
async function connectRedis(app: FastifyInstance, url: string, timeoutMs: number): Promise<Redis> {
  const redis = new (await import('ioredis')).Redis(url, { maxRetriesPerRequest: 1 });
  app.addHook('onClose', async () => {
    // QUIT waits for Redis's answer: a hung Redis gets REDIS_TIMEOUT, then the connection is dropped.
    await Promise.race([redis.quit().catch(() => undefined), delay(timeoutMs, undefined, { ref: false })]);
    redis.disconnect();
  });
  return redis;
}

// A fixed window per key: the first hit starts it (PEXPIRE), every hit counts (INCR), and the
// answer says how long the window has left (PTTL), in one round trip.
const INCREMENT = `
local current = redis.call('INCR', KEYS[1])
local ttl = tonumber(ARGV[1])
if current == 1 then redis.call('PEXPIRE', KEYS[1], ttl) else ttl = redis.call('PTTL', KEYS[1]) end
return {current, ttl}
`;

type IncrResult = { current: number; ttl: number };
type IncrCallback = (error: Error | null, result?: IncrResult) => void;
type RateLimitRedis = Redis & { rateLimitIncrement(key: string, timeWindow: number): Promise<[number, number]> };

/** The store as the plugin takes it: a class it builds with `new`. */
function redisStore(redis: Redis, deadline: RedisDeadline) {
  redis.defineCommand('rateLimitIncrement', { numberOfKeys: 1, lua: INCREMENT });
  const counter = redis as RateLimitRedis;
  const incr = (key: string, callback: IncrCallback, timeWindow?: number) => {
    const send = () => counter.rateLimitIncrement(NAMESPACE + key, timeWindow!).then(([current, ttl]) => ({ current, ttl }));
    deadline.call(send).then((result) => callback(null, result), (error: Error) => callback(error));
  };
  return class implements FastifyRateLimitStore {
    incr = incr;
    // Route-level limits are not used; a child shares the global budget.
    child = () => this;
  };
}
