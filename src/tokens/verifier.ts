// Decides whether a presented bearer token is one we issued or were configured with, and what it
// may do. Stored tokens are cached briefly, so verification rarely touches the store while
// revocation still reaches every instance within CACHE_TTL_MS; last-use times are written in
// batches every LAST_USED_FLUSH_MS, never once per request.
//
// A token is checked through its SHA-256, compared in constant time. A token that passed is then
// remembered by its text for as long as its answer may stand (a static token for good, a stored one
// until its cached record expires), so a client's next requests skip the digest. Only tokens that
// passed are remembered, so a wrong guess always takes the digest path; a lookup by text compares
// contents only after a match of the string's seeded hash.
import { hash, timingSafeEqual } from 'node:crypto';
import type { TokenRecord, TokenRepository } from '../store/types.ts';
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
  verify(token: string): Promise<Principal | undefined>;
  /**
   * The same answer without waiting, when it needs no store lookup: a static token, or a stored
   * one whose record is cached. Otherwise (and for a token that is not valid) undefined: ask verify.
   */
  verifyKnown(token: string): Principal | undefined;
  /** Writes pending last-use times; call on shutdown. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

interface CachedRecord {
  record: TokenRecord | undefined;
  /** Milliseconds since the epoch. */
  until: number;
}

export interface VerifierOptions {
  staticTokens: readonly string[];
  store: TokenRepository;
  cacheTtlMs?: number;
  lastUsedFlushMs?: number;
  now?: () => number;
}

const CACHE_TTL_MS = 2_000;
const LAST_USED_FLUSH_MS = 10_000;
const CACHE_LIMIT = 10_000;
/** Tokens remembered by their text; past it, the memory starts again (clients then pay one digest each). */
const VERIFIED_LIMIT = 1_000;

export function createTokenVerifier(options: VerifierOptions): TokenVerifier {
  const { store, cacheTtlMs = CACHE_TTL_MS, lastUsedFlushMs = LAST_USED_FLUSH_MS, now = Date.now } = options;
  const staticDigests = options.staticTokens.map(sha256);
  // Built once: a static token's principal never changes, and every request with it needs one.
  const staticPrincipals: readonly Principal[] = staticDigests.map((digest, index) =>
    Object.freeze({ key: principalKey(digest), name: `API_TOKENS[${index}]`, scopes: Object.freeze([ALL_SCOPES]) }),
  );
  const cache = new Map<string, CachedRecord>();
  const lastUsed = new Map<number, number>();
  const verified = new Map<string, { principal: Principal; until: number; recordId?: number }>();
  const flushTimer = setInterval(() => {
    flush().catch(() => undefined);
  }, lastUsedFlushMs).unref();

  async function lookUp(hash: string): Promise<CachedRecord> {
    const record = await store.findTokenByHash(hash);
    if (cache.size >= CACHE_LIMIT) cache.clear(); // a flood of distinct tokens must not grow memory
    // Unknown tokens are cached too: a flood of one bad token costs one lookup per TTL, and a
    // token created meanwhile works at most cacheTtlMs later.
    const cached = { record, until: now() + cacheTtlMs };
    cache.set(hash, cached);
    return cached;
  }

  async function flush(): Promise<void> {
    if (lastUsed.size === 0) return;
    const batch = new Map([...lastUsed].map(([id, at]) => [id, new Date(at).toISOString()]));
    lastUsed.clear();
    await store.recordTokenUse(batch);
  }

  // What is known without the store: a static token's principal, an answer that needs no lookup
  // (no checksum), or the cached record of a stored token; otherwise the digest to look up.
  function knownAnswer(token: string): Principal | undefined | { lookUp: string; digest: Buffer } {
    if (token === '') return undefined;
    const digest = sha256(token);
    const staticIndex = constantTimeIndex(staticDigests, digest);
    if (staticIndex >= 0) return remember(token, staticPrincipals[staticIndex]!, Infinity);
    // An operator may pick any static token, even one starting pst_; only issued tokens carry a checksum.
    if (!hasValidChecksum(token)) return undefined;
    const hex = digest.toString('hex');
    const cached = cache.get(hex);
    return cached && cached.until > now() ? principalOf(token, cached, digest) : { lookUp: hex, digest };
  }

  function principalOf(token: string, cached: CachedRecord, digest: Buffer): Principal | undefined {
    const { record } = cached;
    if (!record || tokenStatus(record, now()) !== 'active') return undefined;
    lastUsed.set(record.id, now());
    const principal = { key: principalKey(digest), name: record.name, scopes: record.scopes };
    const expires = record.expiresAt === undefined ? Infinity : Date.parse(record.expiresAt);
    return remember(token, principal, Math.min(cached.until, expires), record.id);
  }

  function remember(token: string, principal: Principal, until: number, recordId?: number): Principal {
    if (verified.size >= VERIFIED_LIMIT) verified.clear();
    verified.set(token, { principal, until, ...(recordId !== undefined && { recordId }) });
    return principal;
  }

  // A remembered token's principal, or what knownAnswer says.
  function check(token: string): ReturnType<typeof knownAnswer> {
    const hit = verified.get(token);
    if (hit === undefined || hit.until <= now()) return knownAnswer(token);
    if (hit.recordId !== undefined) lastUsed.set(hit.recordId, now());
    return hit.principal;
  }

  return {
    async verify(token) {
      const known = check(token);
      if (known === undefined || !('lookUp' in known)) return known;
      return principalOf(token, await lookUp(known.lookUp), known.digest);
    },
    verifyKnown(token) {
      const known = check(token);
      return known === undefined || 'lookUp' in known ? undefined : known;
    },
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
