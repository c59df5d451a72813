// A store no other local user can touch (issue 30, point 4): a database directory that its group or
// others can write, sticky (as /tmp) or not, a symbolic link in place of a database file, or a
// database file that cannot be made private stops the service and `npm run token` with one line
// naming the path and what to do, and changes nothing on disk (store-refusals.ts). Files of another
// user's: foreign-files.test.ts.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { skipUnlessCi } from '../harness/system-packages.ts';
import { db, ours, refusalTests } from '../store/store-refusals.ts';

/** Why a file cannot be made immutable here (chattr needs CAP_LINUX_IMMUTABLE and a filesystem with the flag), or undefined. */
function immutableUnavailable(): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'unsafe-store-paths-probe-'));
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

const WRITABLE = (mode: string) => new RegExp(`others can write in the directory .* \\(mode ${mode}\\): .*; give the database a directory of its own`);

refusalTests([
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
      writeFileSync(db(dir), '');
      chmodSync(db(dir), 0o644);
      execFileSync('chattr', ['+i', db(dir)]);
      t.teardown(() => execFileSync('chattr', ['-i', db(dir)]));
      return db(dir);
    },
    says: /has mode 644 and could not be made private \(chmod 600: EPERM\): make it readable by this user only/,
  },
]);
