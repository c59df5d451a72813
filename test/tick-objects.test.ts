// src/tick-objects.js keeps nextTick's tick-object maps alive, so that a full GC while no tick is
// pending cannot turn the inline caches of nextTick's literal megamorphic (V8's runtime on every
// nextTick from then on). Checked on V8's own record of those caches (%DebugPrint), not on timings.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { serverEnv, startServer } from './harness/process.ts';

const PROBE = join(import.meta.dirname, 'fixtures', 'next-tick-feedback.mjs');

t.test('a full GC while the server is idle leaves nextTick\'s tick-object caches monomorphic', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tick-objects-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // --max-opt=1: no optimizing compiler, whose code would also hold the maps (and hide the GC's
  // effect until that code is dropped). Without tap's preload (its coverage module, which tap adds to
  // NODE_OPTIONS of every child, even one given its own): its ticks run before any line of ours and
  // leave nextTick megamorphic whatever we do (see tick-objects.js); production starts without it.
  const server = await startServer(t, serverEnv(dir), {
    command: ['env', '-u', 'NODE_OPTIONS', process.execPath, '--max-opt=1', '--expose-gc', '--allow-natives-syntax', '--import', PROBE, 'src/entry.js'],
  });
  await requests(server.url, 50);
  server.child.kill('SIGUSR2');
  await server.waitFor('stdout', /^full GCs done$/m);
  await requests(server.url, 50);
  server.child.kill('SIGHUP');
  await server.exited;
  t.match(server.stdout(), /^nextTick feedback printed$/m, 'the server printed its feedback whole');

  const states = [...server.stdout().matchAll(/slot #\d+ DefineKeyedOwnPropertyInLiteral (\w+)/g)].map((match) => match[1]);
  // The five keys of `{ [async_id_symbol], [trigger_async_id_symbol], [async_context_frame], callback, args }`.
  t.equal(states.length, 5, 'nextTick has its feedback, with the five steps of the tick-object literal');
  t.same(states, Array(5).fill('MONOMORPHIC'), 'every step still sees the one map it saw before the GC');
});

async function requests(url: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await (await fetch(`${url}/healthz`)).arrayBuffer();
}
