// Whether a token is valid and what it may do: checked by its SHA-256, then answered by its text while that
// stands (a static token's for good, the store's for CACHE_TTL_MS: revocation reaches every instance that soon).
import { timingSafeEqual } from 'node:crypto';
import type { TokenRecord, TokenRepository } from '../store/types.ts';
import { hasValidChecksum, hashToken } from './format.ts';

export interface Principal {
  /** Stable key for per-token rate limits, the same on every instance: a prefix of the token's SHA-256. */
  key: string;
  /** A name for logs: never the token itself. */
  name: string;
  scopes: readonly string[];
}

export interface VerifierOptions {
  staticTokens: readonly string[];
  store: TokenRepository;
  now?: () => number;
}

/** Past it the answers start again: a flood of distinct tokens must not grow memory. */
const ANSWERS_LIMIT = 10_000;
const CACHE_TTL_MS = 2_000;

export type TokenVerifier = ReturnType<typeof createTokenVerifier>;

export function createTokenVerifier(options: VerifierOptions) {
  const { store, now = Date.now } = options;
  const staticDigests = options.staticTokens.map((token) => Buffer.from(hashToken(token), 'hex'));
  const staticPrincipals = options.staticTokens.map((token, index) =>
    Object.freeze({ key: keyOfToken(token), name: `API_TOKENS[${index}]`, scopes: Object.freeze([ALL_SCOPES]) }),
  );
  // Unknown tokens too: a flood of one bad token costs one store lookup per CACHE_TTL_MS.
  const answers = new Map<string, { principal: Principal | undefined; until: number; recordId?: number }>();
  const lastUsed = new Map<number, number>();
  const flushTimer = setInterval(() => flush().catch(() => undefined), 10_000).unref();

  // Last-use times are written in batches, never once per request.
  async function flush(): Promise<void> {
    if (lastUsed.size === 0) return;
    const batch = new Map([...lastUsed].map(([id, at]) => [id, new Date(at).toISOString()]));
    lastUsed.clear();
    await store.recordTokenUse(batch);
  }

  function answer(token: string, principal: Principal | undefined, until: number, recordId?: number): Principal | undefined {
    if (answers.size >= ANSWERS_LIMIT) answers.clear();
    answers.set(token, { principal, until, ...(recordId !== undefined && { recordId }) });
    if (recordId !== undefined) lastUsed.set(recordId, now());
    return principal;
  }

  /** The token's principal, or undefined when it is not valid; a promise only when the store must be asked. */
  function verify(token: string): Principal | undefined | Promise<Principal | undefined> {
    const known = answers.get(token);
    if (known !== undefined && known.until > now()) {
      if (known.recordId !== undefined) lastUsed.set(known.recordId, now());
      return known.principal;
    }
    if (token === '') return undefined;
    const hex = hashToken(token);
    const digest = Buffer.from(hex, 'hex');
    // Every static digest is compared, none skipped, so timing says nothing of which matched.
    const staticIndex = staticDigests.reduce((found, each, index) => (timingSafeEqual(each, digest) && found < 0 ? index : found), -1);
    if (staticIndex >= 0) return answer(token, staticPrincipals[staticIndex], Infinity);
    // An operator may pick any static token, even one starting pst_; only issued tokens carry a checksum.
    if (!hasValidChecksum(token)) return undefined;
    return store.findTokenByHash(hex).then((record) => {
      const until = now() + CACHE_TTL_MS;
      if (!record || tokenStatus(record, now()) !== 'active') return answer(token, undefined, until);
      const expires = record.expiresAt === undefined ? Infinity : Date.parse(record.expiresAt);
      return answer(token, { key: keyOfToken(token), name: record.name, scopes: record.scopes }, Math.min(until, expires), record.id);
    });
  }

  const close = () => {
    clearInterval(flushTimer);
    return flush();
  };
  return { verify, flush, close };
}

/** Granted to static tokens and the first-start token: every scope, present and future. */
export const ALL_SCOPES = '*';

export function missingScopes(granted: readonly string[], required: readonly string[]): string[] {
  return granted.includes(ALL_SCOPES) ? [] : required.filter((scope) => !granted.includes(scope));
}

/** Whether a stored token may be used at `now` (milliseconds since the epoch). */
export function tokenStatus(record: TokenRecord, now: number): 'active' | 'revoked' | 'expired' {
  if (record.revokedAt !== undefined) return 'revoked';
  if (record.expiresAt !== undefined && Date.parse(record.expiresAt) <= now) return 'expired';
  return 'active';
}

/** The Principal key a token would have, known or not: a prefix of its SHA-256. */
export function keyOfToken(token: string): string {
  return hashToken(token).slice(0, 32);
}
