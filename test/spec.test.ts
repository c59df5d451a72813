// The contract and the code agree: generated types are fresh, every operation has a handler.
import { readFile } from 'node:fs/promises';
import t from 'tap';
import { renderTypes, TYPES_URL } from '../scripts/generate.ts';
import { handlerFor } from '../src/app.ts';
import { spec } from './contract.ts';
import { build } from './helper.ts';

t.test('src/generated/openapi.ts matches openapi.yaml (run npm run generate)', async (t) => {
  t.equal(await readFile(TYPES_URL, 'utf8'), await renderTypes());
});

t.test('openapi.yaml is OpenAPI 3.1.0, version 1.0.0, MIT, and declares the published shapes', async (t) => {
  t.equal(spec.openapi, '3.1.0');
  t.equal(spec.info.version, '1.0.0');
  t.equal(spec.info.license.name, 'MIT');
  const { Plant, NewPlant, Error: ErrorSchema } = spec.components.schemas;
  t.same(Plant.required, ['name']);
  t.same(Object.keys(Plant.properties), ['name', 'tag']);
  t.same(NewPlant.allOf[0], { $ref: '#/components/schemas/Plant' });
  t.same(NewPlant.allOf[1].required, ['id']);
  t.match(NewPlant.allOf[1].properties.id, { type: 'integer', format: 'int64' });
  t.same(ErrorSchema.required, ['error', 'message']);
  t.match(ErrorSchema.properties.error, { type: 'integer', format: 'int32' });
  t.equal(spec.paths['/plants'].post.operationId, 'createPlant');
  t.same(spec.components.securitySchemes.bearerAuth, { ...spec.components.securitySchemes.bearerAuth, type: 'http', scheme: 'bearer' });
});

const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace']);

t.test('every operation in openapi.yaml is routed to its handler', async (t) => {
  const { app } = await build(t);
  const operations = Object.entries<Record<string, { operationId: string }>>(spec.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([key]) => HTTP_METHODS.has(key))
      .map(([method, operation]) => ({ path, method: method.toUpperCase(), operationId: operation.operationId })),
  );
  t.ok(operations.length >= 5);
  for (const { path, method, operationId } of operations) {
    t.ok(app.hasRoute({ method, url: path.replace(/\{(\w+)\}/g, ':$1') }), `${method} ${path} (${operationId}) is routed`);
  }
});

t.test('an operation without a handler stops the boot', async (t) => {
  t.throws(() => handlerFor({} as never, 'createPlant'), /declares operation "createPlant" but no handler implements it/);
});
