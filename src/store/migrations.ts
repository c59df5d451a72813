// Versioned schema migrations, applied by sql.ts's migrate. Each version exists once per dialect; versions only ever append.
import type { PlantContent } from './types.ts';

export type Dialect = 'sqlite' | 'postgres';

/** The table of applied versions, as every release since the first has made it. */
export const MIGRATION_TABLE: Record<Dialect, string> = {
  sqlite: 'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL) STRICT',
  postgres: 'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())',
};

/** The migration that gives each field of a plant its column, in both drivers: a field added to the spec fails here until one does. */
export const PLANT_FIELD_MIGRATIONS = { name: 1, tag: 1 } satisfies Record<keyof PlantContent, number>;

export type Migration = { version: number; name: string } & Record<Dialect, string>;

export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: 'plants and api tokens',
    sqlite: `
      CREATE TABLE plants (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        tag TEXT
      ) STRICT;
      CREATE TABLE api_tokens (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        token_hash TEXT NOT NULL UNIQUE,
        hint TEXT NOT NULL,
        created_at TEXT NOT NULL
      ) STRICT;
    `,
    postgres: `
      CREATE TABLE plants (
        id BIGINT PRIMARY KEY,
        name TEXT NOT NULL,
        tag TEXT
      );
      CREATE TABLE api_tokens (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        token_hash TEXT NOT NULL UNIQUE,
        hint TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: 'index plants by tag for filtered pages',
    sqlite: 'CREATE INDEX plants_by_tag ON plants (tag, id);',
    postgres: 'CREATE INDEX plants_by_tag ON plants (tag, id);',
  },
  {
    version: 3,
    name: 'token scopes, expiry, revocation and last use',
    sqlite: `
      ALTER TABLE api_tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT '*';
      ALTER TABLE api_tokens ADD COLUMN expires_at TEXT;
      ALTER TABLE api_tokens ADD COLUMN revoked_at TEXT;
      ALTER TABLE api_tokens ADD COLUMN last_used_at TEXT;
    `,
    postgres: `
      ALTER TABLE api_tokens
        ADD COLUMN scopes TEXT NOT NULL DEFAULT '*',
        ADD COLUMN expires_at TIMESTAMPTZ,
        ADD COLUMN revoked_at TIMESTAMPTZ,
        ADD COLUMN last_used_at TIMESTAMPTZ;
    `,
  },
  {
    version: 4,
    name: 'webhook subscriptions and the delivery outbox',
    sqlite: `
      CREATE TABLE webhook_subscriptions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        url TEXT NOT NULL,
        events TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_at TEXT NOT NULL,
        disabled_at TEXT,
        disabled_reason TEXT
      ) STRICT;
      CREATE TABLE webhook_deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT NOT NULL UNIQUE,
        subscription_id INTEGER NOT NULL,
        event TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT,
        claimed_until TEXT,
        last_attempt_at TEXT,
        last_response_status INTEGER,
        last_error TEXT
      ) STRICT;
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
      CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id, id);
    `,
    postgres: `
      CREATE TABLE webhook_subscriptions (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        url TEXT NOT NULL,
        events TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        disabled_at TIMESTAMPTZ,
        disabled_reason TEXT
      );
      CREATE TABLE webhook_deliveries (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        message_id TEXT NOT NULL UNIQUE,
        subscription_id BIGINT NOT NULL,
        event TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TIMESTAMPTZ,
        claimed_until TIMESTAMPTZ,
        last_attempt_at TIMESTAMPTZ,
        last_response_status INTEGER,
        last_error TEXT
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
      CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id, id);
    `,
  },
  {
    version: 5,
    name: 'the traceparent of the change behind each webhook delivery',
    sqlite: 'ALTER TABLE webhook_deliveries ADD COLUMN traceparent TEXT;',
    postgres: 'ALTER TABLE webhook_deliveries ADD COLUMN traceparent TEXT;',
  },
];
