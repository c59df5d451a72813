// Whether a bearer token is one we issued or were configured with, and what it may do. A token is
// checked through its SHA-256, compared in constant time; stored records are cached for cacheTtlMs,
// so revocation reaches every instance that soon, and last-use times are written in batches.
// A token that passed is remembered by its text while its answer stands, so a client's next requests
// skip the digest; wrong tokens never are, so a guess always takes the digest path.
import { hash, timingSafeEqual } from 'node:crypto';
import type { PlantStore, TokenRecord } from '../store/types.ts';
import { hasValidChecksum } from './format.ts';
import { ALL_SCOPES } from './scopes.ts';

export interface Principal {
  /** Stable key for per-token rate limits, the same on every instance: a prefix of the token's SHA-256. */
  key: string;
  /** A name for logs: never the token itself. */
  name: string;
  scopes: readonly string[];
}

export interface TokenVerifier {
  /** The token's principal, or undefined when it is not valid; a promise only when the store must be asked. */
  verify(token: string): Principal | undefined | Promise<Principal | undefined>;
  /** Writes pending last-use times. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export interface VerifierOptions {
  staticTokens: readonly string[];
  store: PlantStore;
  cacheTtlMs?: number;
  lastUsedFlushMs?: number;
  now?: () => number;
}

interface Cached {
  record: TokenRecord | undefined;
  until: number;
}

// Past these sizes a map starts again: a flood of distinct tokens must not grow memory.
const CACHE_LIMIT = 10_000;
const REMEMBERED_LIMIT = 1_000;

export function createTokenVerifier(options: VerifierOptions): TokenVerifier {
  const { store, cacheTtlMs = 2_000, lastUsedFlushMs = 10_000, now = Date.now } = options;
  const staticDigests = options.staticTokens.map(sha256);
  const staticPrincipals = staticDigests.map((digest, index) =>
    Object.freeze({ key: principalKey(digest), name: `API_TOKENS[${index}]`, scopes: Object.freeze([ALL_SCOPES]) }),
  );
  /** Store answers by the token's hex digest, unknown tokens too: one bad token costs one lookup per TTL. */
  const cache = new Map<string, Cached>();
  const remembered = new Map<string, { principal: Principal; until: number; recordId?: number }>();
  const lastUsed = new Map<number, number>();
  const flushTimer = setInterval(() => flush().catch(() => undefined), lastUsedFlushMs).unref();

  async function flush(): Promise<void> {
    if (lastUsed.size === 0) return;
    const batch = new Map([...lastUsed].map(([id, at]) => [id, new Date(at).toISOString()]));
    lastUsed.clear();
    await store.recordTokenUse(batch);
  }

  function remember(token: string, principal: Principal, until: number, recordId?: number): Principal {
    if (remembered.size >= REMEMBERED_LIMIT) remembered.clear();
    remembered.set(token, { principal, until, ...(recordId !== undefined && { recordId }) });
    if (recordId !== undefined) lastUsed.set(recordId, now());
    return principal;
  }

  function principalOf(token: string, { record, until }: Cached, digest: Buffer): Principal | undefined {
    if (!record || tokenStatus(record, now()) !== 'active') return undefined;
    const expires = record.expiresAt === undefined ? Infinity : Date.parse(record.expiresAt);
    return remember(token, { key: principalKey(digest), name: record.name, scopes: record.scopes }, Math.min(until, expires), record.id);
  }

  function verify(token: string): Principal | undefined | Promise<Principal | undefined> {
    const hit = remembered.get(token);
    if (hit !== undefined && hit.until > now()) {
      if (hit.recordId !== undefined) lastUsed.set(hit.recordId, now());
      return hit.principal;
    }
    if (token === '') return undefined;
    const digest = sha256(token);
    const staticIndex = constantTimeIndex(staticDigests, digest);
    if (staticIndex >= 0) return remember(token, staticPrincipals[staticIndex]!, Infinity);
    // An operator may pick any static token, even one starting pst_; only issued tokens carry a checksum.
    if (!hasValidChecksum(token)) return undefined;
    const hex = digest.toString('hex');
    const cached = cache.get(hex);
    if (cached !== undefined && cached.until > now()) return principalOf(token, cached, digest);
    return store.findTokenByHash(hex).then((record) => {
      if (cache.size >= CACHE_LIMIT) cache.clear();
      const fresh = { record, until: now() + cacheTtlMs };
      cache.set(hex, fresh);
      return principalOf(token, fresh, digest);
    });
  }

  return {
    verify,
    flush,
    async close() {
      clearInterval(flushTimer);
      await flush();
    },
  };
}

/** Whether a stored token may be used at `now` (milliseconds since the epoch). */
export function tokenStatus(record: TokenRecord, now: number): 'active' | 'revoked' | 'expired' {
  if (record.revokedAt !== undefined) return 'revoked';
  if (record.expiresAt !== undefined && Date.parse(record.expiresAt) <= now) return 'expired';
  return 'active';
}

/** The Principal key a token would have, known or not: a prefix of its SHA-256. */
export function keyOfToken(token: string): string {
  return principalKey(sha256(token));
}

function principalKey(digest: Buffer): string {
  return digest.toString('hex', 0, 16);
}

// Through hex: Buffer.from takes the bytes from Node's pool, where a Buffer digest gets a backing store of its own.
function sha256(value: string): Buffer {
  return Buffer.from(hash('sha256', value, 'hex'), 'hex');
}

// Compares against every configured digest without stopping early, so timing says nothing about which matched.
function constantTimeIndex(digests: readonly Buffer[], digest: Buffer): number {
  let found = -1;
  digests.forEach((candidate, index) => {
    if (timingSafeEqual(candidate, digest) && found < 0) found = index;
  });
  return found;
}
