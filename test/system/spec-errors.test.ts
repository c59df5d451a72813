// What a spec editor meets when openapi.yaml cannot be served as it stands: each start, of a scratch copy
// of the repository whose openapi.yaml was edited, stops before listening with one line that names the
// file to change and what to change there, and no stack trace. (An operation without a handler, the
// first of these a new operation meets, is shown by add-operation.test.ts as its worked example tells it.)
import { readFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import { parseDocument, type Document } from 'yaml';
import { SPEC_PATH } from '../../src/spec-path.ts';
import { failedStartOnSpec } from '../harness/process.ts';

const FAILED = 'plant-store failed to start: ';
const SPEC_TEXT = readFileSync(SPEC_PATH, 'utf8');

/** The line a start prints when the copy's openapi.yaml (its text, or its document) is edited by `edit`. */
function startLineAfter(t: Test, edit: { text: (text: string) => string } | { document: (spec: Document) => void }): Promise<string> {
  let edited: string;
  if ('text' in edit) {
    edited = edit.text(SPEC_TEXT);
  } else {
    const spec = parseDocument(SPEC_TEXT);
    edit.document(spec);
    edited = spec.toString();
  }
  t.not(edited, SPEC_TEXT, 'the edit changed openapi.yaml');
  return failedStartOnSpec(t, edited);
}

t.test('openapi.yaml that is not YAML: where, and what is wrong', async (t) => {
  const line = await startLineAfter(t, { text: (text) => text.replace(/^info:\n/m, 'info:\n\ttitle: indented by a tab\n') });
  t.equal(line, `${FAILED}openapi.yaml is not valid YAML: Tabs are not allowed as indentation at line 3, column 1; fix it there.`);
});

t.test('openapi.yaml that is YAML but not an OpenAPI document: where, and what is wrong', async (t) => {
  const line = await startLineAfter(t, { document: (spec) => spec.deleteIn(['info', 'version']) });
  t.equal(line, `${FAILED}openapi.yaml is not a valid OpenAPI document: /info must have required property 'version'; fix it there.`);
});

t.test('a $ref to nothing names the $ref', async (t) => {
  const line = await startLineAfter(t, { document: (spec) => spec.setIn(['paths', '/plants', 'get', 'responses', '401'], { $ref: '#/components/responses/Unauthorised' }) });
  t.equal(line, `${FAILED}openapi.yaml is not a valid OpenAPI document: Can't resolve #/components/responses/Unauthorised; fix it there.`);
});

t.test('an operation without an operationId: which one', async (t) => {
  const line = await startLineAfter(t, { document: (spec) => spec.deleteIn(['paths', '/plants', 'get', 'operationId']) });
  t.equal(line, `${FAILED}openapi.yaml's GET /plants has no operationId: give it one, the name of the handler that serves it.`);
});

t.test('an operationId given twice: both places', async (t) => {
  const line = await startLineAfter(t, { document: (spec) => spec.setIn(['paths', '/plants/{id}', 'get', 'operationId'], 'listPlants') });
  t.equal(line, `${FAILED}openapi.yaml names both GET /plants and GET /plants/{id} "listPlants": give each its own operationId, the name of the handler that serves it.`);
});

t.test('a handler for an operation openapi.yaml no longer declares', async (t) => {
  const line = await startLineAfter(t, { document: (spec) => spec.deleteIn(['paths', '/metrics']) });
  t.equal(line, `${FAILED}src/app.ts passes the routes a handler "getMetrics" but openapi.yaml declares no such operation: declare it there, or remove the handler.`);
});

t.test('a security scheme nothing checks', async (t) => {
  const line = await startLineAfter(t, { document: (spec) => spec.setIn(['paths', '/plants', 'get', 'security'], [{ apiKey: [] }]) });
  t.equal(
    line,
    `${FAILED}openapi.yaml's operation "listPlants" requires security [{"apiKey":[]}], which nothing checks: require bearerAuth there, ` +
      'or implement the scheme in src/security/ and map it in securityHooks (src/contract/routes.ts).',
  );
});

t.test('a request body media type no parser reads', async (t) => {
  const line = await startLineAfter(t, { document: (spec) => spec.setIn(['paths', '/plants', 'post', 'requestBody', 'content', 'text/csv'], { schema: { type: 'string' } }) });
  t.equal(
    line,
    `${FAILED}openapi.yaml's operation "createPlant" accepts request bodies of text/csv, which no body parser reads: accept application/json there, ` +
      'or register a parser for it beside the JSON one (src/contract/json.ts).',
  );
});

// A field added to openapi.yaml before the store keeps it would be validated, echoed and dropped.
t.test('a plant field openapi.yaml declares and the store does not keep: which, and where to read what to do', async (t) => {
  const line = await startLineAfter(t, { document: (spec) => spec.setIn(['components', 'schemas', 'Plant', 'properties', 'price'], { description: 'Price in cents', type: 'number' }) });
  t.equal(
    line,
    `${FAILED}openapi.yaml declares the plant field "price" (in Plant) but the store does not keep it: list it in PLANT_FIELDS and give it a migration ` +
      '(docs/development.md, "Adding a field, end to end"), or remove it from openapi.yaml.',
  );
});

// The OpenAPI check does not look into schemas; Fastify compiles them when it builds the routes.
t.test('a request schema that is no JSON Schema: which operation, and why', async (t) => {
  const request = await startLineAfter(t, { document: (spec) => spec.setIn(['components', 'schemas', 'NewWebhook', 'properties', 'url', 'type'], 'strin') });
  t.equal(request, `${FAILED}openapi.yaml: a request schema of POST /webhooks is not valid JSON Schema (type must be JSONType or JSONType[]: strin); fix it there.`);
});

t.test('an answer schema that is no JSON Schema', async (t) => {
  const answer = await startLineAfter(t, { document: (spec) => spec.setIn(['components', 'schemas', 'Health', 'type'], 'objekt') });
  t.equal(answer, `${FAILED}openapi.yaml: an answer schema of GET /healthz is not valid JSON Schema (schema is invalid: data/type must be equal to one of the allowed values); fix it there.`);
});
