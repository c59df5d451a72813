// npm run dev in a scratch copy of the repository, the spec editor's loop: an edit to openapi.yaml
// regenerates the types and then restarts the server at once (never waiting out SHUTDOWN_DELAY),
// rebuilds the client package and runs the type check beside it; a plant field the store does not
// keep shows the type check's errors and the server's refusal; stopping it leaves no server behind.
// Edits under src/: test/system/dev-source.test.ts.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { devEnv, LISTENING, REGENERATED, startDev, stopping, TYPECHECKED } from '../harness/dev.ts';
import { isRunning } from '../harness/process.ts';
import { copyRepository } from '../harness/scratch.ts';

// Two type checks of the whole project, 10 to 40 s each on two busy cores, besides the restarts.
t.setTimeout(240_000);

t.test('npm run dev regenerates the types and restarts at once on changes to openapi.yaml', async (t) => {
  const dir = copyRepository(t.testdir());
  const dev = startDev(t, dir, devEnv(dir));

  const first = await dev.nth(LISTENING, 1);
  const typesPath = join(dir, 'src/generated/openapi.ts');
  t.notMatch(readFileSync(typesPath, 'utf8'), /Read one plant/);

  const specPath = join(dir, 'openapi.yaml');
  writeFileSync(specPath, readFileSync(specPath, 'utf8').replace('summary: Read a plant', 'summary: Read one plant'));
  const regenerated = await dev.nth(REGENERATED, 1);
  const second = await dev.nth(LISTENING, 2);
  t.not(second[1], first[1], 'a new server process');
  t.ok(regenerated.index < second.index, 'the types were regenerated before the restart');
  t.equal(stopping(first[1]!).exec(dev.output())?.[1], 'SIGINT', 'the old server was stopped as by Ctrl-C: at once, not after SHUTDOWN_DELAY (1 h here)');
  t.notMatch(dev.output(), /"msg":"draining/, 'no restart drained');
  t.match(readFileSync(typesPath, 'utf8'), /Read one plant/, 'src/generated/openapi.ts follows openapi.yaml');
  const served = await (await fetch(`${second[2]}/openapi.yaml`)).text();
  t.match(served, /summary: Read one plant/, 'the restarted server serves the edited contract');

  t.equal((await dev.nth(TYPECHECKED, 1))[1], 'no errors', 'the type check ran after the regeneration, and passed');
  t.match(readFileSync(join(dir, 'packages/client/dist/openapi.d.ts'), 'utf8'), /Read one plant/, 'the client package the tests import was rebuilt before the check');
  // A save raises more than one watch event; regenerating for each restarted the server twice.
  t.equal([...dev.output().matchAll(REGENERATED)].length, 1, 'one edit of openapi.yaml, one regeneration and restart');

  // A field the store does not keep yet: the type check names where it must go, the server refuses to start.
  writeFileSync(specPath, readFileSync(specPath, 'utf8').replace(/( {4}Plant:\n {6}type: object\n {6}required:\n {8}- name\n {6}properties:\n)/, '$1        price:\n          type: integer\n'));
  await dev.nth(REGENERATED, 2);
  t.match((await dev.nth(TYPECHECKED, 2))[1], /^\d+ error\(s\)/, 'the type check fails');
  t.match(dev.output(), /^typecheck: src\/store\/plant-fields\.ts\(\d+,\d+\): error TS\d+: Property 'price' is missing/m, 'its errors, prefixed, name the field and where it goes');
  await dev.nth(/^plant-store failed to start: openapi\.yaml declares the plant field "price"/gm, 1);

  // Ctrl-C in a terminal signals the whole foreground process group: npm, the shell, dev.ts, the server.
  await dev.interrupt();
  t.notOk(isRunning(Number(second[1])), 'stopping npm run dev stops the server');
  t.equal([...dev.output().matchAll(LISTENING)].length, 2, 'the server never listened with a field its store drops');
});
