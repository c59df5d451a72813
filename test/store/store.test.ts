import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { DatabaseUrlError, openStore } from '../../src/store/factory.ts';
import { migrations } from '../../src/store/migrations.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { PlantContent } from '../../src/store/types.ts';
import { readRows } from '../harness/helper.ts';
import { generateToken, hashToken, tokenHint } from '../../src/tokens/format.ts';
import { storeContract } from './store-contract.ts';

await storeContract(t, 'sqlite', async (t) => {
  const store = new SqliteStore(join(t.testdir(), 'plants.db'));
  t.teardown(() => store.close());
  return store;
});

const latestVersion = migrations.at(-1)!.version;


t.test('reopening the same file keeps the data and applies no migration twice', async (t) => {
  const path = join(t.testdir(), 'plants.db');
  const token = generateToken();
  const first = new SqliteStore(path);
  t.equal((await first.plants.createPlant({ id: 2n ** 63n - 1n, name: 'kept', tag: 'x' })).outcome, 'created');
  t.ok(await first.tokens.createFirstToken({ name: 'first-start', hash: hashToken(token), hint: tokenHint(token) }));
  await first.close();
  const appliedOnce = readRows(path, 'SELECT version, name, applied_at FROM schema_migrations ORDER BY version');

  for (const round of [1, 2]) {
    const again = new SqliteStore(path);
    t.teardown(() => again.close());
    const replay = await again.plants.createPlant({ id: 2n ** 63n - 1n, name: 'kept', tag: 'x' });
    t.equal(replay.outcome, 'unchanged', `reopen ${round}: the plant is still there`);
    const conflict = await again.plants.createPlant({ id: 2n ** 63n - 1n, name: 'other' });
    t.equal(conflict.outcome, 'conflict');
    t.same(conflict.stored, { id: 2n ** 63n - 1n, name: 'kept', tag: 'x' });
    t.equal((await again.tokens.findTokenByHash(hashToken(token)))?.name, 'first-start', `reopen ${round}: the token is still there`);
    t.equal(
      await again.tokens.createFirstToken({ name: 'second', hash: hashToken(generateToken()), hint: 'pst_…none' }),
      false,
      `reopen ${round}: no second first token`,
    );
    await again.close();
  }

  t.same(
    readRows(path, 'SELECT version, name FROM schema_migrations ORDER BY version'),
    migrations.map(({ version, name }) => ({ version, name })),
    'exactly one row per migration',
  );
  t.same(
    readRows(path, 'SELECT version, name, applied_at FROM schema_migrations ORDER BY version'),
    appliedOnce,
    'the rows written by the first open are untouched',
  );
});

t.test('the file is in WAL mode', async (t) => {
  const path = join(t.testdir(), 'plants.db');
  const store = new SqliteStore(path);
  t.teardown(() => store.close());
  await store.plants.createPlant({ id: 1n, name: 'x' });
  // journal_mode=WAL is stored in the file itself, so a second connection sees it.
  t.same(readRows(path, 'PRAGMA journal_mode'), [{ journal_mode: 'wal' }]);
});

t.test("the store's own connection runs with synchronous=FULL", async (t) => {
  // synchronous is per connection and the store keeps its connection private, so the test
  // catches that connection as the store opens it and asks it directly.
  const connections = new Set<DatabaseSync>();
  const exec = DatabaseSync.prototype.exec;
  DatabaseSync.prototype.exec = function (this: DatabaseSync, sql: string) {
    connections.add(this);
    return exec.call(this, sql);
  };
  let store: SqliteStore;
  try {
    store = new SqliteStore(join(t.testdir(), 'plants.db'));
  } finally {
    DatabaseSync.prototype.exec = exec;
  }
  t.teardown(() => store.close());
  t.equal(connections.size, 1, 'the store opened one connection');
  const [connection] = connections;
  t.same(connection!.prepare('PRAGMA synchronous').get(), { synchronous: 2 }, 'synchronous = 2 (FULL)');
  t.same(connection!.prepare('PRAGMA journal_mode').get(), { journal_mode: 'wal' });
});

t.test('creates issued together share one transaction (group commit)', async (t) => {
  const store = new SqliteStore(join(t.testdir(), 'plants.db'));
  t.teardown(() => store.close());
  // Each transaction is one BEGIN IMMEDIATE on the store's connection: count them while the creates run.
  const statements: string[] = [];
  const exec = DatabaseSync.prototype.exec;
  DatabaseSync.prototype.exec = function (this: DatabaseSync, sql: string) {
    statements.push(sql.trim());
    return exec.call(this, sql);
  };
  let outcomes: string[];
  try {
    const results = await Promise.all(Array.from({ length: 100 }, (_, index) => store.plants.createPlant({ id: BigInt(index), name: `plant ${index}` })));
    outcomes = results.map((result) => result.outcome);
  } finally {
    DatabaseSync.prototype.exec = exec;
  }
  t.same(new Set(outcomes), new Set(['created']));
  const transactions = statements.filter((sql) => /^(BEGIN|COMMIT|ROLLBACK$)/.test(sql));
  t.same(transactions, ['BEGIN IMMEDIATE', 'COMMIT'], 'one transaction, one commit for 100 creates');
});

// A plant write without subscribers runs without a savepoint of its own: the failing statement must undo
// itself and leave the transaction to the writes beside it. With a subscriber, its outbox rows go with it.
for (const subscribed of [false, true]) {
  t.test(`a plant write the database refuses rejects only its own call (${subscribed ? 'with' : 'without'} a subscriber)`, async (t) => {
    const store = new SqliteStore(join(t.testdir(), 'plants.db'));
    t.teardown(() => store.close());
    if (subscribed) await store.webhooks.createSubscription({ url: 'https://example.com/hook', events: ['plant.created', 'plant.replaced'], secret: 'whsec_x' }, 100);
    t.equal((await store.plants.createPlant({ id: 10n, name: 'ten' })).outcome, 'created');
    await store.webhooks.claimDueDeliveries(new Date('2100-01-01T00:00:00Z'), 60_000, 100);
    // Neither passes the table's constraints (tag TEXT in a STRICT table, name NOT NULL); the handlers' validation
    // keeps such values away, so only a fault in this process could send them.
    const refusedTag = { name: 'two', tag: new Uint8Array([2]) } as unknown as PlantContent;
    const refusedName = { name: null } as unknown as PlantContent;
    const settled = await Promise.allSettled([
      store.plants.createPlant({ id: 1n, name: 'one' }),
      store.plants.createPlant({ id: 2n, ...refusedTag }),
      store.plants.replacePlant(10n, refusedName),
      store.plants.createPlant({ id: 3n, name: 'three' }),
      store.plants.replacePlant(10n, { name: 'ten renamed' }),
    ]);
    t.strictSame(
      settled.map((result) => result.status),
      ['fulfilled', 'rejected', 'rejected', 'fulfilled', 'fulfilled'],
      'only the two refused writes reject',
    );
    t.strictSame(
      await store.plants.listPlants({ limit: 10 }),
      [{ id: 1n, name: 'one' }, { id: 3n, name: 'three' }, { id: 10n, name: 'ten renamed' }],
      'the writes beside them are stored, the refused ones left nothing',
    );
    const claimed = await store.webhooks.claimDueDeliveries(new Date('2100-01-01T00:00:00Z'), 60_000, 100);
    t.strictSame(
      claimed.map((delivery) => [delivery.event, delivery.payload]),
      subscribed
        ? [
            ['plant.created', '{"id":1,"name":"one"}'],
            ['plant.created', '{"id":3,"name":"three"}'],
            ['plant.replaced', '{"id":10,"name":"ten renamed"}'],
          ]
        : [],
      'one outbox row per stored write, none for the refused ones',
    );
  });
}

t.test('plant writes see the subscriptions as they stand at each write, within a batch and across processes', async (t) => {
  const path = join(t.testdir(), 'plants.db');
  const store = new SqliteStore(path);
  t.teardown(() => store.close());
  const hook = (name: string) => ({ url: `https://example.com/${name}`, events: ['plant.created'] as const, secret: `whsec_${name}` });
  const outbox = async () =>
    (await store.webhooks.claimDueDeliveries(new Date('2100-01-01T00:00:00Z'), 60_000, 100)).map((delivery) => [delivery.url, delivery.payload]);

  // Issued in one tick: one batch, the subscription created between two writes (the first one found no subscriber).
  await Promise.all([
    store.plants.createPlant({ id: 1n, name: 'before' }),
    store.webhooks.createSubscription(hook('new'), 100),
    store.plants.createPlant({ id: 2n, name: 'after' }),
  ]);
  t.strictSame(await outbox(), [['https://example.com/new', '{"id":2,"name":"after"}']], 'the write after the subscription has its event');
  await store.webhooks.deleteSubscription((await store.webhooks.listSubscriptions({ limit: 1000 }))[0]!.id);

  // Another process subscribes between two batches of this one.
  t.equal((await store.plants.createPlant({ id: 5n, name: 'unwatched' })).outcome, 'created');
  const other = new DatabaseSync(path);
  other.prepare('INSERT INTO webhook_subscriptions (url, events, secret, created_at) VALUES (?, ?, ?, ?)')
    .run('https://example.com/other', 'plant.created', 'whsec_other', new Date().toISOString());
  other.close();
  t.equal((await store.plants.createPlant({ id: 6n, name: 'watched' })).outcome, 'created');
  t.strictSame(await outbox(), [['https://example.com/other', '{"id":6,"name":"watched"}']], "the other process's subscription gets the next write");
});

t.test('the database file keeps the token hash and hint, never the token', async (t) => {
  const path = join(t.testdir(), 'plants.db');
  const store = new SqliteStore(path);
  const token = generateToken();
  const hash = hashToken(token);
  t.ok(await store.tokens.createFirstToken({ name: 'first-start', hash, hint: tokenHint(token) }));
  const rows = readRows(path, 'SELECT * FROM api_tokens') as Record<string, unknown>[];
  t.equal(rows.length, 1);
  t.equal(rows[0]!.token_hash, hash, 'the hash is stored as given');
  t.equal(rows[0]!.hint, tokenHint(token));
  const secret = token.slice('pst_'.length, -4);
  t.notOk(
    rows.some((row) => Object.values(row).some((value) => String(value).includes(secret))),
    'no column holds the token',
  );
  await store.close();
  // After close the WAL is checkpointed into the file: look at every byte on disk.
  const bytes = [path, `${path}-wal`].filter(existsSync).map((file) => readFileSync(file).toString('latin1')).join('');
  t.ok(bytes.includes(hash), 'the file holds the hash');
  t.notOk(bytes.includes(secret), 'the file never holds the token');
});

t.test('a database migrated by a newer release is refused with a clear error', async (t) => {
  const path = join(t.testdir(), 'future.db');
  const db = new DatabaseSync(path);
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL) STRICT');
  db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
    latestVersion + 1,
    'from a newer release',
    '2030-01-01T00:00:00.000Z',
  );
  db.close();
  const message = new RegExp(`schema version ${latestVersion + 1}, newer than this release knows \\(${latestVersion}\\)`);
  t.throws(() => new SqliteStore(path), { message });
  await t.rejects(openStore(`sqlite:${path}`), { message }, 'openStore refuses it too');
  t.same(
    readRows(path, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name"),
    [{ name: 'schema_migrations' }],
    'no migration ran on it',
  );
});

t.test('openStore("sqlite:<path>") opens a store, creating missing directories', async (t) => {
  const path = join(t.testdir(), 'missing', 'nested', 'plants.db');
  t.notOk(existsSync(dirname(path)), 'the directory does not exist yet');
  const store = await openStore(`sqlite:${path}`);
  t.teardown(() => store.close());
  t.ok(existsSync(path), 'the file was created');
  t.equal((await store.plants.createPlant({ id: 3n, name: 'Fern' })).outcome, 'created');
  await t.resolves(store.ping());
  t.same(readRows(path, 'SELECT name FROM plants'), [{ name: 'Fern' }], 'the store writes to that file');
});

t.test('openStore refuses a URL of an unknown kind without echoing its password', async (t) => {
  for (const url of ['mysql://u:secret@h/db', 'mysql://h/db?password=secret', 'mysql://u:se/cret@h/db', 'mysql://u:p@secret@h/db']) {
    const error = await openStore(url).then(
      () => undefined,
      (error: unknown) => error,
    );
    t.ok(error instanceof DatabaseUrlError, 'a DatabaseUrlError');
    const { message } = error as Error;
    t.match(message, /DATABASE_URL/, 'the message names DATABASE_URL');
    t.match(message, /got a "mysql:" URL/, 'and the kind of URL it got');
    t.notOk(/secret|cret/.test(message), `the password is not echoed: ${message}`);
  }
});

t.test('openStore("sqlite:") without a path is refused clearly', async (t) => {
  const error = await openStore('sqlite:').then(
    () => undefined,
    (error: unknown) => error,
  );
  t.ok(error instanceof DatabaseUrlError, 'a DatabaseUrlError');
  t.match((error as Error).message, /DATABASE_URL/);
  t.match((error as Error).message, /path/);
});
