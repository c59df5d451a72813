// The SQLite files are private to the service's user whatever the umask: they hold token hashes and
// webhook signing secrets. SQLite creates a new database 0644 (less the umask) and gives its -wal and
// -shm the database file's mode, so the database file is created 0600 here before SQLite opens it.
import { chmodSync, closeSync, constants, fstatSync, fchmodSync, lstatSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';

const PRIVATE_FILE = 0o600;
const PRIVATE_DIR = 0o700;

/** Prepares `path` for SQLite; returns a line for each existing file whose mode was tightened. */
export function preparePrivateFiles(path: string): string[] {
  // A missing directory is created 0700 (every level); an existing one is the operator's and left as it is.
  mkdirSync(dirname(path), { recursive: true, mode: PRIVATE_DIR });
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_CREAT, PRIVATE_FILE);
  } catch {
    return []; // unwritable or not a file: SQLite's own open says why, in open-failures.ts's words
  }
  const tightened: string[] = [];
  try {
    tightened.push(...tighten(path, fstatSync(fd).mode, (mode) => fchmodSync(fd, mode)));
  } finally {
    closeSync(fd);
  }
  // Left by an earlier version or an interrupted run: SQLite reuses them as they are.
  for (const companion of [`${path}-wal`, `${path}-shm`, `${path}-journal`]) {
    const mode = modeOf(companion);
    if (mode !== undefined) tightened.push(...tighten(companion, mode, (mode) => chmodSync(companion, mode)));
  }
  return tightened;
}

/** Takes group's and others' bits away from a file that has any, keeping the owner's. */
function tighten(path: string, mode: number, chmod: (mode: number) => void): string[] {
  const was = (mode & 0o777).toString(8);
  if ((mode & 0o077) === 0) return [];
  const now = mode & 0o700;
  try {
    chmod(now);
  } catch (error) {
    return [`${path} has mode ${was} and could not be set to ${now.toString(8)} (${(error as NodeJS.ErrnoException).code}): make it private to the service's user`];
  }
  return [`${path} had mode ${was}; set to ${now.toString(8)} (only the service's user may read the database)`];
}

function modeOf(path: string): number | undefined {
  try {
    const stat = lstatSync(path);
    return stat.isFile() ? stat.mode : undefined;
  } catch {
    return undefined;
  }
}
