import { isLosslessNumber, parse, stringify } from 'lossless-json';
import createClient from 'openapi-fetch';
import type { components, paths } from './plant-store.ts';

type StoredPlant = components['schemas']['StoredPlant'];

const store = createClient<paths>({
  baseUrl: process.env.PLANT_STORE_URL ?? 'http://127.0.0.1:3000',
  headers: { authorization: `Bearer ${process.env.PLANT_STORE_TOKEN}` },
  // a bigint written as a plain JSON integer, digit for digit (JSON.stringify throws on one)
  bodySerializer: (body) => stringify(body),
});

// JSON.parse rounds an integer above 2^53. Read answers as text (parseAs: 'text') and parse them
// with lossless-json: this API's int64 fields are its `id`s, read as bigints; any other number
// becomes a number, and lossless-json throws rather than round one.
function readJson<T>(text: string | undefined): T {
  return parse(text ?? '', (key, value) => (isLosslessNumber(value) ? (key === 'id' ? BigInt(value.value) : value.valueOf()) : value)) as T;
}

const id = 9007199254740993n; // 2^53 + 1
const created = await store.POST('/plants', { body: { id, name: 'Monstera', tag: 'aroid' } });
console.log(created.response.status, created.data);

const read = await store.GET('/plants/{id}', { params: { path: { id } }, parseAs: 'text' });
const plant = readJson<StoredPlant>(read.data);
console.log(plant.id, plant.id === id);

const list = await store.GET('/plants', { params: { query: { tag: 'aroid' } }, parseAs: 'text' });
for (const { id, name } of readJson<StoredPlant[]>(list.data)) console.log(id, name);
