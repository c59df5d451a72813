// The token CLI as a real process: `node scripts/token.ts create|list|revoke` on a real SQLite
// file, and the service, built in-process on the same file, honouring what it did.
// Runs against one file are sequential (each is a Node start); independent runs on separate
// files go concurrently.
import t, { type Test } from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { FastifyInstance } from 'fastify';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { generateToken, hashToken, tokenHint } from '../../src/tokens/format.ts';
import { api, build, createPlant, readRows } from '../harness/helper.ts';
import { runScript } from '../harness/process.ts';

const ISSUED = /^pst_[0-9A-Za-z]{49}$/;
const ANY_ISSUED = /pst_[0-9A-Za-z]{49}/;
const SHA256_HEX = /[0-9a-f]{64}/i;
const DAY_MS = 86_400_000;
const MINUTE_MS = 60_000;
const PLANT = '{"id":1,"name":"Monstera"}';

t.jobs = 2; // the tests use separate files; each CLI run is mostly a Node start

type Run = Awaited<ReturnType<typeof runScript>>;

interface Created {
  token: string;
  id: string;
  /** The lines before the token. */
  head: string;
}

const dbPathIn = (dir: string) => join(dir, 'plants.db');

/** `npm run token -- ...args` on the SQLite file in `dir`. */
function tokenCli(t: Test, dir: string, ...args: string[]): Promise<Run> {
  return runScript(t, 'scripts/token.ts', args, { DATABASE_URL: `sqlite:${dbPathIn(dir)}` });
}

const lines = (text: string) => text.replace(/\n$/, '').split('\n');
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Runs `create ...args`, checks it succeeded and printed the token as its last line. */
async function create(t: Test, dir: string, ...args: string[]): Promise<Created> {
  const run = await tokenCli(t, dir, 'create', ...args);
  t.same({ code: run.code, signal: run.signal }, { code: 0, signal: null }, `create ${args.join(' ')}: exit 0 (stderr: ${run.stderr.trim()})`);
  t.equal(run.stderr, '', 'create writes nothing on stderr');
  t.ok(run.stdout.endsWith('\n'), 'stdout ends with a newline');
  const output = lines(run.stdout);
  const token = output.at(-1)!;
  t.match(token, ISSUED, 'the last line of stdout is the token, alone');
  const head = output.slice(0, -1).join('\n');
  t.notMatch(head, /pst_/, 'the token is printed only once, on the last line');
  const id = /\b(\d+)\b/.exec(head)?.[1];
  t.ok(id, `the output names the token's id (${head.split('\n')[0]})`);
  return { token, id: id!, head };
}

/**
 * Builds the app, in-process, on the SQLite file in `dir`, in a subtest that closes it at its end:
 * each app starts with a cold token cache, and is gone before the next command runs.
 */
function withApp(
  t: Test,
  name: string,
  dir: string,
  check: (t: Test, app: FastifyInstance) => Promise<void>,
  clock?: () => number,
): Promise<unknown> {
  return t.test(name, async (t) => {
    const { app } = await build(t, {}, { store: new SqliteStore(dbPathIn(dir)), ...(clock && { clock }) });
    await check(t, app);
  });
}

async function getPlants(t: Test, app: FastifyInstance, token: string) {
  return api(t, app, { method: 'GET', url: '/plants', headers: bearer(token) });
}

/** Checks a 401 invalid_token answer and its published Error body. */
function isInvalidToken(t: Test, response: Awaited<ReturnType<typeof api>>, what: string): void {
  t.equal(response.statusCode, 401, `${what}: 401`);
  t.match(response.headers['www-authenticate'], /^Bearer realm="plants", error="invalid_token"/, `${what}: invalid_token challenge`);
  t.match(response.json(), { error: 401n, message: String }, `${what}: the Error body`);
}


/** The database files hold each token's SHA-256 hash (so we read the right file) but never the token or its secret. */
function storedOnlyAsHashes(t: Test, dir: string, tokens: readonly string[]): void {
  const dbPath = dbPathIn(dir);
  const hashes = readRows<{ token_hash: string }>(dbPath, 'SELECT token_hash FROM api_tokens').map((row) => row.token_hash);
  for (const token of tokens) t.ok(hashes.includes(hashToken(token)), `the store holds the hash of ${tokenHint(token)}`);
  const files = [dbPath, `${dbPath}-wal`].filter((file) => existsSync(file));
  t.ok(files.includes(dbPath), 'the database file exists');
  for (const file of files) {
    const bytes = readFileSync(file);
    for (const token of tokens) {
      t.notOk(bytes.includes(token), `${file} does not contain ${tokenHint(token)}`);
      t.notOk(bytes.includes(token.slice('pst_'.length)), `${file} does not contain the secret part of ${tokenHint(token)}`);
    }
  }
}

/** `list` parsed into its rows' cells (columns are separated by two or more spaces). */
function tableRows(stdout: string): string[][] {
  return lines(stdout).map((line) => line.trim().split(/ {2,}/));
}

t.test('create --name ci-reader --scope plants:read --expires 30d: the token reads and may not write', async (t) => {
  const dir = t.testdir();
  const before = Date.now();
  const { token, head } = await create(t, dir, '--name', 'ci-reader', '--scope', 'plants:read', '--expires', '30d');
  const after = Date.now();
  t.match(head, 'ci-reader', 'the output names the token');
  t.match(head, 'plants:read', 'and its scope');
  t.notMatch(head, 'plants:write', 'and only that scope');
  const expiresText = /(\d{4}-\d\d-\d\dT[\d:.]+Z)/.exec(head)?.[1];
  t.ok(expiresText, `the output gives the expiry as an ISO 8601 instant (${head})`);
  const expiresAt = Date.parse(expiresText ?? '');
  t.ok(
    expiresAt >= before + 30 * DAY_MS - MINUTE_MS && expiresAt <= after + 30 * DAY_MS + MINUTE_MS,
    `it expires 30 days from now (${expiresText})`,
  );

  await withApp(t, 'the service, on the same file, honours its scope', dir, async (t, app) => {
    isInvalidToken(t, await getPlants(t, app, generateToken()), 'GET /plants with a token never issued');
    const read = await getPlants(t, app, token);
    t.equal(read.statusCode, 200, 'GET /plants with the CLI token: 200');
    t.same(read.json(), [], 'an empty page');

    const write = await createPlant(t, app, PLANT, bearer(token));
    t.equal(write.statusCode, 403, 'POST /plants with the read-only token: 403');
    const challenge = String(write.headers['www-authenticate']);
    t.match(challenge, /^Bearer realm="plants"/, `a Bearer challenge (${challenge})`);
    t.match(challenge, 'error="insufficient_scope"', 'error="insufficient_scope"');
    t.match(challenge, 'scope="plants:write"', 'naming the scope needed');
    const body = write.json() as { error: bigint; message: string };
    t.same(Object.keys(body).sort(), ['error', 'message'], 'the Error body');
    t.equal(body.error, 403n, 'error: 403');
    t.ok(typeof body.message === 'string' && body.message.length > 0, `a message (${body.message})`);
    t.equal((await getPlants(t, app, token)).statusCode, 200, 'the refused write did not spoil the token');
  });
  storedOnlyAsHashes(t, dir, [token]);
});

t.test('create --name admin without --scope: the token has every scope', async (t) => {
  const dir = t.testdir();
  const { token, head } = await create(t, dir, '--name', 'admin');
  t.match(head, 'admin', 'the output names the token');
  t.match(head, '*', 'and says it has every scope');
  t.match(head, /never/, 'and that it never expires');
  await withApp(t, 'the service lets it write and read', dir, async (t, app) => {
    const write = await createPlant(t, app, PLANT, bearer(token));
    t.equal(write.statusCode, 200, 'POST /plants: 200');
    t.equal(write.body, '{"name":"Monstera"}', 'the plant was created');
    t.equal((await getPlants(t, app, token)).statusCode, 200, 'GET /plants: 200');
  });
  storedOnlyAsHashes(t, dir, [token]);
});

t.test('list: every token with id, name, hint, scopes and status; never a token, its secret or a hash', async (t) => {
  const dir = t.testdir();
  const emptyList = tokenCli(t, join(dir, 'fresh'), 'list'); // its own file: it runs alongside
  const both = await create(t, dir, '--name', 'both', '--scope', 'plants:read', '--scope', 'plants:write', '--expires', '12h');
  const admin = await create(t, dir, '--name', 'admin');
  const empty = await emptyList;
  t.same({ code: empty.code, stderr: empty.stderr }, { code: 0, stderr: '' }, 'list on a fresh store: exit 0');
  t.match(empty.stdout, /No tokens/, `a fresh store lists "No tokens" (${empty.stdout.trim()})`);

  // A revoked and an expired token, written straight to the store: the CLI revokes in the next
  // test, and it cannot be given a clock.
  const store = new SqliteStore(dbPathIn(dir));
  const addToken = async (name: string, scopes: string[], expiresAt?: string) => {
    const token = generateToken();
    const record = await store.tokens.createToken({ name, hash: hashToken(token), hint: tokenHint(token), scopes, ...(expiresAt && { expiresAt }) });
    return { token, id: String(record.id) };
  };
  const gone = await addToken('gone', ['plants:write']);
  await store.tokens.revokeToken('gone');
  const old = await addToken('old', ['plants:read'], new Date(Date.now() - MINUTE_MS).toISOString());
  await store.close();

  const run = await tokenCli(t, dir, 'list');
  t.same({ code: run.code, signal: run.signal, stderr: run.stderr }, { code: 0, signal: null, stderr: '' }, 'list: exit 0');
  const rows = tableRows(run.stdout);
  const expected = [
    { ...both, name: 'both', scopes: ['plants:read', 'plants:write'], status: 'active' },
    { ...admin, name: 'admin', scopes: ['*'], status: 'active' },
    { ...gone, name: 'gone', scopes: ['plants:write'], status: 'revoked' },
    { ...old, name: 'old', scopes: ['plants:read'], status: 'expired' },
  ];
  for (const { token, id, name, scopes, status } of expected) {
    const row = rows.find((cells) => cells.includes(name));
    t.ok(row, `a row for ${name}`);
    if (!row) continue;
    t.ok(row.includes(id), `${name}: its id ${id} (${row.join(' | ')})`);
    t.ok(row.includes(`pst_…${token.slice(-4)}`), `${name}: its hint pst_…${token.slice(-4)}`);
    for (const scope of scopes) t.match(row.join('  '), scope, `${name}: scope ${scope}`);
    if (!scopes.includes('*')) t.notOk(row.includes('*'), `${name}: not every scope`);
    t.ok(row.includes(status), `${name}: status ${status}`);
  }
  t.equal(rows.filter((cells) => ['active', 'revoked', 'expired'].includes(cells.at(-1)!)).length, 4, 'one row per token');

  const shown = run.stdout + run.stderr;
  for (const { token } of expected) {
    t.notOk(shown.includes(token), `the list does not show ${tokenHint(token)}`);
    t.notOk(shown.includes(token.slice('pst_'.length)), `nor its secret part`);
    t.notOk(shown.includes(token.slice('pst_'.length, 'pst_'.length + 8)), 'nor the start of its secret');
    t.notOk(shown.includes(hashToken(token)), 'nor its hash');
  }
  t.notMatch(shown, ANY_ISSUED, 'no full token at all');
  t.notMatch(shown, SHA256_HEX, 'no SHA-256 hex hash at all');
  storedOnlyAsHashes(t, dir, expected.map(({ token }) => token));
});

t.test('revoke NAME and revoke ID: the token is refused by any app that looks it up afterwards', async (t) => {
  const dir = t.testdir();
  const unknownRun = tokenCli(t, join(dir, 'other'), 'revoke', 'unknown'); // its own file: it runs alongside
  const one = await create(t, dir, '--name', 'one');
  const two = await create(t, dir, '--name', 'two', '--scope', 'plants:read');
  // A control the revocations must not touch (the CLI's create is covered above).
  const three = generateToken();
  const store = new SqliteStore(dbPathIn(dir));
  await store.tokens.createToken({ name: 'three', hash: hashToken(three), hint: tokenHint(three), scopes: ['*'] });
  await store.close();
  await withApp(t, 'before the revocations every token works', dir, async (t, app) => {
    for (const token of [one.token, two.token, three]) t.equal((await getPlants(t, app, token)).statusCode, 200, `${tokenHint(token)}: 200`);
  });

  const byName = await tokenCli(t, dir, 'revoke', 'one');
  t.same({ code: byName.code, stderr: byName.stderr }, { code: 0, stderr: '' }, 'revoke one: exit 0');
  t.match(byName.stdout, /"one"/, `it says which token (${byName.stdout.trim()})`);
  const byId = await tokenCli(t, dir, 'revoke', two.id);
  t.same({ code: byId.code, stderr: byId.stderr }, { code: 0, stderr: '' }, `revoke ${two.id}: exit 0`);
  t.match(byId.stdout, /"two"/, `it revoked the token with that id (${byId.stdout.trim()})`);
  const again = await tokenCli(t, dir, 'revoke', 'one');
  t.same({ code: again.code, stderr: again.stderr }, { code: 0, stderr: '' }, 'revoking it again is fine: exit 0');

  const unknown = await unknownRun;
  t.equal(unknown.code, 1, 'revoke unknown: exit 1');
  t.match(unknown.stderr, /"unknown"/, `stderr says which (${unknown.stderr.trim()})`);
  t.equal(unknown.stdout, '', 'and nothing on stdout');
  t.notMatch(unknown.stderr, /^\s+at /m, 'no stack trace');

  const list = await tokenCli(t, dir, 'list');
  t.equal(list.code, 0, 'list: exit 0');
  const statusOf = (name: string) => tableRows(list.stdout).find((cells) => cells.includes(name))?.at(-1);
  t.same(
    { one: statusOf('one'), two: statusOf('two'), three: statusOf('three') },
    { one: 'revoked', two: 'revoked', three: 'active' },
    'list: one and two revoked, three untouched',
  );

  await withApp(t, 'an app built after the revocations refuses them', dir, async (t, app) => {
    isInvalidToken(t, await getPlants(t, app, one.token), 'revoked by name');
    isInvalidToken(t, await getPlants(t, app, two.token), 'revoked by id');
    isInvalidToken(t, await createPlant(t, app, PLANT, bearer(one.token)), 'revoked by name, on a write');
    t.equal((await getPlants(t, app, three)).statusCode, 200, 'the token not revoked still works');
  });
  storedOnlyAsHashes(t, dir, [one.token, two.token, three]);
});

t.test('refusals: exit 1 when refused, 2 on usage errors; nothing stored, no token printed', async (t) => {
  const dir = t.testdir();
  const usage = /Usage:/;
  const cases: { name: string; args: string[]; code: number; stderr: RegExp[]; env?: Record<string, string> }[] = [
    { name: 'an unknown scope', args: ['create', '--name', 'x', '--scope', 'nope'], code: 2, stderr: [/nope/, /plants:read/, /plants:write/] },
    { name: '--expires 30x', args: ['create', '--name', 'x', '--expires', '30x'], code: 2, stderr: [/--expires/, /30x/] },
    { name: '--expires 0d', args: ['create', '--name', 'x', '--expires', '0d'], code: 2, stderr: [/--expires/, /0d/] },
    { name: 'no --name', args: ['create', '--scope', 'plants:read'], code: 2, stderr: [/--name/] },
    { name: 'an unknown command', args: ['frobnicate'], code: 2, stderr: [/frobnicate/, usage] },
    { name: 'a stray argument to create', args: ['create', '--name', 'x', 'stray'], code: 2, stderr: [/stray/, usage] },
    { name: 'a stray argument to list', args: ['list', 'everything'], code: 2, stderr: [/list takes no arguments/, usage] },
    {
      name: 'a store path that cannot be created',
      args: ['list'],
      code: 1,
      stderr: [/^token: /],
      env: { DATABASE_URL: 'sqlite:/dev/null/plants/plants.db' },
    },
    {
      name: 'a bad DATABASE_URL',
      args: ['create', '--name', 'x'],
      code: 1,
      stderr: [/DATABASE_URL/],
      env: { DATABASE_URL: 'mysql://u:secret@h/db' },
    },
  ];
  const duplicate = (async () => {
    const first = await create(t, dir, '--name', 'taken');
    const again = await tokenCli(t, dir, 'create', '--name', 'taken', '--scope', 'plants:read');
    t.equal(again.code, 1, 'a duplicate name: exit 1');
    t.match(again.stderr, /"taken".*already exists/, `the message says the name exists (${again.stderr.trim()})`);
    t.notMatch(again.stdout, /pst_/, 'a duplicate name: no token printed');
    t.same(
      readRows(dbPathIn(dir), 'SELECT name, token_hash FROM api_tokens'),
      [{ name: 'taken', token_hash: hashToken(first.token) }],
      'the first token is intact, and alone',
    );
  })();
  await Promise.all([
    duplicate,
    ...cases.map(async ({ name, args, code, stderr, env }, index) => {
      // Each on its own file: every run opens its database, and these run together.
      const caseDir = join(dir, `case-${index}`);
      const run = env ? await runScript(t, 'scripts/token.ts', args, env) : await tokenCli(t, caseDir, ...args);
      t.same({ code: run.code, signal: run.signal }, { code, signal: null }, `${name}: exit ${code}`);
      for (const pattern of stderr) t.match(run.stderr, pattern, `${name}: stderr matches ${pattern} (${run.stderr.split('\n')[0]})`);
      t.notMatch(run.stderr, /^\s+at /m, `${name}: no stack trace`);
      t.notMatch(run.stdout, /pst_/, `${name}: no token printed`);
      if (env) {
        t.notMatch(run.stderr + run.stdout, 'secret', `${name}: no password is echoed`);
      } else {
        t.same(readRows(dbPathIn(caseDir), 'SELECT name FROM api_tokens'), [], `${name}: no token stored`);
      }
    }),
  ]);
});

t.test('an expired token is refused; until then it works', async (t) => {
  const dir = t.testdir();
  const { token, head } = await create(t, dir, '--name', 'brief', '--expires', '1m');
  const expiresAt = Date.parse(/\b(\d{4}-\d\d-\d\dT[\d:.]+Z)/.exec(head)?.[1] ?? '');
  t.ok(Math.abs(expiresAt - (Date.now() + MINUTE_MS)) < MINUTE_MS / 2, 'it expires in a minute');
  await withApp(t, 'now: it works', dir, async (t, app) => {
    t.equal((await getPlants(t, app, token)).statusCode, 200, 'GET /plants: 200');
  });
  await withApp(
    t,
    'two minutes later: 401',
    dir,
    async (t, app) => {
      isInvalidToken(t, await getPlants(t, app, token), 'GET /plants after expiry');
      isInvalidToken(t, await createPlant(t, app, PLANT, bearer(token)), 'POST /plants after expiry');
    },
    () => Date.now() + 2 * MINUTE_MS,
  );
  storedOnlyAsHashes(t, dir, [token]);
});

// A command opening a new file while another connection holds a lock on it (another command, or
// the server opening it at the same moment) must wait for the lock, not fail with "database is
// locked": switching the file to WAL needs that lock, so busy_timeout must be set before.
t.test('a command opening a new file waits for a lock another connection holds briefly', async (t) => {
  const dir = t.testdir();
  const holder = new DatabaseSync(dbPathIn(dir));
  holder.exec('BEGIN EXCLUSIVE');
  const release = () => {
    if (holder.isTransaction) holder.exec('COMMIT');
  };
  // Held well under the 5 s busy_timeout the store sets; released at once if the command gives up.
  const timer = setTimeout(release, 1_500);
  const run = await tokenCli(t, dir, 'list');
  clearTimeout(timer);
  release();
  holder.close();
  const error = run.stderr.split('\n').find((line) => /Error/.test(line)) ?? '';
  t.equal(run.code, 0, `exit 0 ${error}`);
  t.notMatch(run.stderr, /^\s+at /m, 'no stack trace');
  t.match(run.stdout, /No tokens/, 'it listed the (empty) store');
});
