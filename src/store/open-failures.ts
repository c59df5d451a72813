// Why the store DATABASE_URL names cannot be opened, in one line an operator can act on; never the password.
import { parse } from 'pg-connection-string';
import { SqlitePathError } from './sqlite-files.ts';

/** DATABASE_URL cannot be used as given; the message names it and says what to do. */
export class DatabaseUrlError extends Error {}

/** A path refused (sqlite-files.ts), and Node's sqlite errors (by SQLite's result code) that a configuration causes, get a plain sentence. */
export function sqliteOpenFailure(error: unknown, path: string): unknown {
  if (error instanceof SqlitePathError) return new DatabaseUrlError(`DATABASE_URL sqlite:${path}: ${error.message}`, { cause: error });
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
