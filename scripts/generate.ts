// npm run generate: regenerates what openapi.yaml implies (contract/openapi-types.ts): its types for the
// server, src/generated/openapi.ts, and for the client package, packages/client/src/openapi.ts, and the
// client's int64 fields, packages/client/src/int64-fields.ts; then builds the client package, whose
// dist/ the tests import: a spec edit never leaves them a stale client.
import { buildClient, renderGenerated, writeGenerated } from '../contract/openapi-types.ts';

for (const path of await writeGenerated(await renderGenerated())) console.log(`wrote ${path}`);
try {
  await buildClient();
  console.log('built packages/client/dist');
} catch (error) {
  console.error(`generate: ${(error as Error).message}`);
  process.exitCode = 1;
}
