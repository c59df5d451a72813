// Where the contract lives, and the contract read once per process; a module of its own so that
// small entry points need not load the app.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DEFAULT_SCHEMA, load as parseYaml, Type, types, YAMLException } from 'js-yaml';

export const SPEC_PATH = fileURLToPath(new URL('../openapi.yaml', import.meta.url));

let text: string | undefined;
// js-yaml rather than yaml: it reads the contract in a sixth of the time, which counts at every start.
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

/** The text of openapi.yaml as an object, as readSpecification reads it; text that is no YAML is a SpecificationError. */
export function parseSpecification(text: string): Record<string, unknown> {
  try {
    return parseYaml(text, { schema: EXACT_SCHEMA }) as Record<string, unknown>;
  } catch (error) {
    if (!(error instanceof YAMLException) || !error.mark) throw error;
    // js-yaml's own message quotes the lines around the mark: one line says as much.
    const { line, column } = error.mark;
    throw new SpecificationError(`openapi.yaml is not valid YAML: ${error.reason} at line ${line + 1}, column ${column + 1}; fix it there.`, { cause: error });
  }
}

// js-yaml's own integer, except that one beyond Number.MAX_SAFE_INTEGER is read as a bigint rather
// than rounded; extend() puts it in the place of the integer type it replaces.
const exactInteger = new Type('tag:yaml.org,2002:int', {
  ...types.int.options,
  construct: (data: string): number | bigint => {
    const value = types.int.construct(data) as number;
    return Number.isSafeInteger(value) ? value : bigIntOf(data);
  },
});

const EXACT_SCHEMA = DEFAULT_SCHEMA.extend({ implicit: [exactInteger] });

/** A YAML 1.2 integer (sign, 0x/0o/0b, underscores) as a bigint. */
function bigIntOf(data: string): bigint {
  const plain = data.replaceAll('_', '');
  const magnitude = BigInt(plain.replace(/^[-+]/, ''));
  return plain.startsWith('-') ? -magnitude : magnitude;
}
