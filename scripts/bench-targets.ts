// The baselines and references `npm run bench` measures the service against, each its own process:
//   node scripts/bench-targets.ts node             a bare node:http server (the ceiling on this machine)
//   node scripts/bench-targets.ts fastify          a bare Fastify route answering a constant plant
//   node scripts/bench-targets.ts sqlite-reference bare Fastify routes doing the service's store work on
//                                                  node:sqlite (DATABASE_URL=sqlite:<file>)
//   node scripts/bench-targets.ts pg-reference     the same on PostgreSQL through pg (DATABASE_URL=postgres://…)
// The references are the cost of the work itself, on the service's table (its primary key and its index
// by tag, which every insert maintains; on PostgreSQL, its version column, taken from a sequence on every
// insert and read back with one plant, not with a page): read one plant by primary key, read a page of 100
// (101 rows, as the service reads one more to know whether a next page exists), and insert with the
// service's group commit (creates arriving in the same event-loop turn share one transaction), with
// the service's durability (SQLite: WAL, synchronous=FULL; both: the answer after the commit). No
// auth, validation, ETag, hooks or metrics: that is what the service's ratio to them measures.
// Each prints its port when listening.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DatabaseSync } from 'node:sqlite';
import Fastify, { type FastifyInstance } from 'fastify';
import pg from 'pg';

const PLANT = '{"id":1,"name":"Monstera","tag":"aroid"}';
const PAGE = 100;

interface NewPlant {
  id: number;
  name: string;
  tag?: string;
}

/** The store work the references do; `insert` commits a whole batch at once. */
interface ReferenceStore {
  get(id: number): Promise<unknown>;
  page(limit: number): Promise<unknown[]>;
  insert(batch: NewPlant[]): Promise<void>;
}

const kind = process.argv[2];
if (kind === 'node') {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(PLANT) });
      response.end(PLANT);
    });
  });
  server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => console.log((server.address() as AddressInfo).port));
} else if (kind === 'fastify') {
  const app = Fastify();
  app.all('/*', async (_request, reply) => reply.type('application/json').send(PLANT));
  await listen(app);
} else if (kind === 'sqlite-reference') {
  await listen(referenceApp(sqliteStore(process.env.DATABASE_URL!.replace(/^sqlite:/, ''))));
} else if (kind === 'pg-reference') {
  await listen(referenceApp(await postgresStore(process.env.DATABASE_URL!)));
} else {
  console.error('usage: node scripts/bench-targets.ts node|fastify|sqlite-reference|pg-reference');
  process.exit(2);
}

async function listen(app: FastifyInstance): Promise<void> {
  await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
  console.log((app.server.address() as AddressInfo).port);
}

function referenceApp(store: ReferenceStore): FastifyInstance {
  const app = Fastify();
  const create = groupCommit(store);
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get<{ Params: { id: string } }>('/plants/:id', async (request, reply) => {
    const plant = await store.get(Number(request.params.id));
    return plant ?? reply.code(404).send({ error: 404, message: 'no such plant' });
  });
  app.get('/plants', async () => (await store.page(PAGE + 1)).slice(0, PAGE));
  app.post<{ Body: NewPlant }>('/plants', async (request) => {
    const { id, name, tag } = request.body;
    await create({ id, name, ...(tag !== undefined && { tag }) });
    return tag === undefined ? { name } : { name, tag };
  });
  return app;
}

/** Creates of one event-loop turn, committed together; each resolves once the batch is committed. */
function groupCommit(store: ReferenceStore): (plant: NewPlant) => Promise<void> {
  let batch: { plants: NewPlant[]; committed: Promise<void> } | undefined;
  return (plant) => {
    if (!batch) {
      const plants: NewPlant[] = [];
      const committed = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        batch = undefined;
        return store.insert(plants);
      });
      batch = { plants, committed };
    }
    batch.plants.push(plant);
    return batch.committed;
  };
}

function sqliteStore(path: string): ReferenceStore {
  const db = new DatabaseSync(path);
  db.exec(`
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    CREATE TABLE IF NOT EXISTS plants (id INTEGER PRIMARY KEY, name TEXT NOT NULL, tag TEXT) STRICT;
    CREATE INDEX IF NOT EXISTS plants_by_tag ON plants (tag, id);
  `);
  const get = db.prepare('SELECT id, name, tag FROM plants WHERE id = ?');
  // As the service reads a page: a bare `LIMIT ?` would be re-prepared by SQLite on every page (src/store/sqlite.ts).
  const page = db.prepare('SELECT id, name, tag FROM plants WHERE id >= ? ORDER BY id LIMIT CAST(? AS INTEGER)');
  const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING');
  return {
    get: async (id) => get.get(id),
    page: async (limit) => page.all(Number.MIN_SAFE_INTEGER, limit),
    insert: async (plants) => {
      db.exec('BEGIN IMMEDIATE');
      for (const plant of plants) insert.run(plant.id, plant.name, plant.tag ?? null);
      db.exec('COMMIT');
    },
  };
}

// Its own schema in the service's database, so the two share a server but not a table.
async function postgresStore(url: string): Promise<ReferenceStore> {
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  await setup.query('DROP SCHEMA IF EXISTS bench_reference CASCADE; CREATE SCHEMA bench_reference');
  // As the service's: each write takes the plant's version (its ETag) from a sequence; a read of one plant returns it, a page does not.
  await setup.query('CREATE TABLE bench_reference.plants (id BIGINT PRIMARY KEY, name TEXT NOT NULL, tag TEXT, version BIGINT NOT NULL)');
  await setup.query('CREATE INDEX plants_by_tag ON bench_reference.plants (tag, id)');
  await setup.query('CREATE SEQUENCE bench_reference.plant_versions');
  await setup.end();
  // The service's pool: DATABASE_POOL_SIZE's default of 10, int8 read as a number here (ids are small).
  const pool = new pg.Pool({ connectionString: url, max: 10, options: '-c search_path=bench_reference' });
  pg.types.setTypeParser(20, Number);
  return {
    get: async (id) => (await pool.query('SELECT id, name, tag, version FROM plants WHERE id = $1', [id])).rows[0],
    page: async (limit) =>
      (await pool.query('SELECT id, name, tag FROM plants WHERE id >= $1 ORDER BY id LIMIT $2', [Number.MIN_SAFE_INTEGER, limit])).rows,
    // In id order, answering the ids inserted, as the service's batch does (it tells created from existing by them).
    insert: async (plants) => {
      await pool.query(
        'INSERT INTO plants (id, name, tag, version) SELECT id, name, tag, nextval(\'plant_versions\') ' +
          'FROM unnest($1::int8[], $2::text[], $3::text[]) AS t(id, name, tag) ORDER BY id ON CONFLICT (id) DO NOTHING RETURNING id',
        [plants.map((plant) => plant.id), plants.map((plant) => plant.name), plants.map((plant) => plant.tag ?? null)],
      );
    },
  };
}
