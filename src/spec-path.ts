// Where the contract lives, and the contract read once per process; a module of its own so that
// small entry points need not load the app.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const SPEC_PATH = fileURLToPath(new URL('../openapi.yaml', import.meta.url));

let text: string | undefined;
let specification: Record<string, unknown> | undefined;

/** openapi.yaml exactly as written, read on first use: what GET /openapi.yaml serves. */
export function readSpecificationText(): string {
  text ??= readFileSync(SPEC_PATH, 'utf8');
  return text;
}

/**
 * openapi.yaml as an object, parsed on first use; an integer a double cannot hold (an int64 example
 * above 2^53) is a bigint, every digit kept. Shared: callers that change it must copy it first.
 */
export function readSpecification(): Record<string, unknown> {
  specification ??= parseExact(readSpecificationText()) as Record<string, unknown>;
  return specification;
}

/** YAML with every integer read exactly: a number where a double holds it, a bigint beyond. */
export function parseExact(yaml: string): unknown {
  return parse(yaml, (_key, value) => (typeof value === 'bigint' && Number.isSafeInteger(Number(value)) ? Number(value) : value), { intAsBigInt: true });
}
