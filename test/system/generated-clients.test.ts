// docs/clients.md's recipe, run as written (test/examples/generate-types.ts and openapi-fetch.ts,
// which the page shows verbatim) in a scratch folder against a real server process: openapi-fetch
// with lossless-json creates and reads back plant 2^53+1 exactly.
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { TYPES_URL } from '../../contract/openapi-types.ts';
import { runScript, serverEnv, startServer } from '../harness/process.ts';
import { docBlock, example } from '../harness/readme-blocks.ts';
import { REPO_ROOT } from '../harness/paths.ts';

const TOKEN = 'generated-clients-token-0123456789';

t.test('docs/clients.md shows the recipe verbatim', async (t) => {
  t.equal(docBlock('docs/clients.md', 'Generate the types', 'ts'), example('generate-types.ts'));
  t.equal(docBlock('docs/clients.md', 'Then call the API', 'ts'), example('openapi-fetch.ts'));
});

t.test('the recipe, against a real server, keeps 9007199254740993 exact both ways', async (t) => {
  const dir = t.testdir({ project: {} });
  const server = await startServer(t, serverEnv(dir, { API_TOKENS: TOKEN }));
  // A folder of its own, as in a consumer's project: generate-types.ts writes plant-store.ts beside it.
  const project = join(dir, 'project');
  for (const name of ['generate-types.ts', 'openapi-fetch.ts']) copyFileSync(join(REPO_ROOT, 'test', 'examples', name), join(project, name));
  const env = { PLANT_STORE_URL: server.url, PLANT_STORE_TOKEN: TOKEN };

  const generated = await runScript(t, join(project, 'generate-types.ts'), [], env);
  t.same({ code: generated.code, stderr: generated.stderr }, { code: 0, stderr: '' }, 'the types are generated');
  const serverTypes = readFileSync(TYPES_URL, 'utf8').replace(/^\/\/[^\n]*\n\n/, '');
  t.equal(readFileSync(join(project, 'plant-store.ts'), 'utf8'), serverTypes, "the same types as the server's, int64 as bigint");

  const run = await runScript(t, join(project, 'openapi-fetch.ts'), [], env);
  t.equal(run.stderr, '', 'nothing on stderr');
  t.same({ code: run.code, signal: run.signal }, { code: 0, signal: null }, 'it exits 0');
  t.equal(run.stdout, docBlock('docs/clients.md', 'On a fresh service', 'text'), 'its output is the one docs/clients.md shows');

  // What the server holds, read without the recipe: the id arrived digit for digit.
  const stored = await fetch(`${server.url}/plants/9007199254740993`, { headers: { authorization: `Bearer ${TOKEN}` } });
  t.equal(await stored.text(), '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}');
});
