// npm run generate: regenerates src/generated/openapi.ts from openapi.yaml (contract/openapi-types.ts).
import { writeFile } from 'node:fs/promises';
import { renderTypes, TYPES_URL } from '../contract/openapi-types.ts';

await writeFile(TYPES_URL, await renderTypes());
console.log(`wrote ${TYPES_URL.pathname}`);
