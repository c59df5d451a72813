// npm run compat: exits 1, naming each change, when openapi.yaml would break a client generated from
// the published contract (the check is contract/compatibility.ts).
import { checkFiles } from '../contract/compatibility.ts';

const problems = await checkFiles();
if (problems.length === 0) console.log('openapi.yaml keeps every promise of contract/published-1.0.0.yaml');
else {
  console.error(`openapi.yaml would break clients of the published 1.0.0 contract:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  process.exitCode = 1;
}
