// The store latency histogram (observability/metrics.ts instrument) observes each store call beside its
// caller, which awaits the store's own promise: these pin that both outcomes are counted and that a
// failure reaches the caller unchanged.
import { join } from 'node:path';
import Fastify from 'fastify';
import t from 'tap';
import { createMetrics } from '../../src/observability/metrics.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';

async function storeCalls(registry: { metrics(): Promise<string> }, method: string, outcome: string): Promise<number> {
  const line = (await registry.metrics()).split('\n').find((text) => text.startsWith(`store_operation_duration_seconds_count{method="${method}",outcome="${outcome}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

t.test('each store call is observed, a failure as an error that reaches its caller unchanged', async (t) => {
  const app = Fastify();
  t.teardown(() => app.close());
  const metrics = createMetrics(app, async () => 0);
  const plain = new SqliteStore(join(t.testdir(), 'plants.db'));
  const store = metrics.instrument(plain.plants);

  const created = await store.createPlant({ id: 1n, name: 'Monstera' });
  t.equal(created.outcome, 'created', 'the caller gets the store result');
  t.equal(await storeCalls(metrics.registry, 'createPlant', 'ok'), 1, 'observed as ok');

  await plain.close();
  let caught: unknown;
  try {
    await store.createPlant({ id: 2n, name: 'Fern' });
  } catch (error) {
    caught = error;
    t.equal(await storeCalls(metrics.registry, 'createPlant', 'error'), 1, 'observed as an error');
  }
  t.match(caught, { message: 'The store is closed.' }, 'the caller gets the store error itself');
  t.equal(await storeCalls(metrics.registry, 'createPlant', 'ok'), 1, 'and not as ok');
});
