// Process entry: turns on Node's module compile cache, then runs server.ts.
// The cache (type-stripped sources and V8 code, under the system's temp directory) halves every
// start after the first, and a start whose modules all come from it never loads Node's type
// stripper, a WebAssembly compiler of 19 MB. That is why this one file is JavaScript: the entry
// is read before any cache can be on, so a TypeScript entry would load the stripper every time.
// Where the cache cannot be written, Node carries on without it.
// `npm start` runs this with `exec node ...`: npm starts its script through `sh -c`, and without
// `exec` the shell stays between npm and Node, so the signals npm forwards never reach the server.
// The default import (not `{ enableCompileCache }`) lets an older Node read this far and say so.
import nodeModule from 'node:module';

if (Number(process.versions.node.split('.')[0]) < 24) {
  process.stderr.write(`Plant Store needs Node 24 or later, not ${process.version}: run \`npm start\`, which uses the Node 24 the repository installs (npm ci).\n`);
  process.exitCode = 1;
} else {
  nodeModule.enableCompileCache();
  await import('./server.ts');
}
