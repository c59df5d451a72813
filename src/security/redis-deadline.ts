// Redis calls on a request's path with a deadline (REDIS_TIMEOUT). A call Redis does not answer in
// time is given up, and the caller serves the request as with Redis down. While such a call is
// still unanswered, further calls are not sent at all: a hung Redis would otherwise collect one
// queued command per request, and the late call itself (or a reconnection) tells when Redis
// answers again. Each skipped call is reported (for /metrics); the condition is logged once when
// it begins, at most once a minute while it lasts, and once when Redis answers again.
import type { FastifyBaseLogger } from 'fastify';

/** timeout: no answer within the deadline, or an earlier call is still unanswered; unavailable: no connection; error: Redis answered with an error. */
export type RedisSkipReason = 'timeout' | 'unavailable' | 'error';

export class RedisSkippedError extends Error {
  readonly reason: RedisSkipReason;
  constructor(reason: RedisSkipReason, message: string) {
    super(message);
    this.reason = reason;
  }
}

export interface RedisDeadlineOptions {
  timeoutMs: number;
  /** Whether a call has a connection to go to (or one being set up): if not, it fails at once. */
  connected: () => boolean;
  log: FastifyBaseLogger;
  onSkip?: (reason: RedisSkipReason) => void;
  now?: () => number;
}

export interface RedisDeadline {
  /** Runs the call; rejects with RedisSkippedError when Redis fails or is late. */
  call<T>(send: () => Promise<T>): Promise<T>;
  /** A connection error ioredis reported outside any call: logged like a skipped call. */
  connectionError(error: Error): void;
  /** A connection is ready again (Redis answered its ready check): no need to wait for a request to say so. */
  connectionReady(): void;
}

const WARNING_INTERVAL_MS = 60_000;

export function createRedisDeadline({ timeoutMs, connected, log, onSkip, now = Date.now }: RedisDeadlineOptions): RedisDeadline {
  let unanswered = false;
  let degraded = false;
  let lastWarningAt = 0;
  /** Checks skipped since the last log line about Redis: each line says how many. */
  let skippedSinceWarning = 0;

  const warn = (reason: RedisSkipReason, error?: Error) => {
    if (degraded && now() - lastWarningAt < WARNING_INTERVAL_MS) return;
    log.warn(
      { reason, skippedChecks: skippedSinceWarning, timeoutMs, ...(error && { err: error }) },
      'Redis did not answer within REDIS_TIMEOUT or is unreachable: rate limits are skipped (requests served unlimited) until it answers again',
    );
    degraded = true;
    lastWarningAt = now();
    skippedSinceWarning = 0;
  };
  const skip = (reason: RedisSkipReason, error?: Error): RedisSkippedError => {
    skippedSinceWarning++;
    onSkip?.(reason);
    warn(reason, error);
    return new RedisSkippedError(reason, error?.message ?? `Redis did not answer within ${timeoutMs} ms`);
  };
  const answered = () => {
    if (!degraded) return;
    degraded = false;
    log.info({ skippedChecks: skippedSinceWarning }, 'Redis answers again: rate limits are shared again');
    skippedSinceWarning = 0;
  };

  return {
    call<T>(send: () => Promise<T>): Promise<T> {
      if (unanswered) return Promise.reject(skip('timeout'));
      if (!connected()) return Promise.reject(skip('unavailable'));
      return new Promise<T>((resolve, reject) => {
        let settled = false;
        let late = false;
        const timer = setTimeout(() => {
          // The reply may already be waiting in the socket behind a busy event loop: read it first.
          setImmediate(() => {
            if (settled) return;
            late = true;
            unanswered = true;
            reject(skip('timeout'));
          });
        }, timeoutMs);
        send().then(
          (result) => {
            settled = true;
            clearTimeout(timer);
            unanswered = false;
            answered();
            if (!late) resolve(result);
          },
          (error: Error) => {
            settled = true;
            clearTimeout(timer);
            unanswered = false;
            if (!late) reject(skip(reasonOf(error), error));
          },
        );
      });
    },
    connectionError: (error) => warn('unavailable', error),
    connectionReady: answered,
  };
}

// ioredis rejects a command it cannot send (no connection, or lost before the reply) with these messages.
const CONNECTION_LOST = /Stream isn't writeable|Connection is closed|max retries per request|ECONNREFUSED|ECONNRESET|ETIMEDOUT/i;

function reasonOf(error: Error): RedisSkipReason {
  return CONNECTION_LOST.test(error.message) ? 'unavailable' : 'error';
}
