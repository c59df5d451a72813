// Where the contract lives, and the contract read once per process; its own module, so small entry points need not load the app.
import { hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LineCounter, parse, YAMLParseError } from 'yaml';
import { exactJson, INTEGER_TEXT } from './int64.ts';

export const SPEC_PATH = fileURLToPath(new URL('../openapi.yaml', import.meta.url));
/** openapi.yaml as npm run generate parsed and checked it, with the sha256 of the text it read. */
export const GENERATED_CONTRACT_PATH = fileURLToPath(new URL('./generated/openapi.json', import.meta.url));

export interface GeneratedContract {
  sha256: string;
  document: Record<string, unknown>;
}

let text: string | undefined;
let contract: { document: Record<string, unknown>; generated: boolean } | undefined;

/** openapi.yaml exactly as written, read on first use: what GET /openapi.yaml serves. */
export function readSpecificationText(): string {
  return (text ??= readFileSync(SPEC_PATH, 'utf8'));
}

/** openapi.yaml cannot be read as a contract, or it and the code disagree: a one-line message naming what to change, printed without a stack. */
export class SpecificationError extends Error {}

/** openapi.yaml as an object, read on first use (see readContract); shared: callers that change it copy it first. */
export function readSpecification(): Record<string, unknown> {
  return readContract().document;
}

/** Whether npm run generate parsed and checked this very openapi.yaml text, so that a start need not check it again. */
export function checkedByGenerate(): boolean {
  return readContract().generated;
}

// Parsing the YAML costs a start several times what reading generate's JSON does (docs/performance.md, "Start").
function readContract(): { document: Record<string, unknown>; generated: boolean } {
  if (contract !== undefined) return contract;
  const written = readSpecificationText();
  const generated = readGeneratedContract();
  if (generated?.sha256 === specificationHash(written)) return (contract = { document: generated.document, generated: true });
  return (contract = { document: parseSpecification(written), generated: false });
}

function readGeneratedContract(): GeneratedContract | undefined {
  try {
    return JSON.parse(readFileSync(GENERATED_CONTRACT_PATH, 'utf8'), beyondDoubles) as GeneratedContract;
  } catch {
    return undefined;
  }
}

/** The sha256 of openapi.yaml's text, which every file npm run generate writes names. */
export function specificationHash(text: string): string {
  return hash('sha256', text);
}

/** What npm run generate writes to GENERATED_CONTRACT_PATH: the parsed contract, each bigint digit for digit. */
export function renderGeneratedContract(text: string, document: Record<string, unknown>): string {
  const contract: GeneratedContract = { sha256: specificationHash(text), document };
  return `${exactJson(contract, 2)}\n`;
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

// The same integers read back from JSON: a bigint where a double would not hold the literal.
function beyondDoubles(_key: string, value: unknown, context?: { source?: string }): unknown {
  const source = context?.source;
  return typeof value === 'number' && !Number.isSafeInteger(value) && source !== undefined && INTEGER_TEXT.test(source) ? BigInt(source) : value;
}
