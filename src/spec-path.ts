// Where the contract lives, and the contract read once per process; a module of its own so that
// small entry points need not load the app.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DEFAULT_SCHEMA, load as parseYaml, Type, types } from 'js-yaml';

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
 * openapi.yaml as an object, parsed on first use; an integer a double cannot hold (an int64 example
 * above 2^53) is a bigint, every digit kept. Shared: callers that change it must copy it first.
 */
export function readSpecification(): Record<string, unknown> {
  specification ??= parseYaml(readSpecificationText(), { schema: EXACT_SCHEMA }) as Record<string, unknown>;
  return specification;
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
