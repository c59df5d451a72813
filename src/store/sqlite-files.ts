// The SQLite files hold token hashes and webhook secrets: created 0600 before SQLite opens them, in a directory only this user may change.
import { accessSync, closeSync, constants, existsSync, fchmodSync, fstatSync, lstatSync, mkdirSync, openSync, realpathSync, statSync, type Stats } from 'node:fs';
import { dirname, resolve } from 'node:path';

const PRIVATE_FILE = 0o600;
const PRIVATE_DIR = 0o700;
// O_NONBLOCK: a FIFO planted at the path must not hold the open; O_NOFOLLOW: nor a symbolic link redirect it.
const INSPECT = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

// Kernel pseudo-filesystems hold no files a database can live in; a recursive mkdir under /proc never returns.
const PSEUDO_FILESYSTEMS = ['/proc', '/sys'];

/** A path that cannot hold the database, or files other local users could read, change or replace; the message says what to do. */
export class SqlitePathError extends Error {}

type OpenFile = NonNullable<ReturnType<typeof openChecked>>;

/** The files SQLite keeps for the database at `path`: the -wal, -shm and -journal beside it. */
export function companionFiles(path: string): string[] {
  return [`${path}-wal`, `${path}-shm`, `${path}-journal`];
}

/** Prepares `path` for SQLite; returns a line for each existing file of ours whose mode was tightened. */
export function preparePrivateFiles(path: string): string[] {
  checkPath(path);
  // A missing directory is created 0700 (every level); an existing one must already be this user's alone.
  mkdirSync(dirname(path), { recursive: true, mode: PRIVATE_DIR });
  checkDirectory(dirname(path));
  // Every file is checked before any is changed, and the -wal, -shm and -journal (left by an earlier run, a
  // crash or another process: SQLite reuses them as they are) before the database is created.
  const opened: OpenFile[] = [];
  try {
    for (const companion of companionFiles(path)) {
      const file = openChecked(companion, 0);
      if (file) opened.push(file);
    }
    const database = openChecked(path, constants.O_CREAT);
    if (database) opened.unshift(database);
    return opened.map(tighten).filter((line) => line !== undefined);
  } finally {
    for (const { fd } of opened) closeSync(fd);
  }
}

/** Refused before anything touches the path: a pseudo-filesystem, a file where a directory must be, a directory this user cannot write in. */
function checkPath(path: string): void {
  const absolute = resolve(path);
  let existing = absolute;
  while (!existsSync(existing)) existing = dirname(existing);
  // The real path: symbolic links such as /dev/fd lead into /proc.
  const real = realpathSync(existing) + absolute.slice(existing.length);
  const pseudo = PSEUDO_FILESYSTEMS.find((root) => real === root || real.startsWith(`${root}/`));
  if (pseudo) throw new SqlitePathError(`it is under ${pseudo}, which holds no real files: choose a path on a disk, such as sqlite:./data/plants.db.`);
  if (existing !== absolute && !statSync(existing).isDirectory()) {
    throw new SqlitePathError(`it needs a directory where ${existing} is a file: choose another path.`);
  }
  const directory = existing === absolute ? dirname(existing) : existing;
  try {
    accessSync(directory, constants.W_OK);
  } catch {
    throw new SqlitePathError(`this user (uid ${process.getuid?.() ?? '?'}) cannot write in ${directory}: give it write access there, or choose a writable path.`);
  }
}

/** Only this user may change entries where the database lives (not even a sticky /tmp, where another may create the -wal first). */
function checkDirectory(directory: string): void {
  const stat = statSync(directory);
  const uid = process.getuid?.();
  if (uid === undefined) return; // Windows: no owner or mode bits to check
  if (stat.uid !== uid) {
    throw new SqlitePathError(
      `the directory ${directory} belongs to uid ${stat.uid}, not to this user (uid ${uid}): its owner could replace the database's files; ` +
        `give the database a directory of its own (one that does not exist yet is created 0700), or chown it to uid ${uid} if it serves the service alone.`,
    );
  }
  if ((stat.mode & 0o022) !== 0) {
    throw new SqlitePathError(
      `others can write in the directory ${directory} (mode ${octal(stat.mode)}): they could plant or replace the database's files; ` +
        'give the database a directory of its own (one that does not exist yet is created 0700), or chmod go-w it if it serves the service alone.',
    );
  }
}

/** Opens `path` itself (never through a link) and checks the descriptor's type and owner; undefined when absent. */
function openChecked(path: string, create: number) {
  let fd: number;
  try {
    fd = openSync(path, INSPECT | create, PRIVATE_FILE);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') {
      throw new SqlitePathError(`${path} is a symbolic link, which may lead anywhere: ${create ? 'point DATABASE_URL at the file itself' : 'remove it'}.`);
    }
    // Not readable by us (another user's private file) or not creatable: say whose it is, else SQLite's own open says why.
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (stat) checkOwner(path, stat);
    return undefined;
  }
  try {
    const stat = fstatSync(fd);
    checkOwner(path, stat);
    return { path, fd, mode: stat.mode };
  } catch (error) {
    closeSync(fd);
    throw error;
  }
}

function checkOwner(path: string, stat: Stats): void {
  if (!stat.isFile()) throw new SqlitePathError(`${path} is not a regular file: remove it, or point DATABASE_URL at another path.`);
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid) {
    throw new SqlitePathError(
      `${path} belongs to uid ${stat.uid}, not to this user (uid ${uid}): its owner may read or change it; ` +
        `remove it, or, if it is the service's own data and no other process holds it open, chown it to uid ${uid}.`,
    );
  }
}

/** Takes group's and others' bits away from a file that has any, keeping the owner's. */
function tighten({ path, fd, mode }: OpenFile): string | undefined {
  if ((mode & 0o077) === 0) return undefined;
  const now = mode & 0o700;
  try {
    fchmodSync(fd, now);
  } catch (error) {
    throw new SqlitePathError(
      `${path} has mode ${octal(mode)} and could not be made private (chmod ${octal(now)}: ${(error as NodeJS.ErrnoException).code}): ` +
        'make it readable by this user only (is it immutable, or on a read-only mount?) and start again.',
    );
  }
  return `${path} had mode ${octal(mode)}; set to ${octal(now)} (only the service's user may read the database)`;
}

function octal(mode: number): string {
  return (mode & 0o7777).toString(8);
}
