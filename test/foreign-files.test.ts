// A store no other local user can touch (issue 30, point 4): a database, -wal, -shm or -journal of
// another user's, a symbolic link in their place, a file that cannot be made private, or a database
// directory that belongs to another user or that others can write (sticky or not) stops the service
// (`node src/entry.js`, as `npm start` runs it) and `npm run token` with one line naming the path and
// what to do, and changes nothing on disk. Real processes on real files; another user's files are
// made by chown to nobody, which needs root (as CI runs); without root those cases skip, visibly.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { runToExit, serverEnv } from './harness/process.ts';
import { skipUnlessCi } from './harness/system-packages.ts';

const NOBODY = 65534;
const needsRoot = process.getuid?.() === 0 ? false : skipUnlessCi('needs root to create files owned by another user (chown to nobody)');

/** Why a file cannot be made immutable here (chattr needs CAP_LINUX_IMMUTABLE and a filesystem with the flag), or undefined. */
function immutableUnavailable(): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'foreign-files-probe-'));
  const file = join(dir, 'probe');
  writeFileSync(file, '');
  try {
    execFileSync('chattr', ['+i', file], { stdio: 'pipe' });
    execFileSync('chattr', ['-i', file], { stdio: 'pipe' });
    return undefined;
  } catch (error) {
    return `chattr +i does not work here (${(error as Error).message.split('\n')[0]})`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Scenario {
  name: string;
  skip?: string | false;
  /** Lays out the directory `dir` (which does not exist yet); answers the path the refusal must name. */
  setup: (dir: string, t: Test) => string;
  /** What is wrong, and what to do. */
  says: RegExp;
}

const db = (dir: string, suffix = '') => join(dir, `plants.db${suffix}`);

/** A directory of ours with an empty database file of ours, 0600, as a previous run left it. */
function ours(dir: string, mode = 0o700): void {
  mkdirSync(dir);
  chmodSync(dir, mode);
  writeFileSync(db(dir), '', { mode: 0o600 });
}

function foreign(path: string, mode: number): void {
  writeFileSync(path, '');
  chmodSync(path, mode);
  chownSync(path, NOBODY, NOBODY);
}

// What is wrong, then what to do.
const OWNED = /belongs to uid 65534, not to this user \(uid \d+\): its owner may read or change it; remove it, or, .*chown it to uid \d+\.$/;
const OWNED_DIRECTORY = /belongs to uid 65534, not to this user \(uid \d+\): its owner could replace the database's files; give the database a directory of its own/;
const WRITABLE = (mode: string) => new RegExp(`others can write in the directory .* \\(mode ${mode}\\): .*; give the database a directory of its own`);

const scenarios: Scenario[] = [
  {
    name: 'a shared sticky directory (1777, as /tmp) where another user pre-created plants.db 0666',
    skip: needsRoot,
    setup: (dir) => {
      mkdirSync(dir);
      chmodSync(dir, 0o1777);
      foreign(db(dir), 0o666);
      return dir;
    },
    says: WRITABLE('1777'),
  },
  {
    name: 'plants.db of another user (0666) in a directory of ours',
    skip: needsRoot,
    setup: (dir) => {
      mkdirSync(dir, { mode: 0o700 });
      foreign(db(dir), 0o666);
      return db(dir);
    },
    says: OWNED,
  },
  {
    name: 'plants.db-wal of another user, 0600 (root could open and chmod it: its owner could too)',
    skip: needsRoot,
    setup: (dir) => {
      ours(dir);
      foreign(db(dir, '-wal'), 0o600);
      return db(dir, '-wal');
    },
    says: OWNED,
  },
  {
    name: 'plants.db-shm of another user, 0666',
    skip: needsRoot,
    setup: (dir) => {
      ours(dir);
      foreign(db(dir, '-shm'), 0o666);
      return db(dir, '-shm');
    },
    says: OWNED,
  },
  {
    name: 'a database directory of another user (0755: root could write in it, its owner can swap the files)',
    skip: needsRoot,
    setup: (dir) => {
      mkdirSync(dir);
      chmodSync(dir, 0o755);
      chownSync(dir, NOBODY, NOBODY);
      return dir;
    },
    says: OWNED_DIRECTORY,
  },
  {
    name: 'a directory of ours that others can write (0777)',
    setup: (dir) => {
      ours(dir, 0o777);
      return dir;
    },
    says: WRITABLE('777'),
  },
  {
    name: 'a directory of ours that its group can write (0770)',
    setup: (dir) => {
      ours(dir, 0o770);
      return dir;
    },
    says: WRITABLE('770'),
  },
  {
    name: 'a sticky directory of ours (1777) holding only our own files: others could still create the -wal first',
    setup: (dir) => {
      ours(dir, 0o1777);
      return dir;
    },
    says: WRITABLE('1777'),
  },
  {
    name: 'plants.db is a symbolic link (to a file of ours)',
    setup: (dir) => {
      mkdirSync(dir, { mode: 0o700 });
      writeFileSync(join(dir, 'elsewhere.db'), '', { mode: 0o600 });
      symlinkSync(join(dir, 'elsewhere.db'), db(dir));
      return db(dir);
    },
    says: /is a symbolic link, which may lead anywhere: point DATABASE_URL at the file itself/,
  },
  {
    name: 'plants.db-journal is a symbolic link',
    setup: (dir) => {
      ours(dir);
      symlinkSync(join(dir, 'elsewhere'), db(dir, '-journal'));
      return db(dir, '-journal');
    },
    says: /is a symbolic link, which may lead anywhere: remove it/,
  },
  {
    name: 'plants.db of ours, 0644, that cannot be made private (immutable)',
    skip: skipUnlessCi(immutableUnavailable()),
    setup: (dir, t) => {
      mkdirSync(dir, { mode: 0o700 });
      writeFileSync(db(dir), '', { mode: 0o644 });
      chmodSync(db(dir), 0o644);
      execFileSync('chattr', ['+i', db(dir)]);
      t.teardown(() => execFileSync('chattr', ['-i', db(dir)]));
      return db(dir);
    },
    says: /has mode 644 and could not be made private \(chmod 600: EPERM\): make it readable by this user only/,
  },
];

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

for (const scenario of scenarios) {
  t.test(scenario.name, { skip: scenario.skip ?? false }, async (t) => {
    const base = mkdtempSync(join(tmpdir(), 'foreign-files-'));
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
