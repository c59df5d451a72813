import { createPlantStoreClient } from '@plant-store/client';

const store = createPlantStoreClient({
  baseUrl: process.env.PLANT_STORE_URL ?? 'http://127.0.0.1:3000',
  token: process.env.PLANT_STORE_TOKEN, // the token npm start printed
});

// ids are bigints, exact above 2^53 on Node 20 and later and in browsers
await store.plants.create({ id: 9007199254740993n, name: 'Monstera', tag: 'araceae' });
const { plant } = await store.plants.get(9007199254740993n);
console.log(plant);

// every plant in the store, page after page
for await (const { id, name } of store.plants.all()) console.log(id, name);
