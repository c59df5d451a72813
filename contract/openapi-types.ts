// The TypeScript types of openapi.yaml (src/generated/openapi.ts, written by npm run generate), after
// checking it against the OpenAPI meta-schema (src/contract/specification.ts); their first line names the text checked.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { checkSpecification, generatedHeader } from '../src/contract/specification.ts';

export const SPEC_URL = new URL('../openapi.yaml', import.meta.url);
export const TYPES_URL = new URL('../src/generated/openapi.ts', import.meta.url);
/** The client package's own copy, so its build needs nothing outside packages/client. */
export const CLIENT_TYPES_URL = new URL('../packages/client/src/openapi.ts', import.meta.url);

/** The TypeScript source that openapi.yaml implies; int64 becomes bigint, as the JSON parser delivers it. */
export async function renderTypes(text?: string): Promise<string> {
  text ??= await readFile(SPEC_URL, 'utf8');
  await checkSpecification(text);
  const ast = await openapiTS(text, {
    transform(schema) {
      if (schema.format === 'int64') return ts.factory.createKeywordTypeNode(ts.SyntaxKind.BigIntKeyword);
      return undefined;
    },
  });
  return `${generatedHeader(text)}\n\n${astToString(ast)}`;
}

/** Writes the types for the server and the client package's copy; answers the paths written. */
export async function writeTypes(types: string): Promise<string[]> {
  const urls = [TYPES_URL, CLIENT_TYPES_URL];
  for (const url of urls) {
    await mkdir(new URL('.', url), { recursive: true });
    await writeFile(url, types);
  }
  return urls.map((url) => url.pathname);
}
