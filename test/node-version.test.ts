// `node src/entry.js` on a Node older than 24 (a machine's own Node, a node:20 image) says in one
// line that Node 24 is needed and how to get it, exit code 1, no stack. Run with the machine's
// older Node (Debian's nodejs is installed when there is none); none at all: a visible skip, or a
// failure with CI=true.
import { spawnSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { relative } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from './harness/paths.ts';
import { aptInstall, onPath, skipUnlessCi } from './harness/system-packages.ts';

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
