// npm run generate: regenerates what openapi.yaml implies (contract/openapi-types.ts): its types for the
// server, src/generated/openapi.ts, and for the client package, packages/client/src/openapi.ts, and the
// client's int64 fields, packages/client/src/int64-fields.ts.
import { renderGenerated, writeGenerated } from '../contract/openapi-types.ts';

for (const path of await writeGenerated(await renderGenerated())) console.log(`wrote ${path}`);
