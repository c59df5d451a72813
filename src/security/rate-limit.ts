// Per-token request budget with @fastify/rate-limit, after authentication (preParsing) so the key is the token;
// with REDIS_URL shared, and a check Redis misses (REDIS_TIMEOUT, down) skipped: unlimited beats not serving.
import fastifyRateLimit, { type FastifyRateLimitStore } from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { HttpError } from '../contract/errors.ts';

/** timeout: Redis did not answer within REDIS_TIMEOUT; unavailable: no connection; error: Redis answered an error. */
type SkipReason = Parameters<FastifyInstance['observability']['metrics']['rateLimitSkipped']>[0];

export interface RateLimitOptions {
  perMinute?: number;
  redisUrl?: string;
  redisTimeoutMs: number;
}

export async function registerRateLimit(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  if (options.perMinute === undefined) return;
  const store = options.redisUrl ? await redisStore(app, options.redisUrl, options.redisTimeoutMs) : undefined;
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

const NAMESPACE = 'plant-store:rate-limit:';
// A fixed window per key: the first hit starts it, every hit counts, the answer says what is left of it.
const INCREMENT = `
local current = redis.call('INCR', KEYS[1])
local ttl = tonumber(ARGV[1])
if current == 1 then redis.call('PEXPIRE', KEYS[1], ttl) else ttl = redis.call('PTTL', KEYS[1]) end
return {current, ttl}
`;
const WARNING_INTERVAL_MS = 60_000;

// A store of our own, not the plugin's `redis` option, which drops an error silently: each skip reaches /metrics.
async function redisStore(app: FastifyInstance, url: string, timeoutMs: number) {
  const { Redis, ReplyError } = await import('ioredis'); // loaded only when REDIS_URL asks for it
  const redis = new Redis(url, {
    // A check waits at most REDIS_TIMEOUT; a connection silent that long is made anew (a hung Redis collects no queue).
    commandTimeout: timeoutMs,
    socketTimeout: timeoutMs,
    // Checks queued while a connection is set up fail when it fails; one given up is never resent.
    maxRetriesPerRequest: 1,
    autoResendUnfulfilledCommands: false,
  });
  app.addHook('onClose', () => redis.quit().then(() => undefined, () => redis.disconnect())); // bounded by commandTimeout

  // Skipping is logged when it begins, at most once a minute while it lasts, and when Redis answers again.
  let warnedAt = 0; // 0 while Redis answers
  let skippedChecks = 0; // since the last log line about Redis
  const warn = (reason: SkipReason, error?: Error) => {
    if (Date.now() - warnedAt < WARNING_INTERVAL_MS) return;
    app.log.warn(
      { reason, skippedChecks, timeoutMs, ...(error && { err: error }) },
      'Redis did not answer within REDIS_TIMEOUT or is unreachable: rate limits are skipped (requests served unlimited) until it answers again',
    );
    [warnedAt, skippedChecks] = [Date.now(), 0];
  };
  const answered = () => {
    if (warnedAt === 0) return;
    app.log.info({ skippedChecks }, 'Redis answers again: rate limits are shared again');
    [warnedAt, skippedChecks] = [0, 0];
  };
  // An instance's first checks wait for its first connection; later, none waits for a reconnection.
  let connectedOnce = false;
  // A check went unanswered: the checks skipped until Redis is ready again are late too.
  let hung = false;
  redis.on('ready', () => {
    [connectedOnce, hung] = [true, false];
    answered();
  });
  redis.on('error', (error: Error) => warn('unavailable', error));

  type Callback = (error: Error | null, result?: { current: number; ttl: number }) => void;
  const incr = (key: string, callback: Callback, timeWindow?: number) => {
    const skip = (reason: SkipReason, error?: Error) => {
      skippedChecks++;
      app.observability.metrics.rateLimitSkipped(reason);
      warn(reason, error);
      callback(error ?? new Error(`Redis check skipped: ${reason}`));
    };
    const ready = redis.status === 'ready';
    if (!ready && connectedOnce) return skip(hung ? 'timeout' : 'unavailable');
    (redis.eval(INCREMENT, 1, NAMESPACE + key, timeWindow!) as Promise<[number, number]>).then(
      ([current, ttl]) => {
        answered();
        callback(null, { current, ttl });
      },
      (error: Error) => {
        if (error instanceof ReplyError) return skip('error', error);
        hung ||= ready;
        skip(ready ? 'timeout' : 'unavailable', error);
      },
    );
  };
  return class implements FastifyRateLimitStore {
    incr = incr;
    child = () => this; // route-level limits are not used: a child shares the global budget
  };
}
