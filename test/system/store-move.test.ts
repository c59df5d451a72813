// docs/operations.md "Moving from SQLite to PostgreSQL", followed step by step as a shop would: a
// service on SQLite with a token and a webhook whose receiver is down, stopped; the page's copy
// command run verbatim in the shop's directory (a scratch copy of the repository); the page's start
// command on PostgreSQL. The token issued before the move works after it, ETags read before are the
// same, and the receiver, back up, gets each pending delivery once, signed with the copied secret.
import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Webhook } from 'standardwebhooks';
import { databaseUrl, freshDatabase, postgresTestOptions } from '../harness/postgres.ts';
import { docBlock } from '../harness/readme-blocks.ts';
import { serverEnv, startServer, type RunningServer } from '../harness/process.ts';
import { copyRepository } from '../harness/scratch.ts';

const run = promisify(execFile);
const PAGE = 'docs/operations.md';
const SECTION = '## Moving from SQLite to PostgreSQL';
const PLANTS = 5;

interface Receiver {
  url: string;
  /** Each webhook-id answered 200, in order, with whether its signature verified under `secret`. */
  accepted: { id: string; verified: boolean }[];
  /** Each request, by webhook-id. */
  tries: Map<string, number>;
  up: boolean;
  secret: string;
  /** Resolves once `count` distinct webhook-ids were tried (up: accepted). */
  until: (reached: () => boolean) => Promise<void>;
}

/** A receiver that answers 503 while down, 200 when up, and verifies each accepted delivery's signature. */
async function startReceiver(t: Test): Promise<Receiver> {
  const waiters = new Set<() => void>();
  const receiver: Receiver = {
    url: '',
    accepted: [],
    tries: new Map(),
    up: false,
    secret: '',
    until: (reached) => new Promise((resolve) => {
      const check = () => reached() && (waiters.delete(check), resolve());
      waiters.add(check);
      check();
    }),
  };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const id = String(request.headers['webhook-id']);
      receiver.tries.set(id, (receiver.tries.get(id) ?? 0) + 1);
      if (receiver.up) receiver.accepted.push({ id, verified: verifies(receiver.secret, Buffer.concat(chunks).toString('utf8'), request.headers) });
      response.writeHead(receiver.up ? 200 : 503).end();
      for (const check of [...waiters]) check();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return receiver;
}

function verifies(secret: string, body: string, headers: IncomingHttpHeaders): boolean {
  try {
    new Webhook(secret).verify(body, headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

async function call(server: RunningServer, token: string, method: string, path: string, body?: unknown) {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: response.status, etag: response.headers.get('etag'), body: await response.text() };
}

t.test('moving a live shop from SQLite to PostgreSQL, as docs/operations.md says', await postgresTestOptions(), async (t) => {
  const shop = copyRepository(join(t.testdir(), 'shop'), ['openapi.yaml', 'package.json', 'src', 'scripts']);
  const newDatabase = databaseUrl(await freshDatabase(t, 'store_move'));
  const receiver = await startReceiver(t);
  // The shop runs on the default file, in its directory; deliveries are retried quickly.
  const env = serverEnv(shop, { DATABASE_URL: 'sqlite:./data/plants.db', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_SCHEDULE: Array(20).fill('300ms').join(',') });
  const token = (await run(process.execPath, ['scripts/token.ts', 'create', '--name', 'shop'], { cwd: shop, env: { ...process.env, ...env } })).stdout.trimEnd().split('\n').at(-1)!;

  const before = await startServer(t, env, { cwd: shop });
  const subscribed = await call(before, token, 'POST', '/webhooks', { url: receiver.url });
  t.equal(subscribed.status, 201, 'a webhook subscription');
  receiver.secret = (JSON.parse(subscribed.body) as { secret: string }).secret;
  const etags = new Map<number, string | null>();
  for (let id = 1; id <= PLANTS; id++) {
    const created = await call(before, token, 'POST', '/plants', { id, name: `plant ${id}` });
    t.equal(created.status, 200, `plant ${id} created`);
    etags.set(id, (await call(before, token, 'GET', `/plants/${id}`)).etag);
  }
  // Every event has been tried and refused: its delivery is pending, with attempts recorded.
  await receiver.until(() => receiver.tries.size === PLANTS);
  t.equal(receiver.accepted.length, 0, 'nothing delivered before the move');

  // Step 2: stop the service.
  t.same(await before.stop('SIGTERM'), { code: 0, signal: null }, 'the SQLite service stops cleanly');
  const triedBefore = new Map(receiver.tries);

  // Step 3, verbatim, with DATABASE_URL naming the new database.
  const moveEnv = { ...process.env, ...env, DATABASE_URL: newDatabase };
  const copy = await run('sh', ['-c', docBlock(PAGE, '3. Copy the store', 'sh', SECTION)], { cwd: shop, env: moveEnv });
  t.match(copy.stdout, /^plants +5 +5 +([0-9a-f]{16}) {2}\1 {2}ok$/m, 'the copy prints its verification table');
  t.match(copy.stdout, /every table matches\.$/m, 'and says every table matches');

  // Step 4, verbatim: npm start, on PostgreSQL.
  receiver.up = true;
  const after = await startServer(t, { ...env, DATABASE_URL: newDatabase }, { command: ['sh', '-c', docBlock(PAGE, '4. Start the instances', 'sh', SECTION)], cwd: shop, detached: true });
  // npm runs the server as its child: the whole group goes, whatever the test's outcome.
  t.teardown(() => {
    if (after.child.exitCode === null) process.kill(-after.child.pid!, 'SIGKILL');
  });
  await receiver.until(() => receiver.accepted.length >= PLANTS);
  const accepted = receiver.accepted.map(({ id }) => id);
  t.same([...new Set(accepted)].sort(), [...triedBefore.keys()].sort(), 'the pending deliveries arrive after the move, with the webhook-ids they had');
  t.ok(receiver.accepted.every(({ verified }) => verified), 'signed with the secret issued before the move');

  t.equal((await call(after, token, 'GET', '/plants')).status, 200, 'the token issued before the move works after it');
  for (const [id, etag] of etags) t.equal((await call(after, token, 'GET', `/plants/${id}`)).etag, etag, `plant ${id}: the ETag read before the move`);
  const replaced = await call(after, token, 'PUT', '/plants/1', { name: 'renamed' });
  t.equal(replaced.status, 200, `a replace on PostgreSQL: ${replaced.body}`);
  const renamed = (await call(after, token, 'GET', '/plants/1')).etag;
  t.notOk([...etags.values()].includes(renamed), `takes an ETag none had before (${renamed})`);
  await receiver.until(() => receiver.accepted.length >= PLANTS + 1);
  process.kill(-after.child.pid!, 'SIGTERM');
  await after.exited;
  t.equal(receiver.accepted.length, PLANTS + 1, 'each event was accepted once: the five moved, then the replace');
});
