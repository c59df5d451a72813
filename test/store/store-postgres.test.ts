// The store contract on PostgreSQL, plus what only a shared server has: migrations raced by
// instances starting together, startup retries, and connections lost under a running store.
import t, { type Test } from 'tap';
import pg from 'pg';
import { loadConfig, storeOptions } from '../../src/config.ts';
import { migrations } from '../../src/store/migrations.ts';
import { PostgresStore } from '../../src/store/postgres.ts';
import { StoreUnavailableError } from '../../src/store/types.ts';
import { storeContract } from './store-contract.ts';
import { freshSchemaUrl, postgresTestOptions } from '../harness/postgres.ts';

const options = await postgresTestOptions();
const DEFAULTS = storeOptions(loadConfig({}));

async function openFresh(t: Test, url?: string): Promise<PostgresStore> {
  const store = await PostgresStore.open(url ?? (await freshSchemaUrl()), { ...DEFAULTS, poolSize: 4 });
  t.teardown(() => store.close());
  return store;
}

t.test('postgres', options, async (t) => {
  await storeContract(t, 'postgres', (t) => openFresh(t));

  t.test('instances starting at the same moment migrate once, without failing', async (t) => {
    const url = await freshSchemaUrl();
    const stores = await Promise.all(Array.from({ length: 6 }, () => openFresh(t, url)));
    t.equal(stores.length, 6, 'every instance opened');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    t.teardown(() => client.end());
    const { rows } = await client.query('SELECT version FROM schema_migrations ORDER BY version');
    t.same(rows.map((row) => row.version), migrations.map((m) => m.version), 'each version applied exactly once');
    t.equal((await stores[0]!.plants.createPlant({ id: 1n, name: 'x' })).outcome, 'created');
    t.equal((await stores[5]!.plants.createPlant({ id: 1n, name: 'y' })).outcome, 'conflict', 'they share one database');
  });

  t.test('racing instances creating one id: exactly one winner', async (t) => {
    const url = await freshSchemaUrl();
    const [a, b] = await Promise.all([openFresh(t, url), openFresh(t, url)]);
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).plants.createPlant({ id: 9_007_199_254_740_993n, name: `contender ${i}` })),
    );
    t.equal(results.filter((r) => r.outcome === 'created').length, 1, 'one created');
    t.equal(results.filter((r) => r.outcome === 'conflict').length, 39, 'the rest conflict');
  });

  // The plant handler wakes the webhook dispatcher after a create only when the create may have written deliveries.
  t.test('createPlant says whether it wrote deliveries, alone and issued together', async (t) => {
    const store = await openFresh(t);
    const wrote = async (ids: bigint[]) =>
      (await Promise.all(ids.map((id) => store.plants.createPlant({ id, name: `plant ${id}` })))).map((result) => result.eventWritten);
    t.same(await wrote([1n]), [false], 'alone, nobody subscribes');
    t.same(await wrote([2n, 3n, 4n]), [false, false, false], 'together, nobody subscribes');
    await store.webhooks.createSubscription({ url: 'https://example.com/deleted', events: ['plant.deleted'], secret: 'whsec_deleted' }, 100);
    t.same(await wrote([5n, 6n]), [false, false], 'a subscription to another event writes nothing');
    await store.webhooks.createSubscription({ url: 'https://example.com/created', events: ['plant.created'], secret: 'whsec_created' }, 100);
    t.same(await wrote([7n]), [true], 'alone, with a subscriber');
    t.same(await wrote([8n, 9n, 10n]), [true, true, true], 'together, with a subscriber');
    t.equal((await store.plants.createPlant({ id: 7n, name: 'plant 7' })).eventWritten, undefined, 'a replay wrote nothing and says nothing');
  });

  // Creates issued together share one statement; PostgreSQL refuses a NUL character in text,
  // which fails that statement, and the batch then falls back to one statement per create.
  t.test('a create the database refuses fails alone; the creates issued with it are written', async (t) => {
    const store = await openFresh(t);
    await store.plants.createPlant({ id: 2n, name: 'stored' });
    const settled = await Promise.allSettled([
      store.plants.createPlant({ id: 1n, name: 'fine' }),
      store.plants.createPlant({ id: 2n, name: 'stored' }),
      store.plants.createPlant({ id: 3n, name: 'nul \u0000 inside' }),
      store.plants.createPlant({ id: 4n, name: 'also fine', tag: 't' }),
    ]);
    t.same(
      settled.map((result) => (result.status === 'fulfilled' ? result.value.outcome : 'rejected')),
      ['created', 'unchanged', 'rejected', 'created'],
    );
    t.same((await store.plants.listPlants({ limit: 10 })).map((plant) => plant.id), [1n, 2n, 4n], 'only the refused plant is missing');
  });

  t.test('an unreachable server is retried with backoff at startup, then reported', async (t) => {
    const retries: number[] = [];
    const failure = await PostgresStore.open('postgres://root@127.0.0.1:1/none', {
      ...DEFAULTS,
      poolSize: 1,
      startupAttempts: 3,
      onConnectionError: (_error, retryInMs) => retries.push(retryInMs!),
    }).then(
      () => undefined,
      (error: unknown) => error,
    );
    t.type(failure, StoreUnavailableError, 'gives up with StoreUnavailableError');
    t.same(retries, [250, 500], 'two retries, the delay doubling');
  });

  t.test('a lost connection is reported, never crashes, and the pool reconnects', async (t) => {
    const url = await freshSchemaUrl();
    const lost: Error[] = [];
    const store = await PostgresStore.open(url, { ...DEFAULTS, poolSize: 2, onConnectionError: (error) => lost.push(error) });
    t.teardown(() => store.close());
    await store.plants.createPlant({ id: 1n, name: 'before' });
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    t.teardown(() => admin.end());
    const { rowCount } = await admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    t.ok(rowCount! >= 1, `terminated ${rowCount} connection(s) of the store`);
    // The pool learns of the loss on its own (an 'error' event), or the next query does.
    const next = await store.plants.getPlant(1n).then(
      (plant) => plant,
      (error: unknown) => error,
    );
    if (next instanceof Error) t.type(next, StoreUnavailableError, 'a query on a dead connection is StoreUnavailableError');
    t.same((await store.plants.getPlant(1n))?.plant, { id: 1n, name: 'before' }, 'then the pool serves again on a new connection');
    await store.ping();
    t.ok(lost.length >= 1 || next instanceof StoreUnavailableError, 'the loss was reported');
  });
});
