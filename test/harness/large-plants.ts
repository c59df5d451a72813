// The store of the memory and load scripts and of the load-shedding test: 1,000 plants whose names
// are 256 characters of three bytes each, so that a page of 1,000 is about 0.8 MB of JSON.
import { openStore } from '../../src/store/factory.ts';

export const TOKEN = 'bench-token-0123456789abcdef';

export async function fillLargePlants(path: string): Promise<void> {
  const store = await openStore(`sqlite:${path}`);
  for (let id = 1; id <= 1000; id++) {
    const name = Array.from({ length: 256 }, (_, i) => String.fromCharCode(0x4e00 + ((id * 7919 + i * 104729) % 20000))).join('');
    await store.plants.createPlant({ id: BigInt(id), name, tag: `tag-${id % 50}`.padEnd(64, 'x') });
  }
  await store.close();
}
