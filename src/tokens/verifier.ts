// Decides whether a presented bearer token is one we issued or were configured with.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { PlantStore } from '../store/types.ts';
import { hasValidChecksum, hashToken } from './format.ts';

export interface Principal {
  /** A name for logs: never the token itself. */
  name: string;
  source: 'static' | 'stored';
}

export type TokenVerifier = (token: string) => Promise<Principal | undefined>;

export function createTokenVerifier(options: { staticTokens: readonly string[]; store: PlantStore }): TokenVerifier {
  const staticDigests = options.staticTokens.map(sha256);
  return async (token) => {
    if (token === '') return undefined;
    const staticIndex = constantTimeIndex(staticDigests, sha256(token));
    if (staticIndex >= 0) return { name: `API_TOKENS[${staticIndex}]`, source: 'static' };
    // An operator may pick any static token, even one starting pst_; only issued tokens carry a checksum.
    if (!hasValidChecksum(token)) return undefined;
    const stored = await options.store.findTokenByHash(hashToken(token));
    return stored && { name: stored.name, source: 'stored' };
  };
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

// Compares against every configured digest without stopping early, so timing says nothing about which matched.
function constantTimeIndex(digests: readonly Buffer[], digest: Buffer): number {
  let found = -1;
  digests.forEach((candidate, index) => {
    if (timingSafeEqual(candidate, digest) && found < 0) found = index;
  });
  return found;
}
