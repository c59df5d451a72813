// Where the contract lives, and the contract read once per process; its own module, so small entry points need not load the app.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LineCounter, parse, YAMLParseError } from 'yaml';

export const SPEC_PATH = fileURLToPath(new URL('../openapi.yaml', import.meta.url));

let text: string | undefined;
let specification: Record<string, unknown> | undefined;

/** openapi.yaml exactly as written, read on first use: what GET /openapi.yaml serves. */
export function readSpecificationText(): string {
  return (text ??= readFileSync(SPEC_PATH, 'utf8'));
}

/** openapi.yaml cannot be read as a contract, or it and the code disagree: a one-line message naming what to change, printed without a stack. */
export class SpecificationError extends Error {}

/** openapi.yaml as an object, parsed on first use (see parseSpecification); shared: callers that change it copy it first. */
export function readSpecification(): Record<string, unknown> {
  return (specification ??= parseSpecification(readSpecificationText()));
}

/** A copy of the parsed contract for tools that work through JSON (which throws on a bigint): an int64 example as a double. */
export function withNumbers(value: unknown): Record<string, unknown> {
  return JSON.parse(JSON.stringify(value, (_key, item: unknown) => (typeof item === 'bigint' ? Number(item) : item))) as Record<string, unknown>;
}

/** openapi.yaml's text as an object: each integer a number where a double holds it, a bigint beyond; text that is no YAML is a SpecificationError. */
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
