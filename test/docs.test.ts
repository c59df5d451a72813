// The contract is served as written; Swagger UI is wired to it; health checks answer.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { SPEC_PATH } from '../src/app.ts';
import { api, build } from './helper.ts';

const specFile = parseYaml(readFileSync(SPEC_PATH, 'utf8'));

t.test('GET /openapi.yaml is openapi.yaml byte for byte; /openapi.json is that file parsed', async (t) => {
  const { app } = await build(t);
  const yaml = await api(t, app, { method: 'GET', url: '/openapi.yaml' });
  t.equal(yaml.headers['content-type'], 'application/yaml');
  const served = (await app.inject({ method: 'GET', url: '/openapi.yaml' })).rawPayload;
  t.ok(served.equals(readFileSync(SPEC_PATH)), 'the bytes of the file, comments and folded text included');
  const json = await api(t, app, { method: 'GET', url: '/openapi.json' });
  t.equal(json.headers['content-type'], 'application/json; charset=utf-8');
  // Both sides exact: an int64 example above 2^53 must come through digit for digit.
  t.same(json.json(), parseYaml(readFileSync(SPEC_PATH, 'utf8'), { intAsBigInt: true }));
  t.same(JSON.parse(json.body), specFile);
});

t.test('Swagger UI at /docs loads the contract and offers bearer authorization', async (t) => {
  const { app } = await build(t);
  const redirect = await app.inject({ method: 'GET', url: '/docs' });
  t.ok([200, 302].includes(redirect.statusCode), '/docs answers');
  const page = await app.inject({ method: 'GET', url: '/docs/' });
  t.equal(page.statusCode, 200);
  t.match(page.headers['content-type'], /text\/html/);
  t.match(page.body, /swagger-ui/);
  const initializer = await app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
  t.equal(initializer.statusCode, 200);
  t.match(initializer.body, /url: "\.\/json"|"url":\s*"\.\/json"|\.\/json/, 'the UI loads ./json');
  const uiSpec = await app.inject({ method: 'GET', url: '/docs/json' });
  // The UI's copy names its schemas and merges allOf (see src/docs/docs-ui-spec.ts); same operations.
  const ui = JSON.parse(uiSpec.body);
  t.same(Object.keys(ui.paths), Object.keys(specFile.paths), 'which is the contract, drawn for people');
  t.equal(ui.components.schemas.NewPlant.title, 'NewPlant');
  t.same(specFile.components.securitySchemes.bearerAuth, { ...specFile.components.securitySchemes.bearerAuth, type: 'http', scheme: 'bearer' });
  t.same(specFile.security, [{ bearerAuth: [] }], 'so the Authorize button applies to every operation');
  const bundle = await app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
  t.equal(bundle.statusCode, 200, 'the UI bundle is served locally');
});

t.test('/healthz is live; /readyz follows the store', async (t) => {
  const { app, store } = await build(t);
  t.same((await api(t, app, { method: 'GET', url: '/healthz' })).json(), { status: 'ok' });
  t.same((await api(t, app, { method: 'GET', url: '/readyz' })).json(), { status: 'ok' });
  await store.close();
  const notReady = await api(t, app, { method: 'GET', url: '/readyz' });
  t.equal(notReady.statusCode, 503);
  t.same(notReady.json(), { error: 503n, message: 'The store does not answer; the service is not ready.' });
  t.equal((await api(t, app, { method: 'GET', url: '/healthz' })).statusCode, 200, 'liveness does not depend on the store');
});
