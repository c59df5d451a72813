// npm run test:quick: tap on the in-process test files only (the rule is in test/harness/quick.ts),
// without coverage; npm test runs them all. Further arguments go to tap.
// Each test file is a process of its own that loads the same few hundred modules (tap's, Fastify's,
// src/'s type-stripped): Node's compile cache, in the directory the server uses (one only this user
// can write: src/compile-cache.js), compiles each once for all of them.
import { spawn } from 'node:child_process';
import { privateCacheDir } from '../src/compile-cache.js';
import { quickTestFiles } from '../test/harness/quick.ts';
import { REPO_ROOT } from '../test/harness/paths.ts';

const cache = process.env.NODE_COMPILE_CACHE ? {} : privateCacheDir();
const env = cache.dir ? { ...process.env, NODE_COMPILE_CACHE: cache.dir } : process.env;
const tap = spawn('tap', ['--disable-coverage', ...quickTestFiles(), ...process.argv.slice(2)], { cwd: REPO_ROOT, stdio: 'inherit', env });
tap.once('error', (error) => {
  console.error(`test:quick: could not run tap (run it through npm run test:quick): ${error.message}`);
  process.exitCode = 1;
});
tap.once('close', (code, signal) => (process.exitCode = code ?? (signal ? 1 : 0)));
