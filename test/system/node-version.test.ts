// `node src/entry.js` on a Node older than 24 (a machine's own Node, a node:20 image) says in one
// line that Node 24 is needed and how to get it, exit code 1, no stack. Run with the machine's
// older Node (Debian's nodejs is installed when there is none); none at all: a visible skip, or a
// failure with CI=true. And `npm ci` with that Node prints no wall of warnings (.npmrc).
import { spawnSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from '../harness/paths.ts';
import { aptInstall, onPath, skipUnlessCi } from '../harness/system-packages.ts';

/** A Node below 24 outside the repository's node_modules, with its version; undefined when none. */
function olderNode(): { path: string; version: string } | undefined {
  const candidates = new Set([...onPath('node'), '/usr/bin/node'].flatMap((path) => {
    try {
      return [realpathSync(path)];
    } catch {
      return [];
    }
  }));
  for (const path of candidates) {
    if (!relative(REPO_ROOT, path).startsWith('..')) continue; // the repository's own Node 24
    const version = spawnSync(path, ['--version'], { encoding: 'utf8' }).stdout?.trim() ?? '';
    if (/^v\d+\./.test(version) && Number(version.slice(1).split('.')[0]) < 24) return { path, version };
  }
  return undefined;
}

const found = olderNode() ?? (aptInstall(['nodejs']) === undefined ? olderNode() : undefined);
const skip = skipUnlessCi(found ? undefined : 'no Node older than 24 on PATH or at /usr/bin/node, and apt-get could not install one (nodejs)');

t.test(`node src/entry.js on an older Node says in one line that Node 24 is needed`, { skip }, async (t) => {
  t.ok(found, 'a Node older than 24 is available');
  if (!found) return;
  t.comment(`with ${found.path} ${found.version}`);
  const run = spawnSync(found.path, ['src/entry.js'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    env: { ...process.env, PORT: '0', DATABASE_URL: `sqlite:${t.testdir()}/plants.db` },
    timeout: 60_000, // a guard against a server that starts after all, not a measure
  });
  t.equal(run.status, 1, 'exit code 1');
  t.equal(run.signal, null);
  t.equal(run.stdout, '', 'nothing on stdout');
  const lines = run.stderr.trimEnd().split('\n');
  t.equal(lines.length, 1, `one line on stderr: ${run.stderr}`);
  t.match(lines[0], /Node 24/, 'names the Node it needs');
  t.match(lines[0], new RegExp(`\\b${found.version.replace(/\./g, '\\.')}\\b`), 'names the Node it got');
  t.match(lines[0], /npm start/, 'says how: npm start uses the pinned Node');
});

// What a newcomer sees first: `npm ci` with the machine's npm on the machine's Node. --dry-run builds
// the same tree and runs the same engine checks, then stops before touching node_modules.
t.test('npm ci on an older Node prints no warnings', { skip }, async (t) => {
  t.ok(found, 'a Node older than 24 is available');
  if (!found) return;
  const npmCli = [process.env.npm_execpath, join(dirname(found.path), '../lib/node_modules/npm/bin/npm-cli.js')].find((path) => path?.endsWith('npm-cli.js') && existsSync(path));
  t.ok(npmCli, 'npm is installed beside it');
  if (!npmCli) return;
  // Without the npm_* variables of the npm running this test, which would pass its own settings on.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
  const run = spawnSync(found.path, [npmCli, 'ci', '--dry-run', '--no-audit', '--no-fund'], { cwd: REPO_ROOT, encoding: 'utf8', env });
  t.equal(run.status, 0, run.status === 0 ? 'npm ci --dry-run succeeds' : `npm ci --dry-run: ${run.stderr}`);
  const lines = `${run.stdout}${run.stderr}`.split('\n');
  t.same(lines.filter((line) => /\bwarn\b|EBADENGINE/.test(line)), [], 'no warning line');
  t.comment(`npm ci --dry-run on ${found.version}: ${lines.filter(Boolean).length} line(s) of output`);
});
