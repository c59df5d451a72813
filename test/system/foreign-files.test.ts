// A store no other local user can touch (issue 30, point 4): a database, -wal or -shm of another
// user's, or a database directory of another user's, stops the service and `npm run token` with one
// line naming the path and what to do, and changes nothing on disk (store-refusals.ts), even when the
// service runs as root and could open or chmod them: their owner still can. Another user's files are
// made by chown to nobody, which needs root (as CI runs); without root these skip, visibly.
// Directories others can write, symbolic links and files that cannot be made private:
// unsafe-store-paths.test.ts.
import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { skipUnlessCi } from '../harness/system-packages.ts';
import { db, ours, refusalTests } from '../store/store-refusals.ts';

const NOBODY = 65534;
const skip = process.getuid?.() === 0 ? false : skipUnlessCi('needs root to create files owned by another user (chown to nobody)');

function foreign(path: string, mode: number): void {
  writeFileSync(path, '');
  chmodSync(path, mode);
  chownSync(path, NOBODY, NOBODY);
}

const OWNED = /belongs to uid 65534, not to this user \(uid \d+\): its owner may read or change it; remove it, or, .*chown it to uid \d+\.$/;

refusalTests([
  {
    name: 'a shared sticky directory (1777, as /tmp) where another user pre-created plants.db 0666',
    skip,
    setup: (dir) => {
      mkdirSync(dir);
      chmodSync(dir, 0o1777);
      foreign(db(dir), 0o666);
      return dir;
    },
    says: /others can write in the directory .* \(mode 1777\): .*; give the database a directory of its own/,
  },
  {
    name: 'plants.db of another user (0666) in a directory of ours',
    skip,
    setup: (dir) => {
      mkdirSync(dir, { mode: 0o700 });
      foreign(db(dir), 0o666);
      return db(dir);
    },
    says: OWNED,
  },
  {
    name: 'plants.db-wal of another user, 0600 (root could open and chmod it: its owner could too)',
    skip,
    setup: (dir) => {
      ours(dir);
      foreign(db(dir, '-wal'), 0o600);
      return db(dir, '-wal');
    },
    says: OWNED,
  },
  {
    name: 'plants.db-shm of another user, 0666',
    skip,
    setup: (dir) => {
      ours(dir);
      foreign(db(dir, '-shm'), 0o666);
      return db(dir, '-shm');
    },
    says: OWNED,
  },
  {
    name: 'a database directory of another user (0755: root could write in it, its owner can swap the files)',
    skip,
    setup: (dir) => {
      mkdirSync(dir);
      chmodSync(dir, 0o755);
      chownSync(dir, NOBODY, NOBODY);
      return dir;
    },
    says: /belongs to uid 65534, not to this user \(uid \d+\): its owner could replace the database's files; give the database a directory of its own/,
  },
]);
