// Where any of many fixed strings occurs in a text, in one pass whatever their number (Rabin-Karp): for long API_TOKENS lists.

/** [start, end) of a text. */
export type Span = [number, number];

// Any odd multiplier spreads the characters over the 32-bit hash; this is FNV's.
const BASE = 0x01000193;
const PLUS = 0x2b;
const SPACE = 0x20;

/** Every occurrence of these non-empty strings, overlapping ones too; `+` and space count as one character, as the query parser reads them. */
export function literalSearch(literals: readonly string[]): (text: string) => Span[] {
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
