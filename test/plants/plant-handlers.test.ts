// The handlers wake the webhook dispatcher after a write only when it may have added deliveries: a write the
// store says added none (no subscriber) leaves it asleep, so busy writes without subscribers cost no outbox polls.
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { FastifyReply } from 'fastify';
import { createPlantHandlers, type PlantHandlers } from '../../src/plants/handlers.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { PlantRecord, PlantRepository, PlantStore } from '../../src/store/types.ts';

/** Only what the plant handlers read of a request. */
function request<Fields extends object>(fields: Fields): never {
  return { headers: {}, ...fields } as never;
}
const reply = { header: () => reply, code: () => reply, send: () => reply } as unknown as FastifyReply;

async function handlersOn(t: Test): Promise<{ store: PlantStore; wakes: () => number; handlers: PlantHandlers }> {
  const store = new SqliteStore(join(t.testdir(), 'plants.db'));
  t.teardown(() => store.close());
  let woken = 0;
  return { store, wakes: () => woken, handlers: createPlantHandlers({ store: store.plants, afterChange: () => woken++ }) };
}

async function writeEach(handlers: PlantHandlers): Promise<void> {
  await handlers.createPlant(request({ body: { id: 1n, name: 'one' } }), reply);
  await handlers.replacePlant(request({ params: { id: 1n }, body: { name: 'one renamed' } }), reply);
  await handlers.deletePlant(request({ params: { id: 1n } }), reply);
}

t.test('without a subscriber, creates, replaces and deletes leave the dispatcher asleep', async (t) => {
  const { handlers, wakes } = await handlersOn(t);
  await writeEach(handlers);
  t.equal(wakes(), 0);
});

t.test('with a subscriber, each of them wakes it', async (t) => {
  const { store, handlers, wakes } = await handlersOn(t);
  await store.webhooks.createSubscription({ url: 'https://example.com/hook', events: ['plant.created', 'plant.replaced', 'plant.deleted'], secret: 'whsec_x' }, 100);
  await writeEach(handlers);
  t.equal(wakes(), 3);
  t.equal(await store.webhooks.countPendingDeliveries(), 3, 'three deliveries to send');
});

t.test('a store that does not say whether it wrote an event wakes it after every change', async (t) => {
  const { store } = await handlersOn(t);
  // The SQLite store's results without eventWritten, as a driver that does not know it answers (PostgreSQL, for now).
  const silent: PlantRepository = Object.create(store.plants, {
    createPlant: { value: async (plant: PlantRecord) => ({ ...(await store.plants.createPlant(plant)), eventWritten: undefined }) },
  });
  let woken = 0;
  const handlers = createPlantHandlers({ store: silent, afterChange: () => woken++ });
  await handlers.createPlant(request({ body: { id: 1n, name: 'one' } }), reply);
  t.equal(woken, 1);
});
