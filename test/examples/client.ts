import { createPlantStoreClient, PlantStoreError } from '@plant-store/client';

const store = createPlantStoreClient({
  baseUrl: process.env.PLANT_STORE_URL ?? 'http://127.0.0.1:3000',
  token: process.env.PLANT_STORE_TOKEN, // sent as Authorization: Bearer …
});

// ids are bigints: exact beyond 2^53, both ways
await store.plants.create({ id: 9007199254740993n, name: 'Monstera', tag: 'araceae' });
await store.plants.create({ id: 2n ** 63n - 1n, name: 'Philodendron', tag: 'araceae' });
await store.plants.create({ id: 42n, name: 'Anthurium', tag: 'araceae' });

// every plant tagged araceae, page after page through the Link header (two a page, to show it)
for await (const plant of store.plants.all({ tag: 'araceae', limit: 2 })) {
  console.log(plant.id, plant.name);
}

// get answers the ETag; replace and delete take it as If-Match
const { plant, etag } = await store.plants.get(9007199254740993n);
const replaced = await store.plants.replace(plant.id, { name: 'Monstera deliciosa', tag: 'araceae' }, { ifMatch: etag });
try {
  await store.plants.delete(plant.id, { ifMatch: etag }); // stale: the replace changed the ETag
} catch (error) {
  if (!(error instanceof PlantStoreError)) throw error;
  console.log(error.status, error.etag === replaced.etag); // the 412 carries the current ETag
}
await store.plants.delete(plant.id, { ifMatch: replaced.etag });

// every failure is a PlantStoreError: status, and the API's Error body (error, message)
try {
  await store.plants.create({ id: 42n, name: 'Ficus' }); // another plant with a used id
} catch (error) {
  if (!(error instanceof PlantStoreError)) throw error;
  console.log(error.status, error.error, typeof error.message);
}
