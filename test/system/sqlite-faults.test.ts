// SQLite faults on the real server process: another process holding the write lock (reads and /healthz
// answer while a create waits; the create answers 503 after the documented wait, or 200 once the lock is
// released), and a full disk on a real small tmpfs (503 with Retry-After, /readyz not ready until the disk
// has room again, read without writing; nothing acknowledged lost). The faults come from test/harness/sqlite-faults.ts.
import t, { type Test } from 'tap';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { holdWriteLock, smallDisk, smallDiskSkipReason, type LockHolder } from '../harness/sqlite-faults.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { StoreUnavailableError } from '../../src/store/types.ts';
import { contractProblems } from '../harness/contract.ts';
import { serverEnv, startServer, type RunningServer } from '../harness/process.ts';

const TOKEN = 'sqlite-faults-test-token-0123456789';
/** The log line the server writes once writes start waiting for another process's lock. */
const LOCK_WAIT_LINE = /"msg":"another process holds the SQLite write lock/;

interface Answer {
  status: number;
  retryAfter: string | null;
  body: string;
}

async function call(t: Test, server: RunningServer, method: string, path: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const answer = { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.text() };
  const headers = Object.fromEntries(response.headers);
  t.same(contractProblems(method, path, { statusCode: answer.status, headers, body: answer.body }), [], `${method} ${path} ${answer.status} is documented`);
  return answer;
}

/** A request still in flight, and whether it has settled, to check what answered first. */
function inFlight<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let settled = false;
  const tracked = promise.finally(() => (settled = true));
  return { promise: tracked, settled: () => settled };
}

function isUnavailable(t: Test, answer: Answer, what: string): void {
  t.equal(answer.status, 503, `${what}: 503`);
  t.match(answer.retryAfter ?? '', /^\d+$/, `${what}: Retry-After in seconds`);
  t.equal(JSON.parse(answer.body).error, 503, `${what}: the Error body`);
}

/** Starts a create while another process holds the lock; resolves once reads have answered while it waits. */
async function createWhileLocked(t: Test, server: RunningServer, plant: { id: number; name: string }): Promise<{ create: Promise<Answer> }> {
  const create = inFlight(call(t, server, 'POST', '/plants', plant));
  await Promise.race([server.waitFor('stdout', LOCK_WAIT_LINE), create.promise]);
  t.notOk(create.settled(), 'the create is waiting for the lock');
  // Asked only now, so each answer proves the event loop turns while the create waits.
  const health = await call(t, server, 'GET', '/healthz');
  t.equal(health.status, 200, '/healthz answers');
  t.notOk(create.settled(), '/healthz answered while the create still waited');
  const read = await call(t, server, 'GET', '/plants/1');
  t.equal(read.status, 200, 'a read answers');
  t.same(JSON.parse(read.body), { id: 1, name: 'before the lock' });
  t.notOk(create.settled(), 'the read answered while the create still waited');
  return { create: create.promise };
}

/** The real server with plant 1 stored, and another process holding its write lock. */
async function serverWithLockHeld(t: Test): Promise<{ server: RunningServer; holder: LockHolder }> {
  const dir = t.testdir();
  const server = await startServer(t, serverEnv(dir, { API_TOKENS: TOKEN }));
  t.equal((await call(t, server, 'POST', '/plants', { id: 1, name: 'before the lock' })).status, 200);
  const holder = await holdWriteLock(join(dir, 'plants.db'));
  t.teardown(() => holder.release());
  return { server, holder };
}

t.test('another process holds the write lock past the wait: reads answer meanwhile, then the create answers 503', async (t) => {
  const { server, holder } = await serverWithLockHeld(t);

  const { create } = await createWhileLocked(t, server, { id: 2, name: 'while locked' });
  isUnavailable(t, await create, 'the create that waited out the lock');
  await holder.release();
  t.equal((await call(t, server, 'GET', '/plants/2')).status, 404, 'the refused create was not applied');
  t.equal((await call(t, server, 'POST', '/plants', { id: 2, name: 'while locked' })).status, 200, 'a create after the release');
});

t.test('another process releases the write lock within the wait: the waiting create answers 200', async (t) => {
  const { server, holder } = await serverWithLockHeld(t);

  const { create } = await createWhileLocked(t, server, { id: 2, name: 'while locked' });
  // Released once the reads have shown the loop turns, while the create still waits.
  await holder.release();
  const answer = await create;
  t.equal(answer.status, 200, 'the create that waited answers 200');
  t.same(JSON.parse((await call(t, server, 'GET', '/plants/2')).body), { id: 2, name: 'while locked' }, 'and it is stored');
});

// A real full filesystem needs a tmpfs mount (root): without it the test skips visibly, except in CI, where it fails.
const noSmallDisk = await smallDiskSkipReason();
const fullDiskOptions = { skip: noSmallDisk !== undefined && process.env.CI !== 'true' ? noSmallDisk : false };

t.test('a full disk: creates answer 503 with Retry-After, /readyz 503 until the disk has room, never a write, nothing acknowledged is lost', fullDiskOptions, async (t) => {
  const disk = await smallDisk(8 * 1024 * 1024);
  // eslint-disable-next-line prefer-const -- the teardown, registered first so the disk goes even if the start fails, reads it
  let server: RunningServer | undefined;
  t.teardown(async () => {
    await server?.stop('SIGKILL');
    await disk.destroy();
  });
  const dbPath = join(disk.dir, 'plants.db');
  server = await startServer(t, serverEnv(disk.dir, { API_TOKENS: TOKEN }));

  const acknowledged = Array.from({ length: 20 }, (_, index) => ({ id: index + 1, name: `acknowledged ${index + 1}`, tag: 'before' }));
  for (const plant of acknowledged) t.equal((await call(t, server, 'POST', '/plants', plant)).status, 200, `plant ${plant.id} stored`);
  t.equal((await call(t, server, 'GET', '/readyz')).status, 200, 'ready before the disk fills');

  await disk.fill();
  isUnavailable(t, await call(t, server, 'POST', '/plants', { id: 100, name: 'on a full disk' }), 'a create on a full disk');
  const creates = await Promise.all([101, 102, 103].map((id) => call(t, server, 'POST', '/plants', { id, name: 'on a full disk' })));
  creates.forEach((answer, index) => isUnavailable(t, answer, `create ${index + 1} of a batch on a full disk`));
  const notReady = await call(t, server, 'GET', '/readyz');
  t.equal(notReady.status, 503, '/readyz: not ready while writes fail');
  t.equal((await call(t, server, 'GET', '/readyz')).status, 503, 'and still not ready at the next check');
  t.same(JSON.parse((await call(t, server, 'GET', '/plants/1')).body), acknowledged[0], 'reads still answer');

  await disk.free();
  // What a write, even one undone, would change: the database file and its WAL.
  const files = () => ['', '-wal'].map((suffix) => statSync(dbPath + suffix, { bigint: true })).map(({ size, mtimeNs }) => [size, mtimeNs]);
  const untouched = files();
  t.equal((await call(t, server, 'GET', '/readyz')).status, 200, '/readyz: ready once the disk has room again');
  t.same(files(), untouched, 'and the readiness check wrote nothing');
  t.equal((await call(t, server, 'POST', '/plants', { id: 104, name: 'after the space came back' })).status, 200, 'creates work again');
  for (const id of [100, 101, 102, 103]) t.equal((await call(t, server, 'GET', `/plants/${id}`)).status, 404, `refused plant ${id} was not applied`);
  const listed = JSON.parse((await call(t, server, 'GET', '/plants?tag=before&limit=100')).body);
  t.same(listed, acknowledged, 'every plant acknowledged before the disk filled is there, intact');

  const exit = await server.stop('SIGTERM');
  t.same(exit, { code: 0, signal: null }, 'a clean stop');
  const db = new DatabaseSync(dbPath, { readOnly: true });
  t.teardown(() => db.close());
  t.same(db.prepare('PRAGMA integrity_check').all(), [{ integrity_check: 'ok' }], 'the file is intact');
  t.equal(Number((db.prepare('SELECT count(*) AS n FROM plants').get() as { n: number }).n), 21, 'on disk: the 20 acknowledged and the one after');
});

/** A store on a fresh file, and a promise that settles when its writes start waiting for another process's lock. */
function storeTellingLockWaits(t: Test): { store: SqliteStore; path: string; lockWait: Promise<void> } {
  const path = join(t.testdir(), 'plants.db');
  let told!: () => void;
  const lockWait = new Promise<void>((resolve) => (told = resolve));
  const store = new SqliteStore(path, { onLockWait: () => told() });
  t.teardown(() => store.close());
  return { store, path, lockWait };
}

t.test('writes that find the lock held wait on timers in order, and commit together once it is released', async (t) => {
  const { store, path, lockWait } = storeTellingLockWaits(t);
  const holder = await holdWriteLock(path);
  t.teardown(() => holder.release());
  const first = inFlight(store.plants.createPlant({ id: 1n, name: 'first' }));
  await Promise.race([lockWait, first.promise]);
  t.notOk(first.settled(), 'the first create waits for the lock');

  const commits: string[] = [];
  const exec = DatabaseSync.prototype.exec;
  DatabaseSync.prototype.exec = function (this: DatabaseSync, sql: string) {
    const result = exec.call(this, sql);
    if (sql.trim() === 'COMMIT') commits.push(sql);
    return result;
  };
  t.teardown(() => (DatabaseSync.prototype.exec = exec));
  const second = inFlight(store.plants.createPlant({ id: 1n, name: 'second, same id' }));
  const third = inFlight(store.plants.createPlant({ id: 2n, name: 'third' }));
  t.equal(await store.plants.getPlant(1n), undefined, 'a read answers while the writes wait');
  t.notOk(first.settled() || second.settled() || third.settled(), 'the read answered first');

  await holder.release();
  t.equal((await first.promise).outcome, 'created', 'the first create, issued first, wins');
  t.equal((await second.promise).outcome, 'conflict', 'the second, issued later for the same id, finds it');
  t.equal((await third.promise).outcome, 'created');
  t.equal(commits.length, 1, 'the writes that waited together committed together');
});

t.test('the outbox poll, token last-use times and pruning wait for the lock without blocking, then fail as unavailable', async (t) => {
  const { store, path, lockWait } = storeTellingLockWaits(t);
  await store.webhooks.createSubscription({ url: 'https://example.com/hook', events: ['plant.created'], secret: 'whsec_test' }, 100);
  await store.plants.createPlant({ id: 1n, name: 'with an event to deliver' });
  const token = await store.tokens.createToken({ name: 'used', hash: 'a'.repeat(64), hint: 'pst_…aaaa' });
  const holder = await holdWriteLock(path);
  t.teardown(() => holder.release());

  const writes = {
    'claimDueDeliveries (the outbox poll)': inFlight(store.webhooks.claimDueDeliveries(new Date(Date.now() + 1_000), 10_000, 10)),
    'recordTokenUse (last-use batching)': inFlight(store.tokens.recordTokenUse(new Map([[token.id, new Date().toISOString()]]))),
    pruneDeliveries: inFlight(store.webhooks.pruneDeliveries(new Date(), new Date())),
  };
  await Promise.race([lockWait, ...Object.values(writes).map((write) => write.promise.catch(() => undefined))]);
  t.equal(await store.webhooks.countPendingDeliveries(), 1, 'reads answer while they wait');
  await t.resolves(store.ping(), 'and so does ping: a lock held elsewhere does not make the instance unready');
  for (const [name, write] of Object.entries(writes)) {
    t.notOk(write.settled(), `${name} was still waiting when the reads answered`);
  }
  for (const [name, write] of Object.entries(writes)) {
    await t.rejects(write.promise.then(() => undefined), StoreUnavailableError, `${name} fails as unavailable after the wait`);
  }
});
