// A test file that tap kills (past its timeout: SIGALRM, then SIGKILL, and no teardown runs) leaves
// nothing behind. A scratch test file starts a server, a balancer (nginx: a master and its workers),
// a pooler and a database, says so, and is killed with SIGKILL; then no process of them is alive,
// and the next test process to make a database drops the killed one's (test/harness/postgres.ts).
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { balancerProgram } from '../harness/balancers.ts';
import { REPO_ROOT } from '../harness/paths.ts';
import { pgbouncerBinary } from '../harness/pgbouncer.ts';
import { isRunning } from '../harness/process.ts';
import { skipUnlessCi } from '../harness/system-packages.ts';
import { ADMIN_URL, dropOrphanedDatabases, postgresTestOptions, withClient } from '../harness/postgres.ts';

const nginx = balancerProgram('nginx');
const pgbouncer = pgbouncerBinary();
const missing = 'missing' in nginx ? nginx.missing : 'problem' in pgbouncer ? pgbouncer.problem : undefined;
const pgOptions = await postgresTestOptions();

/** What the scratch test file started, as it reports it on one line of its output. */
interface Started {
  server: number;
  balancer: number;
  pooler: number;
  database: string;
}

/** A test file of the repository's kind, run as tap runs one: it starts everything, reports, and waits to be killed. */
function scratchTestFile(nginxPath: string, pgbouncerPath: string): string {
  const from = (path: string) => JSON.stringify(join(REPO_ROOT, path));
  return `
import t from 'tap';
import { startBalancer } from ${from('test/harness/balancers.ts')};
import { startPgBouncer } from ${from('test/harness/pgbouncer.ts')};
import { serverEnv, startServer } from ${from('test/harness/process.ts')};
import { databaseUrl, freshDatabase } from ${from('test/harness/postgres.ts')};
import { readmeBlock } from ${from('test/harness/readme-blocks.ts')};

t.test('starts everything, then is killed', async (t) => {
  const database = await freshDatabase(t, 'plants_reaper');
  const pooler = await startPgBouncer(t, ${JSON.stringify(pgbouncerPath)}, { poolMode: 'transaction', poolSize: 2, upstream: { host: '127.0.0.1', port: Number(new URL(databaseUrl(database)).port || 5432) } });
  const dir = t.testdir();
  const server = await startServer(t, serverEnv(dir, { DATABASE_URL: pooler.url(database) }));
  const port = Number(new URL(server.url).port);
  const balancer = await startBalancer(t, 'nginx', ${JSON.stringify(nginxPath)}, dir, readmeBlock('nginx, inside', 'nginx'), [port, port, port]);
  console.log('started ' + JSON.stringify({ server: server.child.pid, balancer: balancer.pid, pooler: pooler.pid, database }));
  await new Promise(() => undefined); // until killed
});
`;
}

/** The live processes of a process group (zombies left out), read from /proc. */
function aliveInGroup(group: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
        return fields[0] !== 'Z' && Number(fields[2]) === group; // state, ppid, pgrp
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

const databaseExists = (name: string) => withClient(ADMIN_URL, async (client) => (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1);

t.test('a test file killed with SIGKILL leaves no server, balancer, pooler or database behind', { skip: skipUnlessCi(missing) || pgOptions.skip }, async (t) => {
  if ('missing' in nginx || 'problem' in pgbouncer) return;
  const file = join(t.testdir(), 'killed.test.ts');
  writeFileSync(file, scratchTestFile(nginx.path, pgbouncer.path));
  const child = spawn(process.execPath, [file], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  // 'close' comes once every holder of its output is gone: the file, and the reaper that writes to its stderr.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  t.teardown(() => {
    child.kill('SIGKILL');
    return closed;
  });
  const started = await new Promise<Started>((resolve, reject) => {
    const look = () => {
      const line = /^started (\{.*\})$/m.exec(output)?.[1];
      if (line) resolve(JSON.parse(line) as Started);
    };
    child.stdout.on('data', look);
    closed.then(() => reject(new Error(`the scratch test file ended before starting everything:\n${output}`)));
  });
  t.ok(isRunning(started.server) && isRunning(started.pooler), 'the server and the pooler run');
  t.ok(aliveInGroup(started.balancer).length >= 2, 'nginx runs, a master and its worker');
  t.ok(await databaseExists(started.database), 'the database exists');

  child.kill('SIGKILL');
  await closed;
  t.notOk(isRunning(started.server), 'the server is gone');
  t.notOk(isRunning(started.pooler), 'the pooler is gone');
  t.same(aliveInGroup(started.balancer), [], "nginx is gone, its workers too");
  t.match(output, /^reaper: test process \d+ ended before its teardown; cleaned up \{"pid":\d+\}$/m, 'the reaper says what it cleaned up');

  // What the next test process does before it makes a database of its own.
  const dropped = await withClient(ADMIN_URL, dropOrphanedDatabases);
  t.ok(dropped.includes(started.database), 'the killed file\'s database is dropped as an orphan');
  t.notOk(await databaseExists(started.database), 'it is no longer in pg_database');
});
