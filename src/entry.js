// Process entry: turns on Node's compile cache, then runs server.ts. JavaScript, because the entry is read
// before any cache is on: a TypeScript one would load Node's type stripper at every start (docs/performance.md, "Start").
// `npm start` runs it with `exec`, so that the signals npm forwards reach Node rather than a shell between them.
// The default import (not `{ enableCompileCache }`) lets an older Node read this far and say so.
import nodeModule from 'node:module';
import { privateCacheDir } from './compile-cache.js';

if (Number(process.versions.node.split('.')[0]) < 24) {
  process.stderr.write(`Plant Store needs Node 24 or later, not ${process.version}: run \`npm start\`, which uses the Node 24 the repository installs (npm ci).\n`);
  process.exitCode = 1;
} else {
  const cache = privateCacheDir();
  if (cache.dir) nodeModule.enableCompileCache(cache.dir);
  else if (cache.refused) process.emitWarning(`compile cache off: ${cache.refused}; remove it, or start as its owner`);
  await import('./server.ts');
}
