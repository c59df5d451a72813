// The backward-compatibility gate: openapi.yaml keeps every promise of contract/published-1.0.0.yaml,
// and the gate tells breaking edits from additions (each planted in a scratch copy of openapi.yaml).
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t, { type Test } from 'tap';
import { parse, stringify } from 'yaml';
import { checkFiles, CURRENT_URL, PUBLISHED_URL } from '../../contract/compatibility.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed YAML or JSON walked by key: its shape is what this code checks
type Spec = Record<string, any>;

/** The gate's verdict on openapi.yaml after `edit`, judged from a scratch copy of the file. */
async function verdictAfter(t: Test, edit: (spec: Spec) => void): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'compat-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const spec = parse(await readFile(CURRENT_URL, 'utf8')) as Spec;
  edit(spec);
  const copy = join(dir, 'openapi.yaml');
  await writeFile(copy, stringify(spec));
  return checkFiles(PUBLISHED_URL, pathToFileURL(copy));
}

const schemas = (spec: Spec) => spec.components.schemas;
/** NewPlant's own part (beside its $ref to Plant): where `id` lives. */
const newPlantOwn = (spec: Spec) => schemas(spec).NewPlant.allOf.find((part: Spec) => part.properties);

t.test('openapi.yaml keeps every promise of the published 1.0.0 contract', async (t) => {
  t.same(await checkFiles(), []);
});

t.test('the published contract is the interface as published: POST /plants, its shapes, bearer auth', async (t) => {
  const published = parse(await readFile(PUBLISHED_URL, 'utf8')) as Spec;
  t.equal(published.openapi, '3.1.0');
  t.equal(published.info.version, '1.0.0');
  t.same(Object.keys(published.paths), ['/plants']);
  t.same(Object.keys(published.paths['/plants'].post.responses), ['200', '400']);
  t.same(published.security, [{ bearerAuth: [] }]);
});

const BREAKING: [string, (spec: Spec) => void, RegExp][] = [
  ['POST /plants removed', (spec) => delete spec.paths['/plants'].post, /POST \/plants was removed/],
  ['POST /plants renamed to /plant', (spec) => {
    spec.paths['/plant'] = spec.paths['/plants'];
    delete spec.paths['/plants'];
  }, /POST \/plants was removed/],
  ['tag required in NewPlant', (spec) => newPlantOwn(spec).required.push('tag'), /request body: the field "tag" is now required/],
  ['a new required request field', (spec) => {
    newPlantOwn(spec).properties.price = { type: 'number' };
    newPlantOwn(spec).required.push('price');
  }, /request body: the field "price" is now required/],
  ['name dropped from Plant', (spec) => {
    delete schemas(spec).Plant.properties.name;
    schemas(spec).Plant.required = [];
  }, /200 response: the field "name" was removed/],
  ['name made optional in Plant', (spec) => (schemas(spec).Plant.required = []), /200 response: the field "name" is no longer always sent/],
  ['id turned into a string', (spec) => (newPlantOwn(spec).properties.id = { type: 'string' }), /field "id": the type changed from integer to string/],
  ['id narrowed to int32', (spec) => (newPlantOwn(spec).properties.id.format = 'int32'), /field "id": the format changed from int64 to int32/],
  ['the 400 response removed', (spec) => delete spec.paths['/plants'].post.responses['400'], /POST \/plants: the 400 response was removed/],
  ['an Error field dropped', (spec) => delete schemas(spec).Error.properties.message, /400 response: the field "message" was removed/],
  ['the bearer scheme removed', (spec) => delete spec.components.securitySchemes.bearerAuth, /security scheme "bearerAuth" was removed/],
  ['the bearer scheme renamed', (spec) => {
    spec.components.securitySchemes.token = spec.components.securitySchemes.bearerAuth;
    delete spec.components.securitySchemes.bearerAuth;
    spec.paths['/plants'].post.security = [{ token: ['plants:write'] }];
  }, /security scheme "bearerAuth" was removed[\s\S]*needs a scheme the published contract does not have/],
  ['JSON no longer accepted', (spec) => {
    const content = spec.paths['/plants'].post.requestBody.content;
    content['application/x-yaml'] = content['application/json'];
    delete content['application/json'];
  }, /request body: the application\/json content was removed/],
];

for (const [edit, apply, expected] of BREAKING) {
  t.test(`breaking: ${edit}`, async (t) => {
    const problems = await verdictAfter(t, apply);
    t.match(problems.join('\n'), expected);
  });
}

const ADDITIONS: [string, (spec: Spec) => void][] = [
  ['an operation added', (spec) => {
    spec.paths['/plants/{id}'].patch = { operationId: 'renamePlant', responses: { '204': { description: 'Renamed' } } };
  }],
  ['an optional request field added', (spec) => (newPlantOwn(spec).properties.price = { type: 'number' })],
  ['an optional field added to Plant (request and response)', (spec) => (schemas(spec).Plant.properties.note = { type: 'string' })],
  ['a response status added', (spec) => {
    spec.paths['/plants'].post.responses['422'] = spec.paths['/plants'].post.responses['409'];
  }],
  ['a response field made required (in the response only: Plant is a request body too)', (spec) => {
    const ok = spec.paths['/plants'].post.responses['200'].content['application/json'];
    ok.schema = { allOf: [ok.schema, { required: ['tag'] }] };
  }],
  ['a request field made optional', (spec) => (newPlantOwn(spec).required = [])],
  ['a second security scheme offered as an alternative', (spec) => {
    spec.components.securitySchemes.apiKey = { type: 'apiKey', in: 'header', name: 'X-Api-Key' };
    spec.paths['/plants'].post.security.push({ apiKey: [] });
  }],
];

for (const [edit, apply] of ADDITIONS) {
  t.test(`not breaking: ${edit}`, async (t) => {
    t.same(await verdictAfter(t, apply), []);
  });
}
