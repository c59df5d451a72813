// Process entry: turns on Node's module compile cache, then runs server.ts.
// The cache (type-stripped sources and V8 code, in a directory only this user can write: see
// compile-cache.js) halves every start after the first, and a start whose modules all come from it never loads Node's type
// stripper, a WebAssembly compiler of 19 MB. That is why this one file is JavaScript: the entry
// is read before any cache can be on, so a TypeScript entry would load the stripper every time.
// Where no such directory can be had, or Node cannot write it, the service starts without a cache.
// `npm start` runs this with `exec node ...`: npm starts its script through `sh -c`, and without
// `exec` the shell stays between npm and Node, so the signals npm forwards never reach the server.
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
