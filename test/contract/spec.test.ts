// The contract and the code agree: generated types are fresh, every operation has a handler.
import { readFile } from 'node:fs/promises';
import t from 'tap';
import Fastify from 'fastify';
import { CLIENT_INT64_FIELDS_URL, CLIENT_TYPES_URL, CONTRACT_URL, renderInt64Fields, renderTypes, SPEC_URL, TYPES_URL } from '../../contract/openapi-types.ts';
import { checkSpecification } from '../../src/contract/specification.ts';
import { checkedByGenerate, parseSpecification, readSpecification, renderGeneratedContract, SpecificationError } from '../../src/spec-path.ts';
import contract from '../../src/contract/plugin.ts';
import routes from '../../src/contract/routes.ts';
import { deriveOperationFacts } from '../../src/contract/operation-facts.ts';
import openapiGlue from 'fastify-openapi-glue';
import { spec } from '../harness/contract.ts';
import { build } from '../harness/helper.ts';

t.test('src/generated/openapi.ts matches openapi.yaml (run npm run generate)', async (t) => {
  t.equal(await readFile(TYPES_URL, 'utf8'), await renderTypes());
});

t.test('src/generated/openapi.json, the contract a start reads, matches openapi.yaml (run npm run generate)', async (t) => {
  const text = await readFile(SPEC_URL, 'utf8');
  t.equal(await readFile(CONTRACT_URL, 'utf8'), renderGeneratedContract(text, parseSpecification(text)));
  t.ok(checkedByGenerate(), 'a start reads it rather than parsing openapi.yaml');
  t.strictSame(readSpecification(), parseSpecification(text), 'as openapi.yaml parses, each int64 beyond a double a bigint');
});

t.test("the client package's copy, packages/client/src/openapi.ts, matches openapi.yaml (run npm run generate)", async (t) => {
  t.equal(await readFile(CLIENT_TYPES_URL, 'utf8'), await renderTypes());
});

t.test("the client's int64 fields, packages/client/src/int64-fields.ts, match openapi.yaml (run npm run generate)", async (t) => {
  t.equal(await readFile(CLIENT_INT64_FIELDS_URL, 'utf8'), await renderInt64Fields());
});

t.test('the client package is versioned with the API: its version is info.version of openapi.yaml', async (t) => {
  const manifest = JSON.parse(await readFile(new URL('../../packages/client/package.json', import.meta.url), 'utf8')) as { version: string };
  t.equal(manifest.version, spec.info.version);
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

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed YAML walked by key
type Node = Record<string, any>;
const resolved = (node: Node): Node => (typeof node.$ref === 'string' ? node.$ref.slice(2).split('/').reduce((at: Node, key: string) => at[key], spec) : node);

t.test('every page answer declares maxItems, the largest limit; keyset lists share the paging parameters and Link', async (t) => {
  const lists = Object.entries<Node>(spec.paths).flatMap(([path, item]) =>
    Object.entries<Node>(item)
      .filter(([method, operation]) => HTTP_METHODS.has(method) && resolved(operation.responses?.['200'] ?? {}).content?.['application/json']?.schema?.type === 'array')
      .map(([, operation]) => ({ path, operation, schema: resolved(operation.responses['200']).content['application/json'].schema as Node })),
  );
  // Among them, whatever lists are added (docs/development.md, "Adding an operation, end to end"):
  const ids = lists.map(({ operation }) => operation.operationId as string);
  t.ok(['listPlants', 'listWebhookDeliveries', 'listWebhooks'].every((id) => ids.includes(id)), `the lists: ${ids.join(', ')}`);
  for (const { operation, schema } of lists) {
    const parameters: Node[] = operation.parameters ?? [];
    const limit = parameters.map(resolved).find((parameter) => parameter.name === 'limit');
    t.ok(limit, `${operation.operationId} takes a limit`);
    t.equal(schema.maxItems, limit?.schema.maximum, `${operation.operationId}: maxItems is the largest limit, ${limit?.schema.maximum}`);
    t.same(parameters.find((parameter) => resolved(parameter).name === 'limit'), { $ref: '#/components/parameters/PageLimit' }, `${operation.operationId}: the shared limit`);
    if (!parameters.some((parameter) => resolved(parameter).name === 'cursor')) continue;
    t.same(parameters.find((parameter) => resolved(parameter).name === 'cursor'), { $ref: '#/components/parameters/PageCursor' }, `${operation.operationId}: the shared cursor`);
    t.same(operation.responses['200'].headers.Link, { $ref: '#/components/headers/NextPage' }, `${operation.operationId}: the shared Link`);
  }
  t.ok(spec.paths['/webhooks'].get.parameters.some((parameter: Node) => resolved(parameter).name === 'cursor'), 'GET /webhooks is keyset-paged');
});

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
  const app = Fastify({ logger: false });
  t.teardown(() => app.close());
  await app.register(contract);
  const operationIds = [...deriveOperationFacts(spec).keys()].filter((operationId) => operationId !== 'createPlant');
  const handlers = Object.fromEntries(operationIds.map((operationId) => [operationId, async () => ({})])) as never;
  const refusal = await app.register(routes, { specification: spec, handlers, routeOptionsFor: () => ({}) }).then(() => undefined, (error: unknown) => error);
  t.ok(refusal instanceof SpecificationError, 'a SpecificationError');
  t.match((refusal as Error).message, /declares operation "createPlant" but no handler implements it/);
});

// The boot checks the contract against the OpenAPI meta-schema (fastify-openapi-glue does), and so do
// npm run generate (and so npm run dev) and this test.
t.test('openapi.yaml is a valid OpenAPI document, and the check refuses one that is not', async (t) => {
  const text = await readFile(SPEC_URL, 'utf8');
  const check = (edited: string) => checkSpecification(parseSpecification(edited));
  await t.resolves(check(text));
  await t.rejects(check(text.replace(/^openapi: 3\.1\.0$/m, 'openapi: 3.1.0\nunknownField: 1')), /not a valid OpenAPI document: \/ must NOT have unevaluated properties/);
  await t.rejects(check(text.replace(/^(\s+)operationId: createPlant$/m, '$1operationId: [createPlant]')), /operationId must be string/);
});

t.test('a $ref that resolves nowhere still stops the boot', async (t) => {
  const broken = structuredClone(spec);
  broken.components.schemas.NewPlant.allOf[0] = { $ref: '#/components/schemas/Nowhere' };
  const app = Fastify({ logger: false });
  t.teardown(() => app.close());
  const operationResolver = () => async () => ({});
  await t.rejects(async () => { await app.register(openapiGlue, { specification: broken, operationResolver }).ready(); }, /valid specification/);
});

t.test('a schema Fastify cannot compile stops the start with a SpecificationError naming the operation, not a parse of Fastify\'s message', async (t) => {
  const cases: [string[], string, string][] = [
    [['components', 'schemas', 'NewWebhook', 'properties', 'url'], 'strin', 'openapi.yaml: a request schema of POST /webhooks is not valid JSON Schema (type must be JSONType or JSONType[]: strin); fix it there.'],
    [['components', 'schemas', 'Health'], 'objekt', 'openapi.yaml: an answer schema of GET /healthz is not valid JSON Schema (schema is invalid: data/type must be equal to one of the allowed values); fix it there.'],
  ];
  for (const [path, type, message] of cases) {
    const broken = structuredClone(spec);
    path.reduce((node, key) => node[key], broken).type = type;
    const app = Fastify({ logger: false });
    t.teardown(() => app.close());
    await app.register(contract);
    const handlers = Object.fromEntries([...deriveOperationFacts(broken).keys()].map((operationId) => [operationId, async () => ({})])) as never;
    await app.register(routes, { specification: broken, handlers, routeOptionsFor: () => ({}) });
    const refusal = await app.ready().then(() => undefined, (error: unknown) => error);
    t.ok(refusal instanceof SpecificationError, `${path.join('.')}: a SpecificationError`);
    t.equal((refusal as Error).message, message);
  }
});
