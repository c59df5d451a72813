// The client's parts that the example of packages/client/README.md does not reach: which JSON keys it reads as int64
// (derived by npm run generate; checked here against openapi.yaml on the built package, so a stale build fails), plants
// refused by parsePlantJson, and a failure without the API's Error body, from a real socket.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { createPlantStoreClient, INT64_KEYS, parseExactJson, parsePlantJson, PlantStoreError, stringifyJson } from '@plant-store/client';
import { REPO_ROOT } from '../harness/paths.ts';

/** Every property of every object schema in the document: its name and its schema. */
function* properties(node: unknown): Generator<[string, Record<string, unknown>]> {
  if (typeof node !== 'object' || node === null) return;
  const { properties: own } = node as { properties?: Record<string, Record<string, unknown>> };
  if (own && typeof own === 'object') yield* Object.entries(own);
  for (const child of Object.values(node)) yield* properties(child);
}

t.test('the keys read as int64 are exactly the int64 properties of openapi.yaml', async (t) => {
  const spec: unknown = parse(readFileSync(join(REPO_ROOT, 'openapi.yaml'), 'utf8'));
  const int64 = new Set<string>();
  const otherIntegers = new Set<string>();
  for (const [name, schema] of properties(spec)) {
    if (schema.format === 'int64') int64.add(name);
    else if (schema.type === 'integer') otherIntegers.add(name);
  }
  t.same([...int64].sort(), [...INT64_KEYS].sort(), 'every int64 property is read as a bigint');
  t.same([...otherIntegers].filter((name) => INT64_KEYS.has(name)), [], 'no int32 shares a name with an int64');
});

t.test('parsePlantJson keeps ids exact and refuses what is not a plant', async (t) => {
  t.same(parsePlantJson('{"id":9223372036854775807,"name":"Ficus"}'), { id: 9223372036854775807n, name: 'Ficus' });
  t.throws(() => parsePlantJson('{"id":"1","name":"Ficus"}'), TypeError, 'an id as a string');
  t.throws(() => parsePlantJson('[1]'), TypeError, 'an array');
  t.equal(stringifyJson({ id: 2n ** 63n - 1n, attempts: 3 }), '{"id":9223372036854775807,"attempts":3}');
});

t.test('a number that cannot be represented exactly throws instead of rounding', async (t) => {
  t.same(parseExactJson('[{"id":-9223372036854775808,"error":409,"ratio":0.5}]'), [{ id: -9223372036854775808n, error: 409, ratio: 0.5 }]);
  t.throws(() => parseExactJson('{"error":9007199254740993}'), RangeError, 'an integer above 2^53 where the contract says int32');
  t.throws(() => parseExactJson('{"ratio":0.12345678901234567891}'), RangeError, 'more digits than a double holds');
  t.throws(() => parseExactJson('{"id":1,}'), SyntaxError, 'not JSON');
});

t.test("an answer without the API's Error body (a proxy's 502 page) is still a typed PlantStoreError", async (t) => {
  const proxy: Server = createServer((_request, response) => {
    response.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad Gateway</h1>');
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => {
    proxy.closeAllConnections();
    proxy.close(() => resolve());
  }));
  const store = createPlantStoreClient({ baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/` });
  const failure = await store.plants.get(1n).catch((error: unknown) => error);
  t.ok(failure instanceof PlantStoreError, 'a PlantStoreError');
  const { status, error, message } = failure as PlantStoreError;
  t.same({ status, error }, { status: 502, error: 502 });
  t.match(message, /502 Bad Gateway without the API's Error body: <h1>Bad Gateway<\/h1>/);
});
