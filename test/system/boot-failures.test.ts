// Every way a start can fail because of its configuration or its environment, in the real process:
// it exits non-zero with one or two lines on stderr that name the variable, say what is wrong and
// what to do, never a stack trace and never a password from DATABASE_URL. And a healthy start logs
// no warning, so that operators can trust the ones they see.
import t, { type Test } from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { ADMIN_URL, postgresTestOptions } from '../harness/postgres.ts';
import { runToExit, serverEnv, startServer, type ServerEnv, type SpawnOptions } from '../harness/process.ts';

const PASSWORD = 'pa55-w0rd-in-the-url';

/** Boots with `overrides` and checks the failure is one or two plain lines naming `variable`. */
async function bootFails(t: Test, variable: string, overrides: ServerEnv, options: SpawnOptions = {}): Promise<string> {
  const result = await runToExit(t, serverEnv(scratchDir(t), overrides), options);
  const stderr = result.stderr.trimEnd();
  t.not(result.code, 0, `exits non-zero (${result.code}, ${result.signal})`);
  t.equal(result.signal, null, 'exits by itself, not killed');
  t.notMatch(result.stdout, /Server listening/, 'never listened');
  t.ok(stderr.length > 0, 'says something on stderr');
  t.ok(stderr.split('\n').length <= 2, `at most two lines:\n${stderr}`);
  t.match(stderr, new RegExp(`\\b${variable}\\b`), `names ${variable}`);
  t.notOk(/^\s+at /m.test(stderr), 'no stack trace');
  t.notOk(stderr.includes(PASSWORD) || result.stdout.includes(PASSWORD), 'no password from DATABASE_URL');
  return stderr;
}

// t.testdir() empties the directory when called again in the same test: call it once.
const scratch = new WeakMap<Test, string>();
function scratchDir(t: Test): string {
  if (!scratch.has(t)) scratch.set(t, t.testdir());
  return scratch.get(t)!;
}

async function busyPort(t: Test): Promise<string> {
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
  return String((blocker.address() as AddressInfo).port);
}

/** A port nothing listens on: taken from the system, then released. */
async function closedPort(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return String(port);
}

t.test('LOG_LEVEL=loud lists the allowed values', async (t) => {
  const stderr = await bootFails(t, 'LOG_LEVEL', { LOG_LEVEL: 'loud' });
  t.match(stderr, /fatal, error, warn, info, debug, trace,? (or )?silent/, 'lists them');
});

t.test('a port in use names PORT and HOST', async (t) => {
  const port = await busyPort(t);
  const stderr = await bootFails(t, 'PORT', { PORT: port });
  t.match(stderr, /\bHOST\b/, 'and HOST');
  t.match(stderr, port, 'and the port');
});

t.test('an unresolvable HOST names HOST', async (t) => {
  const stderr = await bootFails(t, 'HOST', { HOST: 'no-such-host.invalid' });
  t.match(stderr, 'no-such-host.invalid');
});

t.test('a HOST that is not an address of this machine names HOST', async (t) => {
  await bootFails(t, 'HOST', { HOST: '192.0.2.1' }); // TEST-NET-1: never assigned to a real machine
});

t.test('a PostgreSQL URL pg cannot parse is refused before connecting, without its password', async (t) => {
  const stderr = await bootFails(t, 'DATABASE_URL', { DATABASE_URL: `postgres://someone:${PASSWORD}@127.0.0.1:notaport/plants` });
  t.match(stderr, /port/i, 'says what is wrong');
});

t.test('an unreachable PostgreSQL: retries for DATABASE_STARTUP_TIMEOUT, then one line saying how long it tried', async (t) => {
  const port = await closedPort();
  const stderr = await bootFails(t, 'DATABASE_URL', {
    DATABASE_URL: `postgres://someone:${PASSWORD}@127.0.0.1:${port}/plants`,
    DATABASE_STARTUP_TIMEOUT: '1s',
  });
  t.match(stderr, /\b\d+(\.\d+)? s\b/, 'says how long it tried');
  t.match(stderr, `127.0.0.1:${port}`, 'names where it tried');
});

t.test('PostgreSQL refusing the database or the role', await postgresTestOptions(), async (t) => {
  const admin = new URL(ADMIN_URL);
  t.test('a database that does not exist', async (t) => {
    const url = new URL(admin);
    url.pathname = '/no_such_plant_database';
    const stderr = await bootFails(t, 'DATABASE_URL', { DATABASE_URL: url.href });
    t.match(stderr, 'no_such_plant_database');
  });
  t.test('a role that does not exist', async (t) => {
    const url = new URL(admin);
    url.username = 'no_such_plant_role';
    url.password = PASSWORD;
    const stderr = await bootFails(t, 'DATABASE_URL', { DATABASE_URL: url.href });
    t.match(stderr, 'no_such_plant_role');
  });
});

t.test('a SQLite path whose directory is a file', async (t) => {
  const file = join(scratchDir(t), 'a-file');
  writeFileSync(file, 'not a directory');
  const stderr = await bootFails(t, 'DATABASE_URL', { DATABASE_URL: `sqlite:${file}/plants.db` });
  t.match(stderr, file, 'names the file in the way');
});

t.test('a SQLite path under /proc is refused up front (it would hang)', { timeout: 60_000 }, async (t) => {
  const stderr = await bootFails(t, 'DATABASE_URL', { DATABASE_URL: 'sqlite:/proc/x/y.db' });
  t.match(stderr, '/proc');
});

t.test('a SQLite file that is not a database', async (t) => {
  const file = join(scratchDir(t), 'notes.db');
  writeFileSync(file, 'these are my notes, not a database\n'.repeat(200));
  const stderr = await bootFails(t, 'DATABASE_URL', { DATABASE_URL: `sqlite:${file}` });
  t.match(stderr, /not a SQLite database/);
});

t.test('a SQLite directory this user cannot write', async (t) => {
  // root may write anywhere: the server runs without that power (SpawnOptions.unprivileged).
  const readonly = join(scratchDir(t), 'readonly');
  mkdirSync(readonly, { mode: 0o555 });
  const stderr = await bootFails(t, 'DATABASE_URL', { DATABASE_URL: `sqlite:${readonly}/plants.db` }, { unprivileged: true });
  t.match(stderr, readonly, 'names the directory');
  t.match(stderr, /writ/i, 'says it cannot be written');
});

t.test('a healthy start logs no warning', async (t) => {
  const server = await startServer(t, serverEnv(t.testdir(), { API_TOKENS: 'boot-failures-token-0123456789' }));
  t.same(await server.stop('SIGTERM'), { code: 0, signal: null });
  const lines = server.stdout().trim().split('\n').map((line) => JSON.parse(line) as { level: number; msg: string });
  t.same(lines.filter((line) => line.level >= 40), [], 'no line at warn level or above');
});
