// PlantStore on an embedded SQLite file through node:sqlite.
// Durability: WAL with synchronous=FULL, so an acknowledged create survives power loss.
// Throughput: creates that arrive in the same turn of the event loop share one transaction
// (group commit), so many creates pay for one fsync.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { migrations } from './migrations.ts';
import {
  samePlant,
  type CreateResult,
  type NewTokenRecord,
  type PlantRecord,
  type PlantStore,
  type TokenRecord,
} from './types.ts';

interface PendingCreate {
  plant: PlantRecord;
  resolve: (result: CreateResult) => void;
  reject: (error: unknown) => void;
}

interface PlantRow {
  id: bigint;
  name: string;
  tag: string | null;
}

interface TokenRow {
  id: bigint;
  name: string;
  hint: string;
  created_at: string;
}

export class SqliteStore implements PlantStore {
  readonly #db: DatabaseSync;
  readonly #insertPlant: StatementSync;
  readonly #selectPlant: StatementSync;
  readonly #selectTokenByHash: StatementSync;
  #pending: PendingCreate[] = [];
  #flushScheduled = false;

  constructor(path: string) {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.#db = new DatabaseSync(path);
    this.#db.exec(`
      PRAGMA journal_mode = WAL;
      PRAGMA synchronous = FULL;
      PRAGMA busy_timeout = 5000;
    `);
    try {
      applyMigrations(this.#db);
    } catch (error) {
      this.#db.close();
      throw error;
    }
    this.#insertPlant = this.#db.prepare(
      'INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING',
    );
    this.#selectPlant = this.#db.prepare('SELECT id, name, tag FROM plants WHERE id = ?');
    this.#selectTokenByHash = this.#db.prepare(
      'SELECT id, name, hint, created_at FROM api_tokens WHERE token_hash = ?',
    );
    for (const statement of [this.#selectPlant, this.#selectTokenByHash]) statement.setReadBigInts(true);
  }

  createPlant(plant: PlantRecord): Promise<CreateResult> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ plant, resolve, reject });
      if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        setImmediate(() => this.#flushCreates());
      }
    });
  }

  async findTokenByHash(hash: string): Promise<TokenRecord | undefined> {
    const row = this.#selectTokenByHash.get(hash) as TokenRow | undefined;
    return row && { id: Number(row.id), name: row.name, hint: row.hint, createdAt: row.created_at };
  }

  async createFirstToken(token: NewTokenRecord): Promise<boolean> {
    return this.#transaction(() => {
      const existing = this.#db.prepare('SELECT 1 FROM api_tokens LIMIT 1').get();
      if (existing) return false;
      this.#db
        .prepare('INSERT INTO api_tokens (name, token_hash, hint, created_at) VALUES (?, ?, ?, ?)')
        .run(token.name, token.hash, token.hint, new Date().toISOString());
      return true;
    });
  }

  async ping(): Promise<void> {
    this.#db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (!this.#db.isOpen) return;
    if (this.#pending.length > 0) this.#flushCreates();
    this.#db.close();
  }

  #flushCreates(): void {
    const batch = this.#pending;
    this.#pending = [];
    this.#flushScheduled = false;
    if (batch.length === 0) return;
    let results: CreateResult[];
    try {
      results = this.#transaction(() => batch.map(({ plant }) => this.#insertOrCompare(plant)));
    } catch (error) {
      for (const create of batch) create.reject(error);
      return;
    }
    batch.forEach((create, index) => create.resolve(results[index]!));
  }

  #insertOrCompare(plant: PlantRecord): CreateResult {
    const { changes } = this.#insertPlant.run(plant.id, plant.name, plant.tag ?? null);
    if (changes === 1) return { outcome: 'created', stored: plant };
    const stored = toPlant(this.#selectPlant.get(plant.id) as unknown as PlantRow);
    return { outcome: samePlant(stored, plant) ? 'unchanged' : 'conflict', stored };
  }

  #transaction<T>(work: () => T): T {
    this.#db.exec('BEGIN IMMEDIATE');
    try {
      const result = work();
      this.#db.exec('COMMIT');
      return result;
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      throw error;
    }
  }
}

function toPlant(row: PlantRow): PlantRecord {
  return row.tag === null ? { id: row.id, name: row.name } : { id: row.id, name: row.name, tag: row.tag };
}

/** Applies pending migrations in one immediate transaction, so two processes starting together serialize. */
function applyMigrations(db: DatabaseSync): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL
  ) STRICT`);
  db.exec('BEGIN IMMEDIATE');
  try {
    const row = db.prepare('SELECT max(version) AS version FROM schema_migrations').get() as { version: number | null };
    const current = row.version ?? 0;
    const latest = migrations.at(-1)?.version ?? 0;
    if (current > latest) {
      throw new Error(`The database is at schema version ${current}, newer than this release knows (${latest}).`);
    }
    const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    for (const migration of migrations.filter((m) => m.version > current)) {
      db.exec(migration.sqlite);
      record.run(migration.version, migration.name, new Date().toISOString());
    }
    db.exec('COMMIT');
  } catch (error) {
    db.exec('ROLLBACK');
    throw error;
  }
}
