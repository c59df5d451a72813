// Why the store DATABASE_URL names cannot be opened, in one line an operator can act on; never the password.
import { accessSync, constants, existsSync, realpathSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse } from 'pg-connection-string';
import { NotPrivateError } from './sqlite-files.ts';

/** DATABASE_URL cannot be used as given; the message names it and says what to do. */
export class DatabaseUrlError extends Error {}

// Kernel pseudo-filesystems hold no files a database can live in; a recursive mkdir under /proc
// never returns, so they are refused before anything touches them.
const PSEUDO_FILESYSTEMS = ['/proc', '/sys'];

/** Checks a SQLite path before it is opened: not on a pseudo-filesystem, under a writable directory. */
export function checkSqlitePath(path: string): void {
  if (path === ':memory:') return;
  const absolute = realAncestorPath(resolve(path));
  const pseudo = PSEUDO_FILESYSTEMS.find((root) => absolute === root || absolute.startsWith(`${root}/`));
  if (pseudo) {
    throw new DatabaseUrlError(`DATABASE_URL sqlite:${path} is under ${pseudo}, which holds no real files: choose a path on a disk, such as sqlite:./data/plants.db.`);
  }
  const existing = nearestExisting(resolve(path));
  if (existing !== resolve(path) && !statSync(existing).isDirectory()) {
    throw new DatabaseUrlError(`DATABASE_URL sqlite:${path} needs a directory where ${existing} is a file: choose another path.`);
  }
  const directory = existing === resolve(path) ? dirname(existing) : existing;
  try {
    accessSync(directory, constants.W_OK);
  } catch {
    throw new DatabaseUrlError(
      `DATABASE_URL sqlite:${path}: this user (uid ${process.getuid?.() ?? '?'}) cannot write in ${directory}: give it write access there, or choose a writable path.`,
    );
  }
}

/** Files other users could reach, and Node's sqlite errors (by SQLite's result code) that a configuration causes, get a plain sentence. */
export function sqliteOpenFailure(error: unknown, path: string): unknown {
  if (error instanceof NotPrivateError) return new DatabaseUrlError(`DATABASE_URL sqlite:${path}: ${error.message}`, { cause: error });
  const errcode = (error as { errcode?: unknown })?.errcode;
  const what: Record<number, string> = {
    3: 'cannot be opened: access denied',
    8: 'is read-only: give this user write access to it and its directory',
    11: 'is damaged: restore it from a backup',
    13: 'cannot be written: the disk is full',
    14: 'cannot be opened or created: check that its directory exists and this user may write in it',
    26: 'is not a SQLite database: point DATABASE_URL at the service\'s database file or at a new path',
  };
  if (typeof errcode !== 'number' || !(errcode in what)) return error;
  return new DatabaseUrlError(`DATABASE_URL sqlite:${path}: the file ${what[errcode]}.`, { cause: error });
}

/** Where a PostgreSQL URL points, without its password. */
export interface PostgresTarget {
  user: string;
  host: string;
  port: string;
  database: string;
}

const POSTGRES_SHAPE = 'postgres://user:password@host:5432/database';

/** Parsed by pg's own parser, so that what pg would throw on is refused here, in one line. */
export function postgresTarget(databaseUrl: string): PostgresTarget {
  let url: ReturnType<typeof parse>;
  try {
    url = parse(databaseUrl);
  } catch {
    throw new DatabaseUrlError(
      `DATABASE_URL is not a valid PostgreSQL URL: write it as ${POSTGRES_SHAPE}, with a numeric port (1-65535) ` +
        'and any @, :, / or % in the user or password percent-encoded (%40, %3A, %2F, %25).',
    );
  }
  return {
    user: url.user || 'the default user',
    host: url.host || 'localhost',
    port: url.port || '5432',
    database: url.database || 'the default database',
  };
}

/** Explains a PostgreSQL start that failed: given up after retries, or refused by the server. */
export function postgresOpenFailure(error: unknown, target: PostgresTarget, triedForMs?: number): unknown {
  const where = `${target.host}:${target.port}`;
  const code = (error as { code?: unknown })?.code;
  const detail = (error as Error)?.message ?? String(error);
  if (triedForMs !== undefined) {
    return new DatabaseUrlError(
      `DATABASE_URL: PostgreSQL at ${where} did not answer for ${(triedForMs / 1000).toFixed(1)} s (${cause(error)}): ` +
        'start it, check the host and port, or allow more time with DATABASE_STARTUP_TIMEOUT.',
      { cause: error },
    );
  }
  const advice: Record<string, string> = {
    '3D000': `create it (createdb -h ${target.host} -p ${target.port} ${target.database}) or fix the database name`,
    '28000': 'create the role, or fix the user name in DATABASE_URL',
    '28P01': 'fix the password in DATABASE_URL',
    '42501': `grant the role ${target.user} the right to create tables in ${target.database}, or use a role that has it`,
  };
  if (typeof code !== 'string' || !(code in advice)) return error;
  return new DatabaseUrlError(`DATABASE_URL: PostgreSQL at ${where} refused: ${detail}: ${advice[code]}.`, { cause: error });
}

// The last error of a failed retry: StoreUnavailableError wraps what pg said.
function cause(error: unknown): string {
  const inner = (error as { cause?: unknown })?.cause ?? error;
  return (inner as Error)?.message ?? String(inner);
}

/** The real path of the deepest part of `path` that exists, with the rest appended (symlinks such as /dev/fd lead into /proc). */
function realAncestorPath(path: string): string {
  const existing = nearestExisting(path);
  return realpathSync(existing) + path.slice(existing.length);
}

function nearestExisting(path: string): string {
  let current = path;
  while (!existsSync(current)) current = dirname(current);
  return current;
}
