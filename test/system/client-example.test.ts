// The client example of packages/client/README.md, run as written (test/examples/client.ts, which the
// page shows verbatim) in its own Node process against a real server process: ids 2^53+1 and 2^63-1
// exact both ways, a walk over more than one page, a 412 for a stale ETag, a typed 409.
import t from 'tap';
import { runScript, serverEnv, startServer } from '../harness/process.ts';
import { docBlock, example } from '../harness/readme-blocks.ts';

const TOKEN = 'client-example-token-0123456789';
const headers = { authorization: `Bearer ${TOKEN}` };

t.test('packages/client/README.md shows test/examples/client.ts verbatim', async (t) => {
  t.equal(docBlock('packages/client/README.md', '## Example', 'ts'), example('client.ts'));
});

t.test('the example, against a real server, prints what packages/client/README.md says it prints', async (t) => {
  const server = await startServer(t, serverEnv(t.testdir(), { API_TOKENS: TOKEN }));
  const run = await runScript(t, 'test/examples/client.ts', [], { PLANT_STORE_URL: server.url, PLANT_STORE_TOKEN: TOKEN });
  t.equal(run.stderr, '', 'nothing on stderr');
  t.same({ code: run.code, signal: run.signal }, { code: 0, signal: null }, 'it exits 0');
  t.equal(run.stdout, docBlock('packages/client/README.md', 'It prints', 'text'), 'its output is the one packages/client/README.md shows');

  // What the server holds, read without the client: the ids it sent arrived digit for digit.
  const all = await fetch(`${server.url}/plants`, { headers });
  t.equal(
    await all.text(),
    '[{"id":42,"name":"Anthurium","tag":"araceae"},{"id":9223372036854775807,"name":"Philodendron","tag":"araceae"}]',
    '2^63-1 stored exactly; 2^53+1 replaced, then deleted with its fresh ETag',
  );
  // Three aroids printed at two a page: the second page was asked for with the Link's cursor.
  t.match(server.stdout(), /"url":"\/plants\?[^"]*tag=araceae[^"]*&cursor=/, 'the walk followed the Link header to a second page');
});
