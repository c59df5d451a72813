// Versioned schema migrations. Each version exists once per driver; versions only ever append.

export interface Migration {
  version: number;
  name: string;
  sqlite: string;
  postgres: string;
}

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
];
