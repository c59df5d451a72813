// Where the contract lives, and the contract read once per process; a module of its own so that
// small entry points need not load the app.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LineCounter, parse, YAMLParseError } from 'yaml';

export const SPEC_PATH = fileURLToPath(new URL('../openapi.yaml', import.meta.url));

let text: string | undefined;
let specification: Record<string, unknown> | undefined;

/** openapi.yaml exactly as written, read on first use: what GET /openapi.yaml serves. */
export function readSpecificationText(): string {
  text ??= readFileSync(SPEC_PATH, 'utf8');
  return text;
}

/**
 * openapi.yaml cannot be read as a contract, or it and the code disagree: the message is one line that
 * names the file to change and what to change, which the start prints without a stack trace.
 */
export class SpecificationError extends Error {}

/**
 * openapi.yaml as an object, parsed on first use; an integer a double cannot hold (an int64 example
 * above 2^53) is a bigint, every digit kept. Shared: callers that change it must copy it first.
 */
export function readSpecification(): Record<string, unknown> {
  specification ??= parseSpecification(readSpecificationText());
  return specification;
}

/** A copy of the parsed contract for tools that work through JSON (which throws on a bigint): an int64 example as a double. */
export function withNumbers(value: unknown): Record<string, unknown> {
  return JSON.parse(JSON.stringify(value, (_key, item: unknown) => (typeof item === 'bigint' ? Number(item) : item))) as Record<string, unknown>;
}

/**
 * The text of openapi.yaml as an object, as readSpecification reads it: each integer a number where a
 * double holds it, a bigint beyond. Text that is no YAML is a SpecificationError.
 */
export function parseSpecification(text: string): Record<string, unknown> {
  const lineCounter = new LineCounter();
  try {
    return parse(text, exactIntegers, { intAsBigInt: true, prettyErrors: false, lineCounter }) as Record<string, unknown>;
  } catch (error) {
    if (!(error instanceof YAMLParseError)) throw error;
    const { line, col } = lineCounter.linePos(error.pos[0]);
    throw new SpecificationError(`openapi.yaml is not valid YAML: ${error.message} at line ${line}, column ${col}; fix it there.`, { cause: error });
  }
}

const exactIntegers = (_key: unknown, value: unknown) => (typeof value === 'bigint' && Number.isSafeInteger(Number(value)) ? Number(value) : value);
