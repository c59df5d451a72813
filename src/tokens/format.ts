// Issued tokens: `pst_`, 43 base62 characters of 32 random bytes, 6 of their CRC-32. The prefix lets secret
// scanners spot a leak; the checksum refuses a mistyped token without a store lookup.
import { hash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

const TOKEN_PREFIX = 'pst_';
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
const ISSUED_TOKEN = new RegExp(`^${TOKEN_PREFIX}[0-9A-Za-z]{${SECRET_LENGTH + CHECKSUM_LENGTH}}$`);

export function generateToken(): string {
  const secret = base62(BigInt(`0x${randomBytes(32).toString('hex')}`), SECRET_LENGTH);
  return `${TOKEN_PREFIX}${secret}${checksum(secret)}`;
}

/** False for a `pst_` token whose checksum does not match (a typo); true for every other string. */
export function hasValidChecksum(token: string): boolean {
  if (!token.startsWith(TOKEN_PREFIX)) return true;
  if (!ISSUED_TOKEN.test(token)) return false;
  const secret = token.slice(TOKEN_PREFIX.length, TOKEN_PREFIX.length + SECRET_LENGTH);
  return token.endsWith(checksum(secret));
}

/** What the store keeps instead of the token. */
export function hashToken(token: string): string {
  return hash('sha256', token, 'hex');
}

/** Enough to recognise a token in a list, never enough to use it. */
export function tokenHint(token: string): string {
  return `${token.slice(0, TOKEN_PREFIX.length)}…${token.slice(-4)}`;
}

function checksum(secret: string): string {
  return base62(BigInt(crc32(secret)), CHECKSUM_LENGTH);
}

function base62(value: bigint, width: number): string {
  let digits = '';
  for (let rest = value; rest > 0n; rest /= 62n) digits = ALPHABET[Number(rest % 62n)] + digits;
  return digits.padStart(width, '0');
}
