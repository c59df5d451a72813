// What npm run generate writes from openapi.yaml, after checking it against the OpenAPI meta-schema
// (src/contract/specification.ts): its TypeScript types (src/generated/openapi.ts, and the client
// package's copy), the JSON fields the client reads as bigint (packages/client/src/int64-fields.ts),
// derived as the server derives its operations' facts, and the parsed contract the start reads
// (src/generated/openapi.json). Each file names the sha256 of the text checked.
import { spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parse as parseYaml } from 'yaml';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { ContradictoryContractError, resolve } from '../src/contract/operation-facts.ts';
import { checkSpecification, generatedHeader } from '../src/contract/specification.ts';
import { GENERATED_CONTRACT_PATH, parseSpecification, renderGeneratedContract } from '../src/spec-path.ts';

export const SPEC_URL = new URL('../openapi.yaml', import.meta.url);
export const TYPES_URL = new URL('../src/generated/openapi.ts', import.meta.url);
export const CONTRACT_URL = pathToFileURL(GENERATED_CONTRACT_PATH);
/** The client package's own copy, so its build needs nothing outside packages/client. */
export const CLIENT_TYPES_URL = new URL('../packages/client/src/openapi.ts', import.meta.url);
/** The names under which the client reads a JSON number as bigint. */
export const CLIENT_INT64_FIELDS_URL = new URL('../packages/client/src/int64-fields.ts', import.meta.url);

/** The TypeScript source that openapi.yaml implies; int64 becomes bigint, as the JSON parser delivers it. */
export async function renderTypes(text?: string): Promise<string> {
  text ??= await readFile(SPEC_URL, 'utf8');
  await checkSpecification(parseSpecification(text));
  const ast = await openapiTS(text, {
    transform(schema) {
      if (schema.format === 'int64') return ts.factory.createKeywordTypeNode(ts.SyntaxKind.BigIntKeyword);
      return undefined;
    },
  });
  return `${generatedHeader(text)}\n\n${astToString(ast)}`;
}

/** The client's list of int64 fields, from openapi.yaml's `format: int64` properties. */
export async function renderInt64Fields(text?: string): Promise<string> {
  text ??= await readFile(SPEC_URL, 'utf8');
  const names = int64FieldNames(parseYaml(text) as object);
  return `${generatedHeader(text)}\n\n/** The JSON properties openapi.yaml declares \`format: int64\`: the client reads their numbers as bigint. */\n` +
    `export const INT64_FIELDS: readonly string[] = ${JSON.stringify(names)};\n`;
}

/** Every file npm run generate writes, with its text; throws, writing nothing, when openapi.yaml does not generate. */
export async function renderGenerated(text?: string): Promise<Map<URL, string>> {
  text ??= await readFile(SPEC_URL, 'utf8');
  const types = await renderTypes(text);
  return new Map([
    [TYPES_URL, types],
    [CLIENT_TYPES_URL, types],
    [CLIENT_INT64_FIELDS_URL, await renderInt64Fields(text)],
    [CONTRACT_URL, renderGeneratedContract(text, parseSpecification(text))],
  ]);
}

/** Writes what renderGenerated answered; answers the paths written. */
export async function writeGenerated(files: Map<URL, string>): Promise<string[]> {
  for (const [url, text] of files) {
    await mkdir(new URL('.', url), { recursive: true });
    await writeFile(url, text);
  }
  return [...files.keys()].map((url) => url.pathname);
}

/**
 * Runs the client package's own `build` script (packages/client/package.json), so that its dist/, what
 * the tests and the client's users import, follows the sources just written. Throws with the build's
 * output when it fails; `signal` stops it (a newer edit makes its answer stale).
 */
export function buildClient(signal?: AbortSignal): Promise<void> {
  // npm as it runs this script when there is one (npm run generate), else the npm on PATH.
  const [command, ...npm] = process.env.npm_execpath ? [process.execPath, process.env.npm_execpath] : ['npm'];
  const args = [...npm, 'run', '--silent', 'build', '--workspace', 'packages/client'];
  const root = fileURLToPath(new URL('..', import.meta.url));
  return new Promise((resolve, reject) => {
    const build = spawn(command!, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], signal });
    let output = '';
    build.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    build.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    build.once('error', reject);
    build.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`the client package's build failed:\n${output.trimEnd()}`))));
  });
}

/** Every property name declared `format: int64` anywhere, sorted: the client reads by name alone, so a name int64 in one place and another number elsewhere is refused. */
export function int64FieldNames(specification: object): string[] {
  const document = specification as Record<string, unknown>;
  const int64 = new Set<string>();
  const otherNumbers = new Set<string>();
  for (const [name, declared] of properties(document)) {
    const schema = resolve(document, declared);
    if (schema.format === 'int64') int64.add(name);
    else if (schema.type === 'integer' || schema.type === 'number') otherNumbers.add(name);
  }
  const clash = [...int64].find((name) => otherNumbers.has(name));
  if (clash !== undefined) {
    throw new ContradictoryContractError(
      `openapi.yaml: the property "${clash}" is int64 in one schema and another number in another; the client reads a number as bigint by its name alone, so rename one of them.`,
    );
  }
  return [...int64].sort();
}

/** Every property of every schema in the document, its name and its schema; examples left out. */
function* properties(node: unknown): Generator<[string, unknown]> {
  if (typeof node !== 'object' || node === null) return;
  const own = (node as Record<string, unknown>).properties;
  if (typeof own === 'object' && own !== null && !Array.isArray(own)) yield* Object.entries(own);
  for (const [key, child] of Object.entries(node)) if (key !== 'example' && key !== 'examples') yield* properties(child);
}
