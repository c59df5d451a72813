// What an operation gets is read from openapi.yaml (src/contract/operation-facts.ts), not from lists
// in code: in a scratch copy of the repository whose openapi.yaml is edited (plus, for a new plant
// field, the store's column and migration that any field needs), a real server and the regenerated
// client follow the edit; a contract that contradicts itself stops the start with one line naming
// the operation; and no operationId is written as a value in the code.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import ts from 'typescript';
import { parseDocument } from 'yaml';
import { renderInt64Fields, SPEC_URL } from '../../contract/openapi-types.ts';
import { INT64_FIELDS } from '../../packages/client/src/int64-fields.ts';
import { ContradictoryContractError, deriveOperationFacts, type OperationFacts } from '../../src/contract/operation-facts.ts';
import { REPO_ROOT } from '../harness/paths.ts';
import { failedStartOnSpec, serverEnv, startServer, type RunningServer } from '../harness/process.ts';
import { copyRepository, generateTypes, NO_COVERAGE } from '../harness/scratch.ts';
import { spec } from '../harness/contract.ts';

const TOKEN = 'contract-derived-token-0123456789';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const SPEC_TEXT = readFileSync(SPEC_URL, 'utf8');
type Edit = (document: ReturnType<typeof parseDocument>) => void;

/** openapi.yaml's text after `edit`, comments and layout kept. */
function editedSpec(edit: Edit): string {
  const document = parseDocument(SPEC_TEXT);
  edit(document);
  return document.toString();
}

/** The operations of which `fact` holds, sorted. */
function operationsWhere(facts: Map<string, OperationFacts>, fact: (facts: OperationFacts) => boolean): string[] {
  return [...facts.values()].filter(fact).map(({ operationId }) => operationId).sort();
}

t.test("the facts of today's contract are the behaviour the service had from its hand-kept lists", async (t) => {
  const facts = deriveOperationFacts(spec);
  t.same(operationsWhere(facts, (f) => f.compressed), ['getMetrics', 'getOpenApiJson', 'getOpenApiYaml', 'listPlants', 'listWebhookDeliveries', 'listWebhooks'], 'compressed');
  t.same(operationsWhere(facts, (f) => f.pageRead), ['listPlants', 'listWebhookDeliveries', 'listWebhooks'], 'page reads');
  t.same(operationsWhere(facts, (f) => f.answeredUnderPressure), ['getHealth', 'getMetrics', 'getOpenApiJson', 'getOpenApiYaml', 'getReadiness'], 'answered under pressure');
  t.same(operationsWhere(facts, (f) => f.security.length === 0), ['getHealth', 'getMetrics', 'getOpenApiJson', 'getOpenApiYaml', 'getReadiness'], 'no token');
  t.same(facts.get('listPlants')?.security, [{ bearerAuth: ['plants:read'] }], "an operation's own scopes");
});

// Each scratch edit, at its path in openapi.yaml.
const METRICS_200 = ['paths', '/metrics', 'get', 'responses', '200'];
const GET_PLANT = ['paths', '/plants/{id}', 'get'];

/** A field added to Plant that only a bigint holds, and the store changes "Adding a field" asks for (docs/development.md). */
function addSeedsField(dir: string): void {
  const fields = join(dir, 'src/store/plant-fields.ts');
  writeFileSync(fields, readFileSync(fields, 'utf8').replace(/(export const PLANT_FIELDS: [^\n]*) \};/, "$1, seeds: 'int64' };"));
  const migrations = join(dir, 'src/store/migrations.ts');
  const text = readFileSync(migrations, 'utf8');
  const version = Math.max(...[...text.matchAll(/^ {4}version: (\d+),$/gm)].map((match) => Number(match[1]))) + 1;
  const added = `  { version: ${version}, name: 'seeds', sql: ({ int8 }) => \`ALTER TABLE plants ADD COLUMN seeds \${int8};\` },\n];`;
  writeFileSync(migrations, text.replace(/\n\];/, `\n${added}`).replace(/(export const PLANT_FIELD_MIGRATIONS: [^\n]*) \};/, `$1, seeds: ${version} };`));
}

/** A scratch copy whose openapi.yaml no longer says /metrics may be compressed, marks getPlant answered under pressure and gives plants an int64 `seeds`. */
async function editedCopy(t: Test): Promise<string> {
  const dir = copyRepository(t.testdir(), ['openapi.yaml', 'package.json', 'src', 'scripts', 'contract', 'packages']);
  const text = editedSpec((document) => {
    document.deleteIn([...METRICS_200, 'headers', 'Content-Encoding']);
    document.setIn([...GET_PLANT, 'x-answered-under-pressure'], true);
    document.setIn(['components', 'schemas', 'Plant', 'properties', 'seeds'], { description: 'Seeds in the packet', type: 'integer', format: 'int64' });
  });
  writeFileSync(join(dir, 'openapi.yaml'), text);
  addSeedsField(dir);
  await generateTypes(dir);
  return dir;
}

const scratch = await editedCopy(t);

function startCopy(t: Test, env: Record<string, string> = {}): Promise<RunningServer> {
  return startServer(t, serverEnv(t.testdir(), { API_TOKENS: TOKEN, ...env, ...NO_COVERAGE }), { command: [process.execPath, join(scratch, 'src/entry.js')] });
}

t.test('an answer whose Content-Encoding is removed from openapi.yaml is no longer compressed', async (t) => {
  const server = await startCopy(t);
  for (let id = 1; id <= 40; id++) {
    const created = await fetch(`${server.url}/plants`, { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: JSON.stringify({ id, name: `plant number ${id}` }) });
    t.equal(created.status, 200, `plant ${id} created`);
  }
  const accept = { 'accept-encoding': 'gzip, br' };
  const page = await fetch(`${server.url}/plants`, { headers: { ...AUTH, ...accept } });
  t.equal(page.headers.get('content-encoding'), 'br', 'a page, still declaring Content-Encoding, is compressed');
  const metrics = await fetch(`${server.url}/metrics`, { headers: accept });
  const body = await metrics.text();
  t.equal(metrics.status, 200);
  t.ok(body.length > 1024, `the metrics (${body.length} bytes) are over the size from which answers are compressed`);
  t.equal(metrics.headers.get('content-encoding'), null, 'the metrics are sent plain');
  t.same(await server.stop(), { code: 0, signal: null });
});

t.test('an operation marked x-answered-under-pressure is answered while the others get 503', async (t) => {
  // 1% of a 64 MB heap: over it from under-pressure's first sample on (as in load-shedding.test.ts).
  const server = await startCopy(t, { MAX_HEAP_USED_PERCENT: '1', NODE_OPTIONS: '--max-old-space-size=64' });
  let shed = false;
  // Served until the first sample, once a second; sequential requests take far longer to reach the bound.
  for (let n = 0; !shed && n < 20_000; n++) shed = (await fetch(`${server.url}/webhooks`, { headers: AUTH })).status === 503;
  t.ok(shed, 'an unmarked operation is shed');
  const plant = await fetch(`${server.url}/plants/1`, { headers: AUTH });
  t.equal(plant.status, 404, 'the marked getPlant still answers (no such plant)');
  t.equal(((await plant.json()) as { error: number }).error, 404);
  t.equal((await fetch(`${server.url}/webhooks`, { headers: AUTH })).status, 503, 'while the unmarked one is still shed');
});

t.test('an int64 field added to a response schema is sent exact, and the regenerated client reads it as a bigint', async (t) => {
  const server = await startCopy(t);
  const created = await fetch(`${server.url}/plants`, {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/json' },
    body: '{"id":1,"name":"Poppy","seeds":9007199254740993}',
  });
  t.equal(created.status, 200, 'created');
  const wire = await (await fetch(`${server.url}/plants/1`, { headers: AUTH })).text();
  t.equal(wire, '{"id":1,"name":"Poppy","seeds":9007199254740993}', 'every digit on the wire');
  const client = (await import(join(scratch, 'packages/client/src/index.ts'))) as typeof import('@plant-store/client');
  t.ok(client.INT64_KEYS.has('seeds'), 'the client reads seeds as int64');
  const store = client.createPlantStoreClient({ baseUrl: server.url, token: TOKEN });
  const { plant } = await store.plants.get(1n);
  t.same(plant, { id: 1n, name: 'Poppy', seeds: 9007199254740993n }, 'as an exact bigint');
  t.same(await server.stop(), { code: 0, signal: null });
});

/** Boots a copy of the repository on openapi.yaml after `edit`; answers what it printed on stderr, once it checked it was one line. */
function bootLine(t: Test, edit: Edit): Promise<string> {
  return failedStartOnSpec(t, editedSpec(edit));
}

t.test('a contract that contradicts itself stops the start with one line naming the operation and what to change', async (t) => {
  t.test('a `limit` on an operation whose 200 answer is not an array', async (t) => {
    const line = await bootLine(t, (document) => document.setIn([...GET_PLANT, 'parameters'], [{ $ref: '#/components/parameters/PageLimit' }]));
    t.match(line, /^plant-store failed to start: openapi\.yaml: operation "getPlant" takes a `limit` query parameter, .* but its 200 answer is not an array: answer an array \(a page\), or remove `limit`\.$/);
  });
  t.test('a page answer without maxItems', async (t) => {
    const line = await bootLine(t, (document) => document.deleteIn(['paths', '/webhooks', 'get', 'responses', '200', 'content', 'application/json', 'schema', 'maxItems']));
    t.match(line, /operation "listWebhooks" answers 200 with an array without `maxItems`: give that array `maxItems`, 1000, the largest `limit`/);
  });
  t.test('a page answer whose maxItems is below the largest limit', async (t) => {
    const line = await bootLine(t, (document) => document.setIn(['paths', '/plants', 'get', 'responses', '200', 'content', 'application/json', 'schema', 'maxItems'], 500));
    t.match(line, /operation "listPlants" answers 200 with at most 500 items \(`maxItems`\) but takes a `limit` up to 1000: make them equal\./);
  });
  t.test('Content-Encoding on a response without content', async (t) => {
    const line = await bootLine(t, (document) =>
      document.setIn(['paths', '/openapi.json', 'get', 'responses', '304', 'headers', 'Content-Encoding'], { $ref: '#/components/headers/Content-Encoding' }),
    );
    t.match(line, /operation "getOpenApiJson" declares `Content-Encoding` on its 304 response, which has no content to compress: remove the header from that response\./);
  });
  t.test('x-answered-under-pressure that is not a boolean', async (t) => {
    const line = await bootLine(t, (document) => document.setIn(['paths', '/healthz', 'get', 'x-answered-under-pressure'], 'yes'));
    t.match(line, /operation "getHealth" has `x-answered-under-pressure: "yes"`; write true or false, or leave it out\./);
  });
});

t.test('npm run generate refuses a property that is int64 in one schema and another number in another', async (t) => {
  const clash = editedSpec((document) => document.setIn(['components', 'schemas', 'Error', 'properties', 'id'], { type: 'integer', format: 'int32' }));
  const refusal = await renderInt64Fields(clash).catch((error: unknown) => error);
  t.ok(refusal instanceof ContradictoryContractError, 'refused as a contradiction');
  t.equal((refusal as Error).message, 'openapi.yaml: the property "id" is int64 in one schema and another number in another; the client reads a number as bigint by its name alone, so rename one of them.');
});

/** Every .ts and .js file below `folder` that `npm run generate` did not write. */
function handWritten(folder: string): string[] {
  return readdirSync(join(REPO_ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((name) => /\.(ts|js)$/.test(name))
    .map((name) => join(folder, name))
    .filter((file) => !readFileSync(join(REPO_ROOT, file), 'utf8').startsWith('// Generated by `npm run generate`'));
}

/** The string literals of a source file that equal one of `words` and are values, not types. */
function literalValues(file: string, words: Set<string>, text = readFileSync(join(REPO_ROOT, file), 'utf8')): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isTypeNode(node)) return; // OperationHandler<'getPlant'>: checked by the compiler against the generated types
    if (ts.isStringLiteralLike(node) && words.has(node.text)) {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart());
      found.push(`${file}:${line + 1} '${node.text}'`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

t.test('no operationId is written as a value in src/ or packages/client/src, outside generated files', async (t) => {
  const facts = deriveOperationFacts(spec);
  const events = Object.values<Record<string, { operationId?: string }>>(spec.webhooks ?? {}).flatMap((item) => Object.values(item).map((operation) => operation.operationId));
  const operationIds = new Set([...facts.keys(), ...events].filter((id) => id !== undefined));
  const files = [...handWritten('src'), ...handWritten('packages/client/src')];
  t.ok(files.includes('src/contract/routes.ts') && !files.includes('src/generated/openapi.ts'), 'the files read are the hand-written ones');
  t.same(files.flatMap((file) => literalValues(file, operationIds)), [], 'what an operation gets is read from openapi.yaml');
  const example = "const handler: OperationHandler<'getPlant'> = handlers.get('getPlant');";
  t.same(literalValues('example.ts', new Set(['getPlant']), example), ["example.ts:1 'getPlant'"], 'the reader finds a value, and passes over a type');
});

t.test("no int64 field name is written as a value in the client's hand-written files", async (t) => {
  const names = new Set(INT64_FIELDS);
  t.ok(names.has('id'), 'the generated list is read');
  t.same(handWritten('packages/client/src').flatMap((file) => literalValues(file, names)), []);
});
