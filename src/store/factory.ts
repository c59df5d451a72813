// Opens the store DATABASE_URL names, at startup; why it cannot be opened is said in one line, never with the password.
import { parse } from 'pg-connection-string';
import { databaseOf, loadConfig, storeOptions } from '../config.ts';
import type { PostgresOptions } from './postgres.ts';
import { SqlitePathError } from './sqlite-files.ts';
import { SqliteStore, type SqliteOptions } from './sqlite.ts';
import { StoreUnavailableError, type PlantStore } from './types.ts';

/** DATABASE_URL cannot be used as given (bad value, unreachable, refused); the message names it and says what to do. */
export class DatabaseUrlError extends Error {}

export type StoreOptions = Partial<PostgresOptions> & SqliteOptions;

/** Node's sqlite errors that a configuration causes, by SQLite's result code. */
const SQLITE_FAILURES: Record<number, string> = {
  3: 'the file cannot be opened: access denied.',
  8: 'the file is read-only: give this user write access to it and its directory.',
  11: 'the file is damaged: restore it from a backup.',
  13: 'the file cannot be written: the disk is full.',
  14: 'the file cannot be opened or created: check that its directory exists and this user may write in it.',
  26: 'the file is not a SQLite database: point DATABASE_URL at the service\'s database file or at a new path.',
};

export async function openStore(databaseUrl: string, options: StoreOptions = {}): Promise<PlantStore> {
  const database = databaseOf(databaseUrl);
  if (database === 'sqlite') return openSqlite(databaseUrl.slice('sqlite:'.length), options);
  if (database === 'postgresql') return openPostgres(databaseUrl, options);
  // A URL may carry a password anywhere (user info, query string); name only its scheme.
  const scheme = /^[a-z][a-z0-9+.-]*:/i.exec(databaseUrl)?.[0] ?? 'unrecognised';
  throw new DatabaseUrlError(
    'DATABASE_URL must look like sqlite:<path> (for example sqlite:./data/plants.db) or ' +
      `postgres://user:password@host:5432/database; got a "${scheme}" URL.`,
  );
}

/** `sqlite:./data/plants.db` and `sqlite:/var/lib/plants.db` name files; `sqlite::memory:` a private in-memory database. */
function openSqlite(path: string, { onLockWait }: SqliteOptions): SqliteStore {
  if (path === '') throw new DatabaseUrlError('DATABASE_URL sqlite: needs a file path, for example sqlite:./data/plants.db.');
  try {
    return new SqliteStore(path, { onLockWait });
  } catch (error) {
    const errcode = (error as { errcode?: unknown })?.errcode;
    const said = error instanceof SqlitePathError ? error.message : typeof errcode === 'number' ? SQLITE_FAILURES[errcode] : undefined;
    throw said === undefined ? error : new DatabaseUrlError(`DATABASE_URL sqlite:${path}: ${said}`, { cause: error });
  }
}

async function openPostgres(databaseUrl: string, options: StoreOptions): Promise<PlantStore> {
  let url: ReturnType<typeof parse>;
  try {
    // pg's own parser: what pg would throw on is refused here, in one line.
    url = parse(databaseUrl);
  } catch {
    throw new DatabaseUrlError(
      'DATABASE_URL is not a valid PostgreSQL URL: write it as postgres://user:password@host:5432/database, ' +
        'with a numeric port (1-65535) and any @, :, / or % in the user or password percent-encoded (%40, %3A, %2F, %25).',
    );
  }
  const [host, port, database] = [url.host || 'localhost', url.port || '5432', url.database || 'the default database'];
  // Loaded only here: a SQLite deployment never pays for the pg driver at boot.
  const { PostgresStore } = await import('./postgres.ts');
  const started = performance.now();
  try {
    // What the caller leaves out is what the configuration defaults to.
    return await PostgresStore.open(databaseUrl, { ...storeOptions(loadConfig({})), ...options });
  } catch (error) {
    if (error instanceof StoreUnavailableError) {
      // The start gave up retrying; the error wraps what pg said last.
      throw new DatabaseUrlError(
        `DATABASE_URL: PostgreSQL at ${host}:${port} did not answer for ${((performance.now() - started) / 1000).toFixed(1)} s ` +
          `(${(error.cause as Error)?.message ?? String(error.cause)}): start it, check the host and port, ` +
          'or allow more time with DATABASE_STARTUP_TIMEOUT.',
        { cause: error },
      );
    }
    const advice: Record<string, string> = {
      '3D000': `create it (createdb -h ${host} -p ${port} ${database}) or fix the database name`,
      '28000': 'create the role, or fix the user name in DATABASE_URL',
      '28P01': 'fix the password in DATABASE_URL',
      '42501': `grant the role ${url.user || 'the default user'} the right to create tables in ${database}, or use a role that has it`,
    };
    const code = (error as { code?: unknown })?.code;
    if (typeof code !== 'string' || !(code in advice)) throw error;
    const refused = `DATABASE_URL: PostgreSQL at ${host}:${port} refused: ${(error as Error).message}: ${advice[code]}.`;
    throw new DatabaseUrlError(refused, { cause: error });
  }
}
