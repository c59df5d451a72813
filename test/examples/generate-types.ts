// Types for openapi-fetch from the service's own contract, every int64 typed as a bigint.
import { writeFile } from 'node:fs/promises';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';

const baseUrl = process.env.PLANT_STORE_URL ?? 'http://127.0.0.1:3000';
const ast = await openapiTS(new URL(`${baseUrl}/openapi.yaml`), {
  transform: (schema) => (schema.format === 'int64' ? ts.factory.createKeywordTypeNode(ts.SyntaxKind.BigIntKeyword) : undefined),
});
await writeFile(new URL('./plant-store.ts', import.meta.url), astToString(ast));
