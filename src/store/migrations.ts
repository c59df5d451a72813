// Versioned schema migrations, appended only, each written once for both dialects (SPELLED holds the types they spell differently).
import { all, run, sql, type Dialect, type Steps } from './sql.ts';
import type { EveryPlantField } from './types.ts';

/** The migration that gives each field of a plant its column: a field added to the spec fails here until one does. */
export const PLANT_FIELD_MIGRATIONS: EveryPlantField<number> = { name: 1, tag: 1 };

// Types, how a table ends (SQLite: typed strictly), what hands out plant versions (a sequence, or a trigger-kept row).
type Spelled = Record<'serial' | 'int8' | 'float8' | 'time' | 'table' | 'versions', string>;
const SPELLED: Record<Dialect, Spelled> = {
  sqlite: {
    serial: 'INTEGER PRIMARY KEY AUTOINCREMENT', int8: 'INTEGER', float8: 'REAL', time: 'TEXT', table: ') STRICT',
    versions: `
      CREATE TABLE plant_versions (last INTEGER NOT NULL) STRICT;
      INSERT INTO plant_versions (last) SELECT count(*) FROM plants;
      CREATE TRIGGER plant_version_inserted AFTER INSERT ON plants
        BEGIN UPDATE plant_versions SET last = max(last, NEW.version); END;
      CREATE TRIGGER plant_version_updated AFTER UPDATE OF version ON plants
        BEGIN UPDATE plant_versions SET last = max(last, NEW.version); END;`,
  },
  postgres: {
    serial: 'BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY', int8: 'BIGINT', float8: 'DOUBLE PRECISION', time: 'TIMESTAMPTZ', table: ')',
    versions: `
      CREATE SEQUENCE plant_versions;
      SELECT setval('plant_versions', (SELECT count(*) FROM plants) + 1, false);
      ALTER TABLE plants ALTER COLUMN version DROP DEFAULT;`,
  },
};

export interface Migration {
  version: number;
  name: string;
  /** The DDL, given how the dialect spells its types. */
  sql: (spelled: Spelled) => string;
}

/** Applies pending migrations; the driver runs it in one transaction that instances starting together take in turns. */
export function* migrate(dialect: Dialect): Steps<void> {
  const spelled = SPELLED[dialect];
  yield { kind: 'exec', script: versionsTable(spelled) };
  const [row] = (yield all(sql`SELECT max(version) AS version FROM schema_migrations`)) as { version: number | bigint | null }[];
  const current = Number(row?.version ?? 0);
  const latest = migrations.at(-1)?.version ?? 0;
  if (current > latest) throw new Error(`The database is at schema version ${current}, newer than this release knows (${latest}).`);
  for (const { version, name, sql: ddl } of migrations.filter((m) => m.version > current)) {
    yield { kind: 'exec', script: ddl(spelled) };
    yield run(sql`INSERT INTO schema_migrations (version, name, applied_at) VALUES (${version}, ${name}, ${new Date().toISOString()})`);
  }
}

/** The table of applied versions; every insert into it sets applied_at. */
function versionsTable({ time, table }: Spelled): string {
  return `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at ${time} NOT NULL${table}`;
}

/** The DDL of the schema at `version` for an empty database, its versions table left empty (a copy fills it from its source). */
export function schemaScripts(dialect: Dialect, version: number): string[] {
  const spelled = SPELLED[dialect];
  return [versionsTable(spelled), ...migrations.filter((m) => m.version <= version).map((m) => m.sql(spelled))];
}

export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: 'plants and api tokens',
    sql: ({ int8, serial, table, time }) => `
      CREATE TABLE plants (
        id ${int8} PRIMARY KEY,
        name TEXT NOT NULL,
        tag TEXT
      ${table};
      CREATE TABLE api_tokens (
        id ${serial},
        name TEXT NOT NULL UNIQUE,
        token_hash TEXT NOT NULL UNIQUE,
        hint TEXT NOT NULL,
        created_at ${time} NOT NULL
      ${table};
    `,
  },
  { version: 2, name: 'index plants by tag for filtered pages', sql: () => 'CREATE INDEX plants_by_tag ON plants (tag, id);' },
  {
    version: 3,
    name: 'token scopes, expiry, revocation and last use',
    sql: ({ time }) => `
      ALTER TABLE api_tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT '*';
      ALTER TABLE api_tokens ADD COLUMN expires_at ${time};
      ALTER TABLE api_tokens ADD COLUMN revoked_at ${time};
      ALTER TABLE api_tokens ADD COLUMN last_used_at ${time};
    `,
  },
  {
    version: 4,
    name: 'webhook subscriptions and the delivery outbox',
    sql: ({ int8, serial, table, time }) => `
      CREATE TABLE webhook_subscriptions (
        id ${serial},
        url TEXT NOT NULL,
        events TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_at ${time} NOT NULL,
        disabled_at ${time},
        disabled_reason TEXT
      ${table};
      CREATE TABLE webhook_deliveries (
        id ${serial},
        message_id TEXT NOT NULL UNIQUE,
        subscription_id ${int8} NOT NULL,
        event TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at ${time} NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at ${time},
        claimed_until ${time},
        last_attempt_at ${time},
        last_response_status INTEGER,
        last_error TEXT
      ${table};
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
      CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id, id);
    `,
  },
  { version: 5, name: 'the traceparent of the change behind each webhook delivery',
    sql: () => 'ALTER TABLE webhook_deliveries ADD COLUMN traceparent TEXT;' },
  {
    version: 6,
    name: 'the previous webhook secret, signing alongside the new one until the overlap ends',
    sql: ({ time }) => `
      ALTER TABLE webhook_subscriptions ADD COLUMN previous_secret TEXT;
      ALTER TABLE webhook_subscriptions ADD COLUMN previous_secret_until ${time};
    `,
  },
  {
    version: 7,
    name: 'whether a webhook receiver answered its latest attempt; indexes that let a claim read a few rows per subscription',
    sql: ({ time }) => `
      ALTER TABLE webhook_subscriptions ADD COLUMN answered_at ${time};
      DROP INDEX webhook_deliveries_due;
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, subscription_id, next_attempt_at, id);
      CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (claimed_until);
    `,
  },
  {
    version: 8,
    // A copy of the store between dialects keeps each version and sets the sequence or counter past the highest one copied.
    name: 'plant versions, the source of ETags: from one store-wide sequence, so a version is never handed out twice',
    sql: ({ int8, versions }) => `
      ALTER TABLE plants ADD COLUMN version ${int8} NOT NULL DEFAULT 0;
      UPDATE plants SET version = numbered.version
        FROM (SELECT id AS numbered_id, row_number() OVER (ORDER BY id) AS version FROM plants) AS numbered WHERE id = numbered_id;
      ${versions}
    `,
  },
];
