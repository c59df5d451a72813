// npm run generate: regenerates the types of openapi.yaml (contract/openapi-types.ts) for the server,
// src/generated/openapi.ts, and for the client package, packages/client/src/openapi.ts.
import { writeFile } from 'node:fs/promises';
import { CLIENT_TYPES_URL, renderTypes, TYPES_URL } from '../contract/openapi-types.ts';

const types = await renderTypes();
for (const url of [TYPES_URL, CLIENT_TYPES_URL]) {
  await writeFile(url, types);
  console.log(`wrote ${url.pathname}`);
}
