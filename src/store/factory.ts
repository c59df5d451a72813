// Picks the store driver once, at startup, from DATABASE_URL.
import { loadConfig, storeOptions } from '../config.ts';
import { DatabaseUrlError, postgresOpenFailure, postgresTarget, sqliteOpenFailure } from './open-failures.ts';
import type { PostgresOptions } from './postgres.ts';
import { SqliteStore, type SqliteOptions } from './sqlite.ts';
import { StoreUnavailableError, type PlantStore } from './types.ts';

export { DatabaseUrlError };

export type StoreOptions = Partial<PostgresOptions> & SqliteOptions;

/** Opens the store; a DATABASE_URL that cannot work (bad value, unreachable, refused) throws a one-line DatabaseUrlError. */
export async function openStore(databaseUrl: string, options: StoreOptions = {}): Promise<PlantStore> {
  if (databaseUrl.startsWith('sqlite:')) return openSqlite(sqlitePath(databaseUrl), options);
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    const target = postgresTarget(databaseUrl);
    // Loaded only here: a SQLite deployment never pays for the pg driver at boot.
    const { PostgresStore } = await import('./postgres.ts');
    const started = performance.now();
    try {
      // What the caller leaves out is what the configuration defaults to.
      return await PostgresStore.open(databaseUrl, { ...storeOptions(loadConfig({})), ...options });
    } catch (error) {
      // Unavailable still: the start gave up retrying.
      throw postgresOpenFailure(error, target, error instanceof StoreUnavailableError ? performance.now() - started : undefined);
    }
  }
  throw new DatabaseUrlError(
    'DATABASE_URL must look like sqlite:<path> (for example sqlite:./data/plants.db) or ' +
      `postgres://user:password@host:5432/database; got a "${scheme(databaseUrl)}" URL.`,
  );
}

function openSqlite(path: string, options: SqliteOptions): SqliteStore {
  try {
    return new SqliteStore(path, { onLockWait: options.onLockWait });
  } catch (error) {
    throw sqliteOpenFailure(error, path);
  }
}

/** `sqlite:./data/plants.db` and `sqlite:/var/lib/plants.db` name files; `sqlite::memory:` a private in-memory database. */
function sqlitePath(databaseUrl: string): string {
  const path = databaseUrl.slice('sqlite:'.length);
  if (path === '') throw new DatabaseUrlError('DATABASE_URL sqlite: needs a file path, for example sqlite:./data/plants.db.');
  return path;
}

// A URL may carry a password anywhere (user info, query string); name only its scheme.
function scheme(databaseUrl: string): string {
  return /^[a-z][a-z0-9+.-]*:/i.exec(databaseUrl)?.[0] ?? 'unrecognised';
}
