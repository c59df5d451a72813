// npm run generate: regenerates the types of openapi.yaml (contract/openapi-types.ts) for the server,
// src/generated/openapi.ts, and for the client package, packages/client/src/openapi.ts.
import { renderTypes, writeTypes } from '../contract/openapi-types.ts';

for (const path of await writeTypes(await renderTypes())) console.log(`wrote ${path}`);
