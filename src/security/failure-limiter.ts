// Slows token guessing from one address, never refusing a valid token: past `max` wrong tokens in a window
// its wrong tokens answer 429 and each token new to it waits a turn (one every window/max), but a token that
// authenticated from there does not, so a client sharing a guesser's balancer is slowed, never refused.
type Turn = { waitMs: number; done(): void };

export const SUSPECTS_LIMIT = 10_000;
export const OFFENDERS_LIMIT = 10_000;
const REMEMBERED_TOKENS = 16;
const FREE: Turn = { waitMs: 0, done: () => undefined };

export type FailureLimiter = ReturnType<typeof createFailureLimiter>;

export function createFailureLimiter(options: { max: number; windowMs: number; now?: () => number }) {
  const { max, windowMs, now = Date.now } = options;
  const spacingMs = windowMs / Math.max(max, 1);
  const records = new Map<string, Entry>();
  // Bounded memory keeping the worst: below the limit the least recently failed go first, blocked the fewest failures.
  const suspects = new Set<string>();
  const offenders = new Set<string>();
  const forget = (table: Set<string>, address: string) => table.delete(address) && records.delete(address);

  /** What the guard holds on an address. Tokens are named by their Principal key, never kept themselves. */
  class Entry {
    failures = 0;
    resetAt = 0;
    nextTurnAt = 0;
    inFlight = 0;
    readonly known: string[] = [];

    /** Before a token is checked: how long it waits. Call done() once it is checked. */
    take(tokenKey: () => string): Turn {
      const at = now();
      // Attempts still being checked count too, or a burst sent at once would all go unpaced.
      const crowded = (this.resetAt > at ? this.failures : 0) + this.inFlight >= max;
      if (crowded && this.known.includes(tokenKey())) return FREE;
      const turnAt = crowded ? Math.max(at, this.nextTurnAt) : at;
      if (crowded) this.nextTurnAt = turnAt + spacingMs;
      this.inFlight++;
      return { waitMs: turnAt - at, done: () => this.inFlight-- };
    }
    /** The token authenticated from this address: it skips the queue from now on. */
    remember(tokenKey: string): void {
      if (!this.known.includes(tokenKey) && this.known.push(tokenKey) > REMEMBERED_TOKENS) this.known.shift();
    }
  }

  // Rare: it takes `max` failures from one address to add an offender. Expired ones go first.
  function makeRoomForOffender(at: number): void {
    let weakest: string | undefined;
    for (const address of offenders) {
      const entry = records.get(address)!;
      if (entry.resetAt <= at && entry.nextTurnAt <= at && entry.inFlight === 0) forget(offenders, address);
      else if (weakest === undefined || entry.failures < records.get(weakest)!.failures) weakest = address;
    }
    if (offenders.size >= OFFENDERS_LIMIT) forget(offenders, weakest!);
  }

  return {
    /** Undefined, cheaply, for every address without failures. */
    recordOf: (address: string) => records.get(address),
    /** Counts a wrong token; answers the seconds of Retry-After when the address was already blocked. */
    recordFailure(address: string): number | undefined {
      if (max === 0) return undefined;
      const at = now();
      let entry = records.get(address);
      if (!entry) records.set(address, (entry = new Entry()));
      if (entry.resetAt <= at) {
        entry.failures = 0; // a new window; queued turns and known tokens carry over
        entry.resetAt = at + windowMs;
      }
      if (++entry.failures < max) {
        offenders.delete(address); // an offender whose window ended is a suspect again
        if (!suspects.delete(address) && suspects.size >= SUSPECTS_LIMIT) forget(suspects, suspects.values().next().value!);
        suspects.add(address); // (re-)added last: the least recently failed go first
        return undefined;
      }
      if (!offenders.has(address)) {
        suspects.delete(address);
        if (offenders.size >= OFFENDERS_LIMIT) makeRoomForOffender(at);
        offenders.add(address);
      }
      // The max-th failure still answers 401; the ones after it, 429.
      return entry.failures > max ? Math.max(1, Math.ceil((entry.resetAt - at) / 1000)) : undefined;
    },
  };
}
