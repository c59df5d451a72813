// Where the contract lives, and the contract read once per process; a module of its own so that
// small entry points need not load the app.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { load as parseYaml } from 'js-yaml';

export const SPEC_PATH = fileURLToPath(new URL('../openapi.yaml', import.meta.url));

let text: string | undefined;
// js-yaml rather than yaml: it reads the contract in a sixth of the time, which counts at every start.
let specification: Record<string, unknown> | undefined;

/** openapi.yaml exactly as written, read on first use: what GET /openapi.yaml serves. */
export function readSpecificationText(): string {
  text ??= readFileSync(SPEC_PATH, 'utf8');
  return text;
}

/** openapi.yaml as an object, parsed on first use. Shared: callers that change it must copy it first. */
export function readSpecification(): Record<string, unknown> {
  specification ??= parseYaml(readSpecificationText()) as Record<string, unknown>;
  return specification;
}
