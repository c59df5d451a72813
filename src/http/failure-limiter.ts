// Slows a burst of failed authentications from one address: after `max` failures in a window,
// every authentication attempt from it answers 429 until the window ends. Per instance, in memory.

export interface FailureLimiter {
  /** Seconds to wait when the key is blocked; undefined when it may try. */
  blockedFor(key: string): number | undefined;
  recordFailure(key: string): void;
}

const TRACKED_KEYS_LIMIT = 10_000;

export function createFailureLimiter(options: { max: number; windowMs: number; now?: () => number }): FailureLimiter {
  const { max, windowMs, now = Date.now } = options;
  const windows = new Map<string, { failures: number; resetAt: number }>();
  const current = (key: string) => {
    const window = windows.get(key);
    return window && window.resetAt > now() ? window : undefined;
  };
  return {
    blockedFor(key) {
      const window = current(key);
      if (max === 0 || !window || window.failures < max) return undefined;
      return Math.max(1, Math.ceil((window.resetAt - now()) / 1000));
    },
    recordFailure(key) {
      if (max === 0) return;
      let window = current(key);
      if (!window) {
        if (windows.size >= TRACKED_KEYS_LIMIT) forgetExpired(windows, now());
        window = { failures: 0, resetAt: now() + windowMs };
        windows.set(key, window);
      }
      window.failures++;
    },
  };
}

function forgetExpired(windows: Map<string, { resetAt: number }>, now: number): void {
  for (const [key, window] of windows) if (window.resetAt <= now) windows.delete(key);
  // Still full of live windows (an address flood): start over rather than grow without bound.
  if (windows.size >= TRACKED_KEYS_LIMIT) windows.clear();
}
