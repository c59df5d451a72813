// The one rule for what logs, request ids and spans may show of a text: no token, however spelled or percent-encoded.
import { TOKEN_CHARACTER, TOKEN_PREFIX } from '../tokens/format.ts';

/** The text with every token in it replaced by REDACTED. */
export type Redact = (text: string) => string;

export const REDACTED = '[redacted]';

/** [start, end) of a text. */
type Span = [number, number];

// Issued tokens by their shape, no list needed; even cut short, since 20 characters are most of a secret.
const ISSUED_TOKEN_LENGTH = TOKEN_PREFIX.length + 20;
const ISSUED_TOKEN = new RegExp(`${TOKEN_PREFIX}${TOKEN_CHARACTER}{20,}`, 'g');
// Not `?`: within a query it is data, and a token may hold one.
const SEPARATOR = /([&;])/;
// The name may end a longer text ("… access_token=…"); `+` is a space to the query parser.
const ACCESS_TOKEN_NAME = /(?:^|[^0-9a-z_])access_token$/i;
const ACCESS_TOKEN = /access_token/i;
const ACCESS_TOKEN_PARAMETER_LENGTH = 'access_token=x'.length;

/** Replaces each stretch that is, or percent-decodes to, a configured or issued-shaped token, and each access_token parameter's value. */
export function createRedaction(staticTokens: readonly string[]): Redact {
  const forms = [...new Set(staticTokens.flatMap((token) => [token, decodedFully(token)]))];
  const find = tokenFinder(forms);
  // Shorter texts (a short path, a host, an address) hold neither a token nor a value named access_token.
  const shortest = Math.min(ISSUED_TOKEN_LENGTH, ACCESS_TOKEN_PARAMETER_LENGTH, ...forms.map((form) => form.length));
  return (text) => {
    if (text.length < shortest) return text;
    // Decoded once for both rules; a parameter name can decode to access_token only if the whole text does.
    const decoded = decodedFully(text);
    if (!text.includes('=') || !ACCESS_TOKEN.test(decoded)) return withoutTokens(text, decoded, find);
    const named = withoutAccessTokenValues(text);
    return withoutTokens(named, decodedFully(named), find);
  };
}

/** Where configured tokens (as sent, and decoded: one holding %41 decodes further) and issued-shaped ones are in a text. */
function tokenFinder(forms: readonly string[]): (text: string) => Span[] {
  const search = literalSearch(forms);
  return (text) => {
    const found = search(text);
    if (text.includes(TOKEN_PREFIX)) for (const match of text.matchAll(ISSUED_TOKEN)) found.push([match.index, match.index + match[0].length]);
    return found;
  };
}

function withoutTokens(text: string, decoded: string, find: (text: string) => Span[]): string {
  const spans = decoded === text ? find(text) : [...find(text), ...sourcesOf(text, find(decoded))];
  return spans.length === 0 ? text : replaced(text, spans);
}

function replaced(text: string, spans: Span[]): string {
  spans.sort((a, b) => a[0] - b[0]);
  let result = '';
  let done = 0;
  for (const [start, end] of spans) {
    // Found twice (as sent and decoded) or overlapping: one marker for the whole stretch.
    if (start < done) {
      done = Math.max(done, end);
      continue;
    }
    result += `${text.slice(done, start)}${REDACTED}`;
    done = end;
  }
  return result + text.slice(done);
}

// The path, then the query after the first `?`, each split into parameters at `&` and `;`.
function withoutAccessTokenValues(text: string): string {
  const start = text.indexOf('?');
  const parts = start === -1 ? [text] : [text.slice(0, start), text.slice(start + 1)];
  return parts.map((part) => part.split(SEPARATOR).map(redactParameter).join('')).join('?');
}

function redactParameter(parameter: string): string {
  const equals = parameter.indexOf('=');
  return equals !== -1 && isAccessTokenName(parameter.slice(0, equals)) ? `${parameter.slice(0, equals)}=${REDACTED}` : parameter;
}

function isAccessTokenName(name: string): boolean {
  return ACCESS_TOKEN_NAME.test(decodedFully(name.replaceAll('+', ' ')).trim());
}

const PERCENT = 0x25;
const ESCAPE = /%[0-9a-f]{2}/i;

// The text percent-decoded until no %XX is left (%252541 → A), in one pass whatever the depth, each byte as its Latin-1
// character (tokens are ASCII; bad UTF-8 must not stop a log line); `starts` gets where each decoded character begins.
function decodedFully(text: string, starts?: number[]): string {
  // What comes before the first escape decodes to itself.
  const first = text.search(ESCAPE);
  if (first === -1) return text;
  if (starts) for (let index = 0; index < first; index++) starts.push(index);
  // A stack of decoded characters: codes[0 .. top) is the decoding of what has been read.
  const codes: number[] = [];
  let top = 0;
  for (let index = first; index < text.length; index++) {
    if (starts) starts[first + top] = index;
    codes[top++] = text.charCodeAt(index);
    while (top >= 3 && codes[top - 3] === PERCENT && isHex(codes[top - 2]!) && isHex(codes[top - 1]!)) {
      codes[top - 3] = hexValue(codes[top - 2]!) * 16 + hexValue(codes[top - 1]!);
      top -= 2;
    }
  }
  if (starts) starts.length = first + top;
  let decoded = text.slice(0, first);
  // In slices: a call takes only so many arguments.
  for (let from = 0; from < top; from += 4096) decoded += String.fromCharCode(...codes.slice(from, Math.min(top, from + 4096)));
  return decoded;
}

/** Where spans of the text's full decoding came from in the text; worked out only for what was found. */
function sourcesOf(text: string, spans: Span[]): Span[] {
  if (spans.length === 0) return spans;
  const starts: number[] = [];
  decodedFully(text, starts);
  const startOf = (at: number) => (at < starts.length ? starts[at]! : text.length);
  return spans.map(([start, end]) => [startOf(start), startOf(end)]);
}

function isHex(code: number): boolean {
  return (code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x46) || (code >= 0x61 && code <= 0x66);
}

function hexValue(code: number): number {
  return code <= 0x39 ? code - 0x30 : (code | 0x20) - 0x61 + 10;
}


// Any odd multiplier spreads the characters over the 32-bit hash; this is FNV's.
const BASE = 0x01000193;
const PLUS = 0x2b;
const SPACE = 0x20;

// Every occurrence of these strings, overlapping ones too, in one pass whatever their number (Rabin-Karp): for long API_TOKENS
// lists. `+` and space count as one character, as the query parser reads them.
function literalSearch(literals: readonly string[]): (text: string) => Span[] {
  if (literals.length === 0) return () => [];
  // Each window as long as the shortest string is hashed; a string is checked only where the hash of its first window is.
  const width = Math.min(...literals.map((literal) => literal.length));
  const leading = power(width - 1);
  const candidates = new Map<number, string[]>();
  for (const literal of literals) {
    const hash = hashOf(literal, width);
    candidates.set(hash, [...(candidates.get(hash) ?? []), literal]);
  }
  // A table of the hashes' low 16 bits, so most windows cost no Map lookup.
  const maybe = new Uint8Array(1 << 16);
  for (const hash of candidates.keys()) maybe[hash & 0xffff] = 1;

  return (text) => {
    const found: Span[] = [];
    if (text.length < width) return found;
    let hash = hashOf(text, width);
    for (let start = 0; ; start++) {
      if (maybe[hash & 0xffff] === 1) {
        for (const literal of candidates.get(hash) ?? []) if (occursAt(text, start, literal)) found.push([start, start + literal.length]);
      }
      if (start + width >= text.length) return found;
      hash = (Math.imul(hash - Math.imul(code(text, start), leading), BASE) + code(text, start + width)) | 0;
    }
  };
}

function code(text: string, index: number): number {
  const value = text.charCodeAt(index);
  return value === SPACE ? PLUS : value;
}

function hashOf(text: string, width: number): number {
  let hash = 0;
  for (let index = 0; index < width; index++) hash = (Math.imul(hash, BASE) + code(text, index)) | 0;
  return hash;
}

function power(exponent: number): number {
  let result = 1;
  for (let round = 0; round < exponent; round++) result = Math.imul(result, BASE);
  return result;
}

function occursAt(text: string, start: number, literal: string): boolean {
  if (start + literal.length > text.length) return false;
  for (let index = 0; index < literal.length; index++) if (code(text, start + index) !== code(literal, index)) return false;
  return true;
}
