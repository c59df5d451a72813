// npm run dev in a scratch copy of the repository, a code edit: a change under src/ restarts the
// server at once (never waiting out SHUTDOWN_DELAY) and runs the type check beside it, which names a
// type error and, once it is fixed, says `typecheck: no errors`. Edits of openapi.yaml: test/system/dev.test.ts.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { devEnv, LISTENING, startDev, stopping, TYPECHECKED } from '../harness/dev.ts';
import { copyRepository } from '../harness/scratch.ts';

// Two type checks of the whole project, 10 to 40 s each on two busy cores, besides the restarts.
t.setTimeout(240_000);

t.test('npm run dev restarts at once on a change under src/ and type-checks it', async (t) => {
  const dir = copyRepository(t.testdir());
  const dev = startDev(t, dir, devEnv(dir));
  const first = await dev.nth(LISTENING, 1);

  // The server restarts (Node strips types, it does not check them); the check names the error.
  const source = join(dir, 'src/duration.ts');
  const original = readFileSync(source, 'utf8');
  writeFileSync(source, `${original}\nexport const devTestTypeError: number = 'text';\n`);
  const second = await dev.nth(LISTENING, 2);
  t.not(second[1], first[1], 'a new server process');
  t.equal(stopping(first[1]!).exec(dev.output())?.[1], 'SIGINT', 'the old server was stopped as by Ctrl-C: at once, not after SHUTDOWN_DELAY (1 h here)');
  t.match((await dev.nth(TYPECHECKED, 1))[1], /^1 error\(s\)/, 'the type check ran');
  t.match(dev.output(), /^typecheck: src\/duration\.ts\(\d+,\d+\): error TS2322: Type 'string' is not assignable to type 'number'\.$/m, 'its error, prefixed, names the place');

  writeFileSync(source, original);
  const third = await dev.nth(LISTENING, 3);
  t.equal((await dev.nth(TYPECHECKED, 2))[1], 'no errors', 'once fixed, the check says so');
  t.equal(stopping(second[1]!).exec(dev.output())?.[1], 'SIGINT', 'each restart stops the old server at once');
  t.notMatch(dev.output(), /"msg":"draining/, 'no restart drained');

  t.not(third[1], second[1], 'and the fix restarts it again');
  await dev.interrupt();
});
