// Slows token guessing from one address without ever refusing a valid token. Per instance, in
// memory; the address is request.ip, the client's once TRUST_PROXY names the proxies.
//
// An address with `max` failed tokens in its window is blocked until the window ends: its wrong
// tokens answer 429 with Retry-After instead of 401. That alone slows nobody (a guesser ignores
// Retry-After, and a 429 tells it "wrong" as well as a 401), and refusing every token from the
// address, as this guard once did, let one client lock out everyone behind the same balancer.
// So a blocked address's tokens are still checked, and a right one is served, but a token that has
// not authenticated from that address before waits its turn: turns come one every window/max
// (600 ms at 100 a minute), one queue per address, and attempts still being checked count toward
// the limit. A guesser's tokens are all new, so it gets at most about 2 x max guesses per window
// (max before the block, max turns during it) however many requests it sends at once (only the
// very first burst from an address never seen failing is checked before anything is counted),
// and a right token answers no sooner than a wrong one, so waiting tells it nothing. A client
// whose token authenticated from the address while the guard knew it skips the queue. What
// remains: a client that first shows up from a blocked address shared with the guesser (a
// balancer without TRUST_PROXY) waits behind the guesser's queued attempts; it is never refused.
// Only wrong bearer tokens count: a request without a token guesses nothing.
//
// Memory is bounded without forgetting the worst offenders: addresses below the limit are
// forgotten least-recently-failed first, and a flood of them never touches a blocked address;
// blocked addresses have a table of their own, where the one with the fewest failures goes first.
export interface FailureLimiter {
  /** What the guard holds on an address: undefined, cheaply, for every address without failures. */
  recordOf(address: string): AddressRecord | undefined;
  /** Counts a wrong token; answers the seconds of Retry-After when the address was already blocked. */
  recordFailure(address: string): number | undefined;
}

/** Tokens are named by a key derived from them (the Principal key), never kept themselves. */
export interface AddressRecord {
  /** Before a token is checked: how long it waits. Call done() once it is checked. */
  take(tokenKey: () => string): Turn;
  /** The token authenticated from this address: it skips the queue from now on. */
  remember(tokenKey: string): void;
}

export interface Turn {
  waitMs: number;
  done(): void;
}

const FREE: Turn = { waitMs: 0, done: () => undefined };

export const SUSPECTS_LIMIT = 10_000;
export const OFFENDERS_LIMIT = 10_000;
const REMEMBERED_TOKENS = 16;

interface Options {
  max: number;
  windowMs: number;
  now?: () => number;
}

export function createFailureLimiter({ max, windowMs, now = Date.now }: Options): FailureLimiter {
  const spacingMs = windowMs / Math.max(max, 1);
  const records = new Map<string, Entry>();
  // Keys of `records` in two tables: below the limit in least-recently-failed order, and blocked.
  const suspects = new Set<string>();
  const offenders = new Set<string>();

  class Entry implements AddressRecord {
    failures = 0;
    resetAt = 0;
    nextTurnAt = 0;
    inFlight = 0;
    readonly known: string[] = [];

    /** Still worth keeping: inside its window, or with attempts queued. */
    live(at: number): boolean {
      return this.resetAt > at || this.nextTurnAt > at || this.inFlight > 0;
    }
    take(tokenKey: () => string): Turn {
      const at = now();
      // Attempts still being checked count too, or a burst sent at once would all go unpaced.
      const crowded = (this.resetAt > at ? this.failures : 0) + this.inFlight >= max;
      if (crowded && this.known.includes(tokenKey())) return FREE;
      let waitMs = 0;
      if (crowded) {
        const turn = Math.max(at, this.nextTurnAt);
        this.nextTurnAt = turn + spacingMs;
        waitMs = turn - at;
      }
      this.inFlight++;
      let settled = false;
      return {
        waitMs,
        done: () => {
          if (!settled) this.inFlight--;
          settled = true;
        },
      };
    }
    remember(tokenKey: string): void {
      if (this.known.includes(tokenKey)) return;
      if (this.known.push(tokenKey) > REMEMBERED_TOKENS) this.known.shift();
    }
  }

  function forgetOldestSuspect(): void {
    const oldest = suspects.values().next().value;
    if (oldest === undefined) return;
    suspects.delete(oldest);
    records.delete(oldest);
  }

  // Rare: it takes `max` failures from one address to add an offender. Expired ones go first.
  function makeRoomForOffender(at: number): void {
    let weakest: [string, Entry] | undefined;
    for (const address of offenders) {
      const entry = records.get(address)!;
      if (!entry.live(at)) {
        offenders.delete(address);
        records.delete(address);
      } else if (!weakest || entry.failures < weakest[1].failures) {
        weakest = [address, entry];
      }
    }
    if (offenders.size < OFFENDERS_LIMIT || !weakest) return;
    offenders.delete(weakest[0]);
    records.delete(weakest[0]);
  }

  return {
    recordOf: (address) => (max === 0 ? undefined : records.get(address)),
    recordFailure(address) {
      if (max === 0) return undefined;
      const at = now();
      let entry = records.get(address);
      if (!entry) {
        entry = new Entry();
        records.set(address, entry);
      }
      if (entry.resetAt <= at) {
        entry.failures = 0; // a new window; queued turns and known tokens carry over
        entry.resetAt = at + windowMs;
      }
      entry.failures++;
      if (entry.failures < max) {
        offenders.delete(address); // an offender whose window ended is a suspect again
        if (!suspects.delete(address) && suspects.size >= SUSPECTS_LIMIT) forgetOldestSuspect();
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
