// A database written by the store before it was one store over two drivers (the fixtures: a SQLite
// .dump and a pg_dump of a schema, each made by that code: tokens, plants, subscriptions, deliveries
// with its message ids, md5 ones included) opens with the current store, which reads and extends it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import t, { type Test } from 'tap';
import { loadConfig, storeOptions } from '../../src/config.ts';
import { migrations } from '../../src/store/migrations.ts';
import { PostgresStore } from '../../src/store/postgres.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { TokenNameTakenError, type PlantStore } from '../../src/store/types.ts';
import { freshSchemaUrl, postgresTestOptions } from '../harness/postgres.ts';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures', name), 'utf8');
const MESSAGE_ID = /^msg_[0-9a-f]{32}_\d+$/;
const AFTER_LEASES = new Date('2030-01-01T00:02:00.000Z');

async function upgraded(t: Test, store: PlantStore, versions: () => Promise<number[]>): Promise<void> {
  t.same(await versions(), migrations.map((migration) => migration.version), 'no version applied again, none added');
  t.strictSame(await store.plants.listPlants({ limit: 10 }), [
    { id: -9223372036854775808n, name: 'min' },
    { id: 3n, name: 'Ivy', tag: 'climber' },
    { id: 9007199254740993n, name: 'Monstera', tag: 'aroid' },
  ]);
  // Migration 8: each stored plant has a version of its own, the source of its ETag.
  const versionOf = async (id: bigint) => (await store.plants.getPlant(id))!.version;
  const migrated = await Promise.all([-9223372036854775808n, 3n, 9007199254740993n].map(versionOf));
  t.equal(new Set(migrated).size, 3, 'the stored plants got distinct versions');
  t.equal((await store.plants.createPlant({ id: 3n, name: 'Ivy', tag: 'climber' })).outcome, 'unchanged', 'a stored plant replays');
  t.equal(await versionOf(3n), migrated[1], 'and keeps its version');

  const first = await store.tokens.findTokenByHash('a'.repeat(64));
  t.match(first, { id: 1, name: 'first', scopes: ['*'], lastUsedAt: '2026-11-27T10:00:00.000Z' });
  t.match(await store.tokens.findTokenByHash('b'.repeat(64)), { name: 'reader', scopes: ['plants:read'], expiresAt: '2099-01-01T00:00:00.000Z' });
  t.type((await store.tokens.findTokenByHash('c'.repeat(64)))?.revokedAt, 'string', 'a revoked token stays revoked');
  await t.rejects(store.tokens.createToken({ name: 'first', hash: 'd'.repeat(64), hint: 'pst_…dddd' }), { message: new TokenNameTakenError('first').message });
  t.ok((await store.tokens.createToken({ name: 'new', hash: 'e'.repeat(64), hint: 'pst_…eeee' })).id > 3, 'ids go on after the stored ones');
  t.equal(await store.tokens.createFirstToken({ name: 'again', hash: 'f'.repeat(64), hint: 'pst_…ffff' }), false);

  const [kept, gone] = await store.webhooks.listSubscriptions({ limit: 1000 });
  t.match(kept, { id: 1n, url: 'https://hooks.example.com/kept' });
  t.notOk(kept!.disabledAt);
  t.match(gone, { id: 2n, disabledReason: 'the receiver answered 410 Gone' });
  const keptBefore = (await store.webhooks.listDeliveries(1n, 100))!;
  t.equal(keptBefore.length, 6, 'one delivery of each change to the subscriber of every event');
  t.ok([...keptBefore, ...(await store.webhooks.listDeliveries(2n, 100))!].every((delivery) => MESSAGE_ID.test(delivery.messageId)), 'stored message ids');
  t.equal(await store.webhooks.countPendingDeliveries(), 5);

  const due = await store.webhooks.claimDueDeliveries(AFTER_LEASES, 60_000, 100);
  const pending = keptBefore.filter((delivery) => delivery.status === 'pending');
  t.same(due.map((delivery) => delivery.messageId).sort(), pending.map((delivery) => delivery.messageId).sort(), 'due again under their stored ids');
  for (const delivery of due) await store.webhooks.recordAttempt({ id: delivery.id, at: '2030-01-01T00:02:01.000Z', result: 'delivered', responseStatus: 200 });
  t.equal(await store.webhooks.countPendingDeliveries(), 0);

  t.equal((await store.plants.createPlant({ id: 4n, name: 'Moss' })).outcome, 'created');
  const [created] = (await store.webhooks.listDeliveries(1n, 1))!;
  t.match(created, { event: 'plant.created', status: 'pending', messageId: MESSAGE_ID });
  t.notOk(keptBefore.some((delivery) => delivery.messageId === created!.messageId), 'a new message id beside the old ones');
  const later = new Date('2030-01-01T00:03:00.000Z');
  t.equal(await store.webhooks.pruneDeliveries(later, later), 10, 'rows attempted before and since are pruned alike');
  t.equal(await store.webhooks.countPendingDeliveries(), 1, 'the new delivery is kept');

  // The columns of migration 6: a stored subscription rotates its secret, a stored disabled one is enabled again.
  const rotated = await store.webhooks.rotateSubscriptionSecret(1n, 'whsec_bmV3', new Date('2030-01-02T00:00:00.000Z'));
  t.match(rotated, { id: 1n, previousSecretExpiresAt: '2030-01-02T00:00:00.000Z' }, 'a stored subscription rotates its secret');
  t.notOk((await store.webhooks.enableSubscription(2n))?.disabledAt, 'a stored disabled subscription is enabled again');
  t.equal((await store.plants.createPlant({ id: 5n, name: 'Fern' })).outcome, 'created');
  const signed = await store.webhooks.claimDueDeliveries(new Date('2030-01-01T00:04:00.000Z'), 60_000, 100);
  t.same(signed.map((delivery) => delivery.subscriptionId).sort(), [1n, 1n, 2n], 'both subscriptions get the new event');
  t.ok(signed.filter((delivery) => delivery.subscriptionId === 1n).every((delivery) => delivery.secret === 'whsec_bmV3' && typeof delivery.previousSecret === 'string'),
    'signed by the new secret and the stored one');

  const written = [await versionOf(4n), await versionOf(5n)];
  t.ok(written.every((version) => migrated.every((before) => version > before)), 'plants written after the migration get versions after the migrated ones');
  const replaced = await store.plants.replacePlant(3n, { name: 'Ivy', tag: 'evergreen' });
  t.ok(replaced.outcome === 'done' && !migrated.includes(replaced.version) && !written.includes(replaced.version), 'a replace of a migrated plant: a new version');
}

t.test('a SQLite file written before opens and keeps working', async (t) => {
  const path = join(t.testdir(), 'plants.db');
  const db = new DatabaseSync(path);
  db.exec(fixture('store-before.sqlite.sql'));
  db.close();
  const store = new SqliteStore(path);
  t.teardown(() => store.close());
  await upgraded(t, store, async () => {
    const reader = new DatabaseSync(path, { readOnly: true });
    const rows = reader.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as { version: number }[];
    reader.close();
    return rows.map((row) => row.version);
  });
});

t.test('a PostgreSQL schema written before opens and keeps working', await postgresTestOptions(), async (t) => {
  const url = await freshSchemaUrl();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  t.teardown(() => client.end());
  await client.query(fixture('store-before.postgres.sql'));
  const store = await PostgresStore.open(url, { ...storeOptions(loadConfig({})), poolSize: 2 });
  t.teardown(() => store.close());
  await upgraded(t, store, async () => (await client.query('SELECT version FROM schema_migrations ORDER BY version')).rows.map((row) => row.version));
});
