// npm run test:quick hands tap the quick files and, for every test process, Node's compile cache in
// the service's private cache directory, so that the few hundred modules each file loads (tap's,
// Fastify's, src/'s type-stripped) are compiled once for all of them. Run with a stand-in `tap`
// on PATH that reports what it was given.
import { chmodSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import t from 'tap';
import { privateCacheDir } from '../../src/compile-cache.js';
import { runScript } from '../harness/process.ts';
import { quickTestFiles } from '../harness/quick.ts';

t.test('npm run test:quick runs tap on the quick files with a private compile cache', async (t) => {
  const bin = t.testdir();
  const standIn = join(bin, 'tap');
  writeFileSync(standIn, '#!/bin/sh\necho "cache=$NODE_COMPILE_CACHE"\necho "args=$*"\n');
  chmodSync(standIn, 0o755);
  // No cache set, as in a developer's shell.
  const env = { PATH: `${bin}${delimiter}${process.env.PATH}`, NODE_COMPILE_CACHE: '' };
  const run = await runScript(t, 'scripts/test-quick.ts', ['--bail'], env);
  t.equal(run.code, 0, run.stderr);
  const cache = privateCacheDir().dir;
  t.ok(cache, 'this user has a private cache directory');
  t.match(run.stdout, `cache=${cache}\n`, 'every test process gets the compile cache');
  t.match(run.stdout, `args=--disable-coverage ${quickTestFiles().join(' ')} --bail\n`, 'the quick files, then the arguments given');
});
