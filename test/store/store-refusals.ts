// Runs a store-file scenario through the service (`node src/entry.js`, as `npm start` runs it) and
// `npm run token -- create`, and checks each refuses as operators are promised (docs/operations.md,
// "What other local users can reach"): exit 1, one line on stderr naming DATABASE_URL, the path and
// what to do, and nothing changed in the database's directory.
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { runToExit, serverEnv } from '../harness/process.ts';

export interface Scenario {
  name: string;
  skip?: string | false;
  /** Lays out the directory `dir` (which does not exist yet); answers the path the refusal must name. */
  setup: (dir: string, t: Test) => string;
  /** What is wrong, and what to do. */
  says: RegExp;
}

export const db = (dir: string, suffix = '') => join(dir, `plants.db${suffix}`);

/** A directory of ours with an empty database file of ours, 0600, as a previous run left it. */
export function ours(dir: string, mode = 0o700): void {
  mkdirSync(dir);
  chmodSync(dir, mode); // exactly this mode, whatever the umask
  writeFileSync(db(dir), '', { mode: 0o600 });
}

/** The directory and each entry in it: owner, mode, size; what a refusal must leave as it was. */
function snapshot(dir: string): string[] {
  const describe = (path: string, name: string) => {
    const stat = lstatSync(path);
    return `${name} uid=${stat.uid} mode=${(stat.mode & 0o7777).toString(8)} size=${stat.size}`;
  };
  return [describe(dir, '.'), ...readdirSync(dir).sort().map((name) => describe(join(dir, name), name))];
}

const COMMANDS = [
  // What `npm start` execs; under npm, a start the test must kill would leave Node running without its npm.
  { name: 'node src/entry.js', command: [process.execPath, 'src/entry.js'], prefix: 'plant-store failed to start: ' },
  { name: 'npm run token -- create', command: ['npm', 'run', 'token', '--', 'create', '--name', 'intruder'], prefix: 'token: ' },
];

/** One tap test per scenario, each in a fresh directory of the system's temp dir. */
export function refusalTests(scenarios: readonly Scenario[]): void {
  for (const scenario of scenarios) {
    t.test(scenario.name, { skip: scenario.skip ?? false }, async (t) => {
      const base = mkdtempSync(join(tmpdir(), 'store-refusals-'));
      t.teardown(() => rmSync(base, { recursive: true, force: true }));
      const dir = join(base, 'data');
      const named = scenario.setup(dir, t);
      const before = snapshot(dir);
      const url = `sqlite:${db(dir)}`;
      for (const { name, command, prefix } of COMMANDS) {
        // No npm update notice on stderr, whatever npm's cache says.
        const run = await runToExit(t, serverEnv(base, { DATABASE_URL: url, npm_config_update_notifier: 'false' }), { command });
        const stderr = run.stderr.trimEnd();
        t.same([run.code, run.signal], [1, null], `${name} exits 1 by itself`);
        t.notMatch(run.stdout, /Server listening|pst_/, `${name} neither listened nor issued a token`);
        t.equal(stderr.split('\n').length, 1, `${name}: one line on stderr:\n${stderr}`);
        t.ok(stderr.startsWith(`${prefix}DATABASE_URL ${url}: `), `${name}: names DATABASE_URL`);
        t.match(stderr, `${named} `, `${name}: names ${named}`);
        t.match(stderr, scenario.says, `${name}: says what is wrong and what to do`);
        t.same(snapshot(dir), before, `${name} changed nothing in the directory`);
      }
    });
  }
}
