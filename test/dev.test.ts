// npm run dev in a scratch copy of the repository: an edit to openapi.yaml regenerates the types
// and then restarts the server, and runs the type check beside it; an edit under src/ restarts it;
// a plant field the store does not keep shows the type check's errors and the server's refusal;
// stopping it leaves no server behind.
import { spawn } from 'node:child_process';
import { cpSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from './harness/paths.ts';
import { isRunning } from './harness/process.ts';

const LISTENING = /^\{.*"pid":(\d+).*"msg":"Server listening at (http:\/\/127\.0\.0\.1:\d+)".*\}$/gm;
const REGENERATED = /^dev: openapi\.yaml changed; regenerated src\/generated\/openapi\.ts, restarting$/gm;
const TYPECHECKED = /^typecheck: (no errors|\d+ error\(s\); the restart does not wait for them .*)$/gm;

function scratchCopy(dir: string): void {
  for (const entry of ['openapi.yaml', 'package.json', 'tsconfig.json', 'src', 'scripts', 'test', 'contract']) cpSync(join(REPO_ROOT, entry), join(dir, entry), { recursive: true });
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'));
}


t.test('npm run dev regenerates the types and restarts on changes to openapi.yaml and src/', async (t) => {
  const dir = t.testdir();
  scratchCopy(dir);
  // No SHUTDOWN_DELAY: each restart would otherwise drain for 5 s, which this test does not look at.
  const env = { HOST: '127.0.0.1', PORT: '0', DATABASE_URL: `sqlite:${dir}/data/plants.db`, API_TOKENS: 'dev-test-token-0123456789', LOG_LEVEL: 'info', SHUTDOWN_DELAY: '0s' };
  // Its own process group, so that the test's teardown can kill the watcher and the server with it.
  const dev = spawn('npm', ['run', '--silent', 'dev'], { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  let exited = false;
  const waiters = new Set<() => void>();
  const notify = () => [...waiters].forEach((waiter) => waiter());
  const collect = (chunk: string) => {
    output += chunk;
    notify();
  };
  dev.stdout.setEncoding('utf8').on('data', collect);
  dev.stderr.setEncoding('utf8').on('data', collect);
  const exit = new Promise<number | null>((resolve) => dev.on('close', (code) => {
    exited = true;
    notify();
    resolve(code);
  }));
  const killAll = () => {
    if (!exited) process.kill(-dev.pid!, 'SIGKILL');
  };
  t.teardown(killAll);
  // tap's own timeout (120 s) ends this process without teardowns, which would leave a watcher and
  // a server running: give up a little before it, so a dev script that never restarts fails here
  // ("exited before ...") with everything it started killed.
  const giveUp = setTimeout(killAll, 100_000);
  t.teardown(() => clearTimeout(giveUp));

  /** The `count`-th match of the pattern in the output, as soon as it has appeared. */
  const nth = (pattern: RegExp, count: number) =>
    new Promise<RegExpExecArray & { index: number }>((resolve, reject) => {
      const check = () => {
        const matches = [...output.matchAll(pattern)];
        if (matches.length >= count) {
          waiters.delete(check);
          resolve(matches[count - 1]! as RegExpExecArray & { index: number });
        } else if (exited) {
          waiters.delete(check);
          reject(new Error(`npm run dev exited before ${pattern} appeared ${count} times:\n${output}`));
        }
      };
      waiters.add(check);
      check();
    });

  const first = await nth(LISTENING, 1);
  const typesPath = join(dir, 'src/generated/openapi.ts');
  t.notMatch(readFileSync(typesPath, 'utf8'), /Read one plant/);

  const specPath = join(dir, 'openapi.yaml');
  writeFileSync(specPath, readFileSync(specPath, 'utf8').replace('summary: Read a plant', 'summary: Read one plant'));
  const regenerated = await nth(REGENERATED, 1);
  const second = await nth(LISTENING, 2);
  t.not(second[1], first[1], 'a new server process');
  t.ok(regenerated.index < second.index, 'the types were regenerated before the restart');
  t.match(readFileSync(typesPath, 'utf8'), /Read one plant/, 'src/generated/openapi.ts follows openapi.yaml');
  const served = await (await fetch(`${second[2]}/openapi.yaml`)).text();
  t.match(served, /summary: Read one plant/, 'the restarted server serves the edited contract');

  const source = join(dir, 'src/duration.ts');
  writeFileSync(source, `${readFileSync(source, 'utf8')}\n// edited\n`);
  const third = await nth(LISTENING, 3);
  t.not(third[1], second[1], 'an edit under src/ restarts the server too');
  // A save raises more than one watch event; regenerating for each restarted the server twice.
  t.equal([...output.matchAll(REGENERATED)].length, 1, 'one edit of openapi.yaml, one regeneration and restart');

  t.equal((await nth(TYPECHECKED, 1))[1], 'no errors', 'the type check ran after the regeneration, and passed');

  // A field the store does not keep yet: the type check names where it must go, the server refuses to start.
  writeFileSync(specPath, readFileSync(specPath, 'utf8').replace(/( {4}Plant:\n {6}type: object\n {6}required:\n {8}- name\n {6}properties:\n)/, '$1        price:\n          type: integer\n'));
  await nth(REGENERATED, 2);
  t.match((await nth(TYPECHECKED, 2))[1], /^\d+ error\(s\)/, 'the type check fails');
  t.match(output, /^typecheck: src\/store\/plant-fields\.ts\(\d+,\d+\): error TS\d+: Property 'price' is missing/m, 'its errors, prefixed, name the field and where it goes');
  await nth(/^plant-store failed to start: openapi\.yaml declares the plant field "price"/gm, 1);

  // Ctrl-C in a terminal signals the whole foreground process group: npm, the shell, dev.ts, the server.
  process.kill(-dev.pid!, 'SIGINT');
  await exit;
  t.notOk(isRunning(Number(third[1])), 'stopping npm run dev stops the server');
  t.equal([...output.matchAll(LISTENING)].length, 3, 'the server never listened with a field its store drops');
});
