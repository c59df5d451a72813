// The real process, src/server.ts, over real sockets: first-start token, crash durability,
// boot failures and a clean stop. Each server listens on an ephemeral port (PORT=0) and says
// where in its "Server listening at" log line.
import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { readRows } from '../harness/helper.ts';
import { runToExit, serverEnv, startServer } from '../harness/process.ts';

const STATIC_TOKEN = 'server-test-token-0123456789';
const ISSUED_TOKEN = /(?<![0-9A-Za-z_])pst_[0-9A-Za-z]{49}(?![0-9A-Za-z])/;

interface Reply {
  status: number;
  body: string;
}

/** POST /plants with a raw JSON text body (int64 ids are written as plain integers). */
async function postPlant(baseUrl: string, body: string, token?: string): Promise<Reply> {
  const response = await fetch(`${baseUrl}/plants`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token && { authorization: `Bearer ${token}` }) },
    body,
  });
  return { status: response.status, body: await response.text() };
}


t.test('zero-configuration first start: a token is created, shown once, stored only as a hash', async (t) => {
  const dir = t.testdir();
  const dbPath = join(dir, 'plants.db');
  t.notOk(existsSync(dbPath), 'the database file does not exist yet');

  const first = await startServer(t, serverEnv(dir));
  const [curlLine] = await first.waitFor('stderr', /^.*\bcurl\b.*\n/m);
  const tokenMatch = ISSUED_TOKEN.exec(first.stderr());
  t.ok(tokenMatch, 'stderr shows a pst_ token');
  const token = tokenMatch![0];
  t.ok(curlLine.includes(`Authorization: Bearer ${token}`), 'the curl example carries the token');
  t.ok(curlLine.includes(`${first.url}/plants`), `the curl example calls ${first.url}/plants (got: ${curlLine.trim()})`);
  t.notMatch(first.stdout(), token, 'the token is not in the logs');

  t.equal((await postPlant(first.url, '{"id":1,"name":"Monstera"}')).status, 401, 'without the token: 401');
  t.same(await postPlant(first.url, '{"id":1,"name":"Monstera"}', token), { status: 200, body: '{"name":"Monstera"}' }, 'the token creates a plant');
  t.same(await first.stop('SIGTERM'), { code: 0, signal: null }, 'SIGTERM exits 0');

  const second = await startServer(t, serverEnv(dir));
  t.same(await postPlant(second.url, '{"id":1,"name":"Monstera"}', token), { status: 200, body: '{"name":"Monstera"}' }, 'the same token still works; the plant is still there');
  t.equal((await postPlant(second.url, '{"id":1,"name":"Fern"}', token)).status, 409, 'the stored plant survived the restart');
  t.same(await second.stop('SIGTERM'), { code: 0, signal: null }, 'SIGTERM exits 0 again');
  t.notMatch(second.stderr(), /pst_/, 'the second start prints no token');
  t.notMatch(second.stderr(), /API token/, 'nor the announcement');

  for (const file of [dbPath, `${dbPath}-wal`]) {
    if (!existsSync(file)) continue;
    const bytes = readFileSync(file);
    t.notOk(bytes.includes(token), `${file} does not contain the token`);
    t.notOk(bytes.includes(token.slice('pst_'.length)), `${file} does not contain its secret part`);
  }
  const hash = createHash('sha256').update(token).digest('hex');
  t.same(readRows(dbPath, 'SELECT token_hash FROM api_tokens'), [{ token_hash: hash }], 'only its SHA-256 hex hash is stored');
});

t.test('with API_TOKENS set, a fresh database gets no generated token', async (t) => {
  const dir = t.testdir();
  const server = await startServer(t, serverEnv(dir, { API_TOKENS: STATIC_TOKEN }));
  t.same(await postPlant(server.url, '{"id":1,"name":"Monstera"}', STATIC_TOKEN), { status: 200, body: '{"name":"Monstera"}' });
  t.same(await server.stop('SIGTERM'), { code: 0, signal: null });
  t.notMatch(server.stderr(), /pst_/, 'no token printed');
  t.same(readRows(join(dir, 'plants.db'), 'SELECT name FROM api_tokens'), [], 'no token stored');
});

t.test('every acknowledged create survives SIGKILL of the process mid-load', async (t) => {
  const dir = t.testdir();
  const dbPath = join(dir, 'plants.db');
  const env = serverEnv(dir, { API_TOKENS: STATIC_TOKEN });
  const server = await startServer(t, env);

  const WORKERS = 8;
  const ACKNOWLEDGED_BEFORE_KILL = 300;
  const BASE_ID = 9_007_199_254_740_993n; // above 2^53: exact int64 handling on the way to disk
  const acknowledged = new Map<string, string>();
  const unexpected: string[] = [];
  let inFlight = 0;
  let inFlightAtKill = -1;
  let failedAfterKill = 0;
  let killed = false;

  const worker = async (w: number): Promise<void> => {
    for (let i = 0; !killed; i++) {
      const id = (BASE_ID + BigInt(w) * 1_000_000n + BigInt(i)).toString();
      const name = `plant ${w}-${i}`;
      inFlight++;
      try {
        const reply = await postPlant(server.url, `{"id":${id},"name":"${name}"}`, STATIC_TOKEN);
        if (reply.status === 200) acknowledged.set(id, name);
        else unexpected.push(`${id}: ${reply.status} ${reply.body}`);
      } catch (error) {
        if (!killed) throw error;
        failedAfterKill++;
        return;
      } finally {
        inFlight--;
      }
      if (!killed && acknowledged.size >= ACKNOWLEDGED_BEFORE_KILL) {
        killed = true;
        inFlightAtKill = inFlight;
        server.child.kill('SIGKILL');
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
  t.same(await server.exited, { code: null, signal: 'SIGKILL' }, 'the process was killed');
  t.same(unexpected, [], 'every answered create was a 200');
  t.ok(acknowledged.size >= ACKNOWLEDGED_BEFORE_KILL, `${acknowledged.size} creates acknowledged`);
  t.ok(inFlightAtKill > 0, `${inFlightAtKill} requests were in flight at the kill`);
  t.comment(`${failedAfterKill} requests failed because the process died`);

  t.same(readRows(dbPath, 'PRAGMA integrity_check'), [{ integrity_check: 'ok' }], 'the file is intact after the kill');
  const stored = new Map(
    readRows<{ id: string; name: string }>(dbPath, 'SELECT CAST(id AS TEXT) AS id, name FROM plants').map((row) => [row.id, row.name]),
  );
  const missing = [...acknowledged].filter(([id, name]) => stored.get(id) !== name).map(([id]) => id);
  t.same(missing, [], 'every acknowledged plant is in the file with its name');

  const restarted = await startServer(t, env);
  const pending = [...acknowledged.keys()];
  const notConflicting: string[] = [];
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      for (let id = pending.pop(); id !== undefined; id = pending.pop()) {
        const reply = await postPlant(restarted.url, `{"id":${id},"name":"a different plant"}`, STATIC_TOKEN);
        if (reply.status !== 409) notConflicting.push(`${id}: ${reply.status} ${reply.body}`);
      }
    }),
  );
  t.same(notConflicting, [], `after the restart each of the ${acknowledged.size} acknowledged ids answers 409 to another plant`);
  const unused = (BASE_ID - 1n).toString();
  t.equal((await postPlant(restarted.url, `{"id":${unused},"name":"control"}`, STATIC_TOKEN)).status, 200, 'an id never sent is still free');
  t.same(await restarted.stop('SIGTERM'), { code: 0, signal: null });
});

t.test('bad configuration stops the boot with exit code 1 and a message naming the variable', async (t) => {
  const cases: [string, Record<string, string>][] = [
    ['PORT', { PORT: '99999' }],
    ['DATABASE_URL', { DATABASE_URL: 'mysql://x' }],
    ['API_TOKENS', { API_TOKENS: 'short' }],
  ];
  const dir = t.testdir(); // none of them gets as far as creating the database
  await Promise.all(
    cases.map(async ([variable, overrides]) => {
      const result = await runToExit(t, serverEnv(dir, overrides));
      t.same({ code: result.code, signal: result.signal }, { code: 1, signal: null }, `${variable}: exit code 1`);
      t.match(result.stderr, variable, `${variable}: stderr names it (${result.stderr.trim()})`);
      t.notOk(result.stderr.includes('    at '), `${variable}: no stack trace`);
      t.notMatch(result.stdout, /Server listening/, `${variable}: never listened`);
    }),
  );
});

t.test('SIGTERM while idle exits 0', async (t) => {
  const server = await startServer(t, serverEnv(t.testdir(), { API_TOKENS: STATIC_TOKEN }));
  const health = await fetch(`${server.url}/healthz`);
  await health.text();
  t.equal(health.status, 200, 'it was serving (and holds an idle keep-alive connection)');
  t.same(await server.stop('SIGTERM'), { code: 0, signal: null }, 'exit code 0');
  t.match(server.stdout(), /"signal":"SIGTERM".*"msg":"shutting down"/, 'it logged the shutdown');
});

t.test('a start that cannot listen creates no token; the next start that can shows one', async (t) => {
  const dir = t.testdir();
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.teardown(() => blocker.close());
  const busyPort = String((blocker.address() as AddressInfo).port);

  const failed = await runToExit(t, serverEnv(dir, { PORT: busyPort }));
  t.equal(failed.code, 1, 'exit code 1');
  t.match(failed.stderr, /EADDRINUSE/, `it says why (${failed.stderr.trim()})`);
  t.notOk(failed.stderr.includes('    at '), 'no stack trace');
  t.notMatch(failed.stderr, /pst_/, 'no token was shown');
  t.same(readRows(join(dir, 'plants.db'), 'SELECT name FROM api_tokens'), [], 'and none was stored');

  const next = await startServer(t, serverEnv(dir));
  const [token] = (await next.waitFor('stderr', ISSUED_TOKEN)) as unknown as [string];
  t.equal((await postPlant(next.url, '{"id":1,"name":"Monstera"}', token)).status, 200, 'the token shown by the next start works');
});
