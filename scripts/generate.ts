// npm run generate: regenerates the types of openapi.yaml (contract/openapi-types.ts) for the server,
// src/generated/openapi.ts, and for the client package, packages/client/src/openapi.ts, then builds
// the client package, whose dist/ the tests import: a spec edit never leaves them a stale client.
import { buildClient, renderTypes, writeTypes } from '../contract/openapi-types.ts';

for (const path of await writeTypes(await renderTypes())) console.log(`wrote ${path}`);
try {
  await buildClient();
  console.log('built packages/client/dist');
} catch (error) {
  console.error(`generate: ${(error as Error).message}`);
  process.exitCode = 1;
}
