// Zero-configuration start: with no token anywhere, create one so a newcomer can call the API.
import type { TokenRepository } from '../store/types.ts';
import { generateToken, hashToken, tokenHint } from './format.ts';

export const FIRST_TOKEN_NAME = 'first-start';

/** The new token when this call created it; undefined when tokens exist or API_TOKENS is set. */
export async function ensureFirstToken(store: TokenRepository, staticTokens: readonly string[]): Promise<string | undefined> {
  if (staticTokens.length > 0) return undefined;
  const token = generateToken();
  const created = await store.createFirstToken({ name: FIRST_TOKEN_NAME, hash: hashToken(token), hint: tokenHint(token) });
  return created ? token : undefined;
}
