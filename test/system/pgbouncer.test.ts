// The service behind PgBouncer from Debian (1.18, without prepared-statement support), as managed
// PostgreSQL poolers run it: in transaction mode, where consecutive transactions of one client may
// run on different server connections and one server connection serves many clients, instances
// under a mixed load answer no 5xx, and instances starting together on a fresh database all come
// up and leave no advisory lock held; session mode keeps working. Each case has a database of its own.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { contractProblems } from '../harness/contract.ts';
import { ADMIN_URL, databaseUrl, freshDatabase, postgresTestOptions, withClient } from '../harness/postgres.ts';
import { pgbouncerBinary, startPgBouncer, type PgBouncer, type PoolMode } from '../harness/pgbouncer.ts';
import { serverEnv, startServer, type RunningServer } from '../harness/process.ts';
import { skipUnlessCi } from '../harness/system-packages.ts';

// Fewer server connections than the instances' pools hold clients, so that server connections are shared.
const SERVER_POOL_SIZE = 4;
const FIRST_TOKEN = /API token: (\S+)/;

const binary = pgbouncerBinary();
const options = await postgresTestOptions();
if (!options.skip && 'problem' in binary) options.skip = skipUnlessCi(binary.problem);
const pgbouncerPath = 'path' in binary ? binary.path : 'pgbouncer';

async function pooler(t: Test, poolMode: PoolMode): Promise<PgBouncer> {
  const upstream = new URL(ADMIN_URL);
  return startPgBouncer(t, pgbouncerPath, { poolMode, poolSize: SERVER_POOL_SIZE, upstream: { host: upstream.hostname, port: Number(upstream.port || 5432) } });
}

/**
 * `count` instances started at once through the pooler on `database`, with no static token: one of them creates the
 * first token, once listening, and announces it on stderr; `token` resolves with the first announcement.
 */
async function startInstances(t: Test, bouncer: PgBouncer, database: string, count: number, extra: Record<string, string> = {}) {
  const env = serverEnv(t.testdir(), { DATABASE_URL: bouncer.url(database), ...extra });
  const instances = await Promise.all(Array.from({ length: count }, () => startServer(t, env)));
  const token = Promise.any(instances.map(async (instance) => (await instance.waitFor('stderr', FIRST_TOKEN))[1]!));
  return { instances, token: await token };
}

/** Stops each instance (SIGTERM), checking it exits cleanly; then how many announced a first token, from their whole output. */
async function stopAll(t: Test, instances: RunningServer[], label: string): Promise<number> {
  for (const instance of instances) t.same(await instance.stop('SIGTERM'), { code: 0, signal: null }, `${label}each stops cleanly`);
  return instances.filter((instance) => FIRST_TOKEN.test(instance.stderr())).length;
}

interface Tally {
  byStatus: Map<number, number>;
  /** The first few 5xx bodies and contract problems, for the failure message. */
  problems: string[];
}

/** Sends the request, counts its status and checks the answer against openapi.yaml. */
async function call(tally: Tally, base: string, method: string, path: string, headers: Record<string, string>, body?: unknown) {
  const response = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  tally.byStatus.set(response.status, (tally.byStatus.get(response.status) ?? 0) + 1);
  const problems = contractProblems(method, path, { statusCode: response.status, headers: Object.fromEntries(response.headers), body: text });
  if (response.status >= 500) problems.push(`${method} ${path} answered ${response.status}: ${text}`);
  if (tally.problems.length < 10) tally.problems.push(...problems);
  return { status: response.status, etag: response.headers.get('etag'), text };
}

/** Creates, reads (each on the other instance), pages, replaces, deletes, raced creates and webhook reads, from `workers` clients at once. */
async function mixedLoad(instances: RunningServer[], token: string, webhookId: string, workers: number, rounds: number): Promise<Tally> {
  const tally: Tally = { byStatus: new Map(), problems: [] };
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const read = { authorization: `Bearer ${token}` };
  await Promise.all(Array.from({ length: workers }, async (_, worker) => {
    for (let round = 0; round < rounds; round++) {
      const [here, there] = round % 2 ? [instances[0]!.url, instances[1]!.url] : [instances[1]!.url, instances[0]!.url];
      const id = 1_000_000 * (worker + 1) + round;
      await call(tally, here, 'POST', '/plants', headers, { id, name: `plant ${id}`, tag: `t${round % 3}` });
      const got = await call(tally, there, 'GET', `/plants/${id}`, read);
      await call(tally, here, 'GET', `/plants?limit=20&tag=t${round % 3}`, read);
      await call(tally, there, 'PUT', `/plants/${id}`, { ...headers, 'if-match': got.etag ?? '*' }, { name: `renamed ${id}` });
      // Every worker races the others for the same id: one create wins, the others compare.
      await call(tally, round % 2 ? here : there, 'POST', '/plants', headers, { id: round, name: `raced by ${worker}` });
      if (round % 2 === 1) await call(tally, here, 'DELETE', `/plants/${id}`, read);
      if (round % 4 === 0) await call(tally, there, 'GET', `/webhooks/${webhookId}/deliveries?limit=5`, read);
    }
  }));
  return tally;
}

function summary(tally: Tally): string {
  return [...tally.byStatus].sort(([a], [b]) => a - b).map(([status, count]) => `${status}: ${count}`).join(', ');
}

async function advisoryLocksHeld(database: string): Promise<number> {
  return withClient(databaseUrl(database), async (client) => {
    const { rows } = await client.query<{ count: string }>("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = $1", [database]);
    return Number(rows[0]!.count);
  });
}

t.test('transaction pooling: two instances under a mixed load answer no 5xx', options, async (t) => {
  const bouncer = await pooler(t, 'transaction');
  const database = await freshDatabase(t, 'plants_pgbouncer');
  // A receiver for the webhook, so that the dispatchers claim (lease) and record deliveries while the load runs.
  let delivered = 0;
  let firstDelivery: () => void;
  const deliveredOne = new Promise<void>((resolve) => (firstDelivery = resolve));
  const receiver = createServer((request, response) => {
    request.resume().on('end', () => {
      delivered++;
      firstDelivery();
      response.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => receiver.close(resolve)));
  const { instances, token } = await startInstances(t, bouncer, database, 2, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });

  const webhook = await fetch(`${instances[0]!.url}/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, events: ['plant.created'] }),
  });
  t.equal(webhook.status, 201, 'a webhook subscription through the pooler');
  const { id: webhookId } = (await webhook.json()) as { id: number };

  const tally = await mixedLoad(instances, token, String(webhookId), 16, 12);
  const fiveHundreds = [...tally.byStatus].filter(([status]) => status >= 500).reduce((sum, [, count]) => sum + count, 0);
  t.equal(fiveHundreds, 0, `no 5xx (${summary(tally)})`);
  t.same(tally.problems, [], 'every answer is one openapi.yaml documents');
  t.ok((tally.byStatus.get(200) ?? 0) > 0 && (tally.byStatus.get(409) ?? 0) > 0 && (tally.byStatus.get(204) ?? 0) > 0, `creates, conflicts and deletes all happened (${summary(tally)})`);
  // Without a subscription (a failure reported above) no delivery would ever come.
  if (webhook.status === 201) await deliveredOne;
  t.ok(delivered > 0, `the dispatchers delivered through the pooler (${delivered} so far)`);
  t.equal(await stopAll(t, instances, ''), 1, 'the two instances starting together created one first token');
});

t.test('transaction pooling: three instances started at once on a fresh database all come up, and no advisory lock stays held', options, async (t) => {
  const bouncer = await pooler(t, 'transaction');
  for (let run = 1; run <= 3; run++) {
    const database = await freshDatabase(t, 'plants_pgbouncer');
    const { instances } = await startInstances(t, bouncer, database, 3);
    t.equal(instances.length, 3, `run ${run}: all three came up`);
    t.equal(await stopAll(t, instances, `run ${run}: `), 1, `run ${run}: exactly one created the first token`);
    const tokens = await withClient(databaseUrl(database), (client) => client.query('SELECT count(*)::int AS count FROM api_tokens'));
    t.equal(tokens.rows[0].count, 1, `run ${run}: one token is stored`);
    t.equal(await advisoryLocksHeld(database), 0, `run ${run}: no advisory lock is held on the server afterwards`);
  }
});

t.test('session pooling keeps working', options, async (t) => {
  const bouncer = await pooler(t, 'session');
  const database = await freshDatabase(t, 'plants_pgbouncer');
  // Session mode gives each client connection a server connection of its own: the instances' pools must fit in the server pool.
  const { instances, token } = await startInstances(t, bouncer, database, 2, { DATABASE_POOL_SIZE: String(SERVER_POOL_SIZE / 2) });
  const tally = await mixedLoad(instances, token, '1', 4, 4);
  t.equal([...tally.byStatus].filter(([status]) => status >= 500).length, 0, `no 5xx (${summary(tally)})`);
  t.same(tally.problems, [], 'every answer is one openapi.yaml documents');
  t.equal(await stopAll(t, instances, ''), 1, 'one first token');
  t.equal(await advisoryLocksHeld(database), 0, 'no advisory lock is held afterwards');
});
