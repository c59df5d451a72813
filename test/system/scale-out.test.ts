// Two real server processes on one PostgreSQL database, as behind a load balancer: what one
// instance writes the other reads, and a create raced across both has exactly one winner.
import t from 'tap';
import { freshSchemaUrl, postgresTestOptions } from '../harness/postgres.ts';
import { serverEnv, startServer } from '../harness/process.ts';

const TOKEN = 'scale-out-token-0123456789';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

t.test('two instances on one PostgreSQL database', await postgresTestOptions(), async (t) => {
  const env = serverEnv(t.testdir(), { DATABASE_URL: await freshSchemaUrl(), API_TOKENS: TOKEN });
  const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)]);
  t.not(a.url, b.url, 'two processes, two ports');

  const created = await fetch(`${a.url}/plants`, { method: 'POST', headers, body: '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}' });
  t.equal(created.status, 200, 'created on A');
  const read = await fetch(`${b.url}/plants/9007199254740993`, { headers });
  t.equal(read.status, 200, 'read on B');
  t.equal(await read.text(), '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}', 'exactly as A stored it');
  const etag = read.headers.get('etag')!;

  const replaced = await fetch(`${a.url}/plants/9007199254740993`, {
    method: 'PUT',
    headers: { ...headers, 'if-match': etag },
    body: '{"name":"Monstera deliciosa"}',
  });
  t.equal(replaced.status, 200, 'replaced on A with the ETag B answered');
  const afterReplace = await fetch(`${b.url}/plants/9007199254740993`, { headers });
  t.equal(await afterReplace.text(), '{"id":9007199254740993,"name":"Monstera deliciosa"}', 'B sees the replacement at once');
  t.equal(afterReplace.headers.get('etag'), replaced.headers.get('etag'), 'with the same ETag');
  const stale = await fetch(`${b.url}/plants/9007199254740993`, { method: 'DELETE', headers: { ...headers, 'if-match': etag } });
  t.equal(stale.status, 412, 'B refuses a delete with the ETag from before the replace');
  t.equal((await fetch(`${b.url}/plants/9007199254740993`, { method: 'DELETE', headers })).status, 204, 'deleted on B');
  const again = await fetch(`${a.url}/plants`, { method: 'POST', headers, body: '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}' });
  t.equal(again.status, 200, 'created again on A with the first content');
  const [onA, onB] = await Promise.all([a, b].map((server) => fetch(`${server.url}/plants/9007199254740993`, { headers })));
  t.equal(onA!.headers.get('etag'), onB!.headers.get('etag'), 'both instances answer the same ETag');
  t.not(onA!.headers.get('etag'), etag, 'not the one the same content had before the delete');

  const race = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      fetch(`${(i % 2 ? a : b).url}/plants`, { method: 'POST', headers, body: `{"id":77,"name":"contender ${i}"}` }).then(
        async (response) => ({ status: response.status, instance: i % 2 ? 'A' : 'B', body: await response.text() }),
      ),
    ),
  );
  const winners = race.filter((r) => r.status === 200);
  t.equal(winners.length, 1, 'one create of the raced id answers 200');
  t.equal(race.filter((r) => r.status === 409).length, 39, 'every other one, on either instance, answers 409');
  t.ok(new Set(race.map((r) => r.instance)).size === 2, 'both instances took part');
  const stored = await fetch(`${a.url}/plants/77`, { headers });
  t.same(await stored.json(), { id: 77, ...JSON.parse(winners[0]!.body) }, 'the winner is what both instances now serve');

  for (const server of [a, b]) t.same(await server.stop('SIGTERM'), { code: 0, signal: null }, 'each stops cleanly, closing its pool');
});
