// docs/operations.md "Backups and restore", followed verbatim in a scratch copy of the repository: a
// backup taken while clients create plants holds every create acknowledged before it started, is
// private, never overwrites, and restores by starting the service on it; from PostgreSQL, a backup
// is a verified copy into the new file.
import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { promisify } from 'node:util';
import { openStore } from '../../src/store/factory.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { databaseUrl, freshDatabase, postgresTestOptions } from '../harness/postgres.ts';
import { docBlock } from '../harness/readme-blocks.ts';
import { runScript, serverEnv, startServer, type RunningServer } from '../harness/process.ts';
import { copyRepository } from '../harness/scratch.ts';

const run = promisify(execFile);
const PAGE = 'docs/operations.md';
const SECTION = '## Backups and restore';
const TOKEN = 'store-backup-token-0123456789abcdef';
const CLIENTS = 4;

/** Clients creating plants one after another until stopped; `acked` holds the ids answered 200, in order. */
function createPlants(server: RunningServer) {
  const acked: number[] = [];
  const state = { running: true };
  let next = 0;
  const clients = Array.from({ length: CLIENTS }, async () => {
    while (state.running) {
      const id = ++next;
      const response = await fetch(`${server.url}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ id, name: `plant ${id}` }),
      });
      if (response.status === 200) acked.push(id);
      await response.arrayBuffer();
    }
  });
  return {
    acked,
    stop: () => {
      state.running = false;
      return Promise.all(clients);
    },
  };
}

async function shell(t: Test, block: string, cwd: string, env: Record<string, string>) {
  return run('sh', ['-c', block], { cwd, env: { ...process.env, ...env } }).then(
    (done) => ({ code: 0, ...done }),
    (failed: { code: number; stdout: string; stderr: string }) => failed,
  );
}

t.test('a backup taken while clients create plants holds every create acknowledged before it, and restores', async (t) => {
  const shop = copyRepository(join(t.testdir(), 'shop'), ['openapi.yaml', 'package.json', 'src', 'scripts']);
  const env = serverEnv(shop, { DATABASE_URL: 'sqlite:./data/plants.db', API_TOKENS: TOKEN });
  const server = await startServer(t, env, { cwd: shop });
  const clients = createPlants(server);
  // Past the first group commits, so that the backup meets a store being written.
  while (clients.acked.length < 200) await new Promise((resolve) => setImmediate(resolve));
  const ackedBefore = [...clients.acked];
  const backup = await shell(t, docBlock(PAGE, '`npm run store -- backup <file>` writes', 'sh', SECTION), shop, env);
  const ackedDuring = clients.acked.length - ackedBefore.length;
  await clients.stop();
  t.equal(backup.code, 0, `the page's backup command succeeds (${backup.stderr})`);
  t.match(backup.stdout, /^Backed up the store into \.\/backups\/plants\.db in [\d.]+ s\.$/m, 'and says where it wrote');
  t.ok(ackedDuring > 0, `the clients' creates went on during the backup (${ackedDuring} acknowledged)`);

  const file = join(shop, 'backups', 'plants.db');
  const db = new DatabaseSync(file, { readOnly: true });
  const held = new Set((db.prepare('SELECT id FROM plants').all() as { id: number }[]).map((row) => row.id));
  db.close();
  t.same(ackedBefore.filter((id) => !held.has(id)), [], `each of the ${ackedBefore.length} creates acknowledged before the backup is in it (${held.size} plants)`);
  t.equal(statSync(file).mode & 0o777, 0o600, 'the file is 0600');
  t.equal(statSync(join(shop, 'backups')).mode & 0o777, 0o700, 'in a directory made 0700');

  const bytes = readFileSync(file);
  const again = await shell(t, docBlock(PAGE, '`npm run store -- backup <file>` writes', 'sh', SECTION), shop, env);
  t.equal(again.code, 1, 'a second backup to the same file is refused');
  t.match(again.stderr, /^\.\/backups\/plants\.db exists: a backup never overwrites a file; name a new one\.\n$/m, 'in one line');
  t.same(readFileSync(file), bytes, 'and the file is left as it was');

  const id = ackedBefore.at(-1)!;
  const etag = (await fetch(`${server.url}/plants/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } })).headers.get('etag');
  await server.stop();
  const restored = await startServer(t, env, { command: ['sh', '-c', docBlock(PAGE, 'To restore, start the service on the backup', 'sh', SECTION)], cwd: shop, detached: true });
  // npm runs the server as its child: the whole group goes, whatever the test's outcome.
  t.teardown(() => {
    if (restored.child.exitCode === null) process.kill(-restored.child.pid!, 'SIGKILL');
  });
  const response = await fetch(`${restored.url}/plants/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  t.same([response.status, response.headers.get('etag')], [200, etag], 'the service started on the backup serves the plant, with its ETag');
  process.kill(-restored.child.pid!, 'SIGTERM');
  await restored.exited;
});

t.test('from PostgreSQL: a verified copy into a new SQLite file', await postgresTestOptions(), async (t) => {
  const url = databaseUrl(await freshDatabase(t, 'store_backup'));
  const store = await openStore(url);
  await store.plants.createPlant({ id: 2n ** 60n + 1n, name: 'Fern' });
  await store.close();
  const file = join(t.testdir(), 'pg.db');
  const backup = await runScript(t, 'scripts/store.ts', ['backup', file], { DATABASE_URL: url });
  t.equal(backup.code, 0, `exits 0 (${backup.stderr})`);
  t.match(backup.stdout, /^plants +1 +1 +([0-9a-f]{16}) {2}\1 {2}ok$/m, 'with the verification table');
  t.equal(statSync(file).mode & 0o777, 0o600, 'the file is 0600');
  const restored = new SqliteStore(file);
  t.teardown(() => restored.close());
  t.match(await restored.plants.getPlant(2n ** 60n + 1n), { plant: { name: 'Fern' }, version: 1n }, 'the plant, its int64 id and version');
});
