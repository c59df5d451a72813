// Local users get nothing (issue 24): the SQLite directory is created 0700 and its files 0600 by the
// service and by the token CLI whatever the umask, and Node's compile cache lives in a directory only
// the service's user can write, never in one another user created. Real processes on real files;
// each process starts under the umask the test names (through sh), as an operator's shell would.
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import t, { type Test } from 'tap';
import { REPO_ROOT } from '../harness/paths.ts';
import { serverEnv, startServer } from '../harness/process.ts';

const NOBODY = 65534;
const isRoot = process.getuid?.() === 0;

const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

function scratch(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'private-files-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `node <args>` from the repository root under `umask`, as a shell would start it. */
function underUmask(umask: string, args: string[]): string[] {
  return ['sh', '-c', `umask ${umask} && exec "$0" "$@"`, process.execPath, ...args];
}

/** Runs a command to its end; kills it if the test ends first. */
function runToEnd(t: Test, command: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command[0]!, command.slice(1), { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

for (const umask of ['000', '022']) {
  t.test(`the service, under umask ${umask}, creates the database directory 0700 and the db, -wal and -shm 0600`, async (t) => {
    const dir = join(scratch(t), 'data', 'nested');
    const server = await startServer(t, serverEnv(dir), { command: underUmask(umask, ['src/entry.js']) });
    const db = join(dir, 'plants.db');
    // While the service runs, WAL mode keeps its -wal and -shm beside the database.
    t.same(
      [dir, join(dir, '..'), db, `${db}-wal`, `${db}-shm`].map(mode),
      ['700', '700', '600', '600', '600'],
      'both new directory levels 0700; plants.db, -wal, -shm 0600',
    );
    t.same(await server.stop(), { code: 0, signal: null });
  });
}

t.test('the token CLI, under umask 000, creates the directory 0700 and the database 0600', async (t) => {
  const dir = join(scratch(t), 'data');
  const run = await runToEnd(t, underUmask('000', ['scripts/token.ts', 'create', '--name', 'ci']), { DATABASE_URL: `sqlite:${dir}/plants.db` });
  t.equal(run.code, 0, `created (stderr: ${run.stderr.trim()})`);
  t.same([mode(dir), mode(join(dir, 'plants.db'))], ['700', '600']);
  // SQLite gives a new -wal and -shm the database file's mode: whoever opens it next, they are 0600.
  const reader = new DatabaseSync(join(dir, 'plants.db'));
  reader.prepare('SELECT count(*) FROM api_tokens').get();
  t.same([mode(join(dir, 'plants.db-wal')), mode(join(dir, 'plants.db-shm'))], ['600', '600'], '-wal and -shm take the database file mode');
  reader.close();
});

t.test('a database, -wal and -shm left readable by others are tightened to 0600 by the token CLI, with a warning', async (t) => {
  const base = scratch(t);
  const fresh = join(base, 'fresh');
  t.equal((await runToEnd(t, [process.execPath, 'scripts/token.ts', 'create', '--name', 'ci'], { DATABASE_URL: `sqlite:${fresh}/plants.db` })).code, 0);
  // Files as an older version left them after a crash: a -wal with pages not yet checkpointed, all 0644.
  const writer = new DatabaseSync(join(fresh, 'plants.db'));
  writer.exec('PRAGMA wal_autocheckpoint = 0; CREATE TABLE scratch (x)');
  const loose = join(base, 'loose');
  mkdirSync(loose, { mode: 0o755 });
  chmodSync(loose, 0o755);
  for (const suffix of ['', '-wal', '-shm']) {
    copyFileSync(join(fresh, `plants.db${suffix}`), join(loose, `plants.db${suffix}`));
    chmodSync(join(loose, `plants.db${suffix}`), 0o644);
  }
  writer.close();
  // A reader holds the copy open, so that the CLI's close leaves -wal and -shm in place to be looked at.
  const reader = new DatabaseSync(join(loose, 'plants.db'));
  reader.prepare('SELECT count(*) FROM scratch').get();
  t.teardown(() => reader.close());

  const run = await runToEnd(t, underUmask('022', ['scripts/token.ts', 'list']), { DATABASE_URL: `sqlite:${loose}/plants.db` });
  t.equal(run.code, 0, `listed (stderr: ${run.stderr.trim()})`);
  t.same(['', '-wal', '-shm'].map((suffix) => mode(join(loose, `plants.db${suffix}`))), ['600', '600', '600'], 'db, -wal, -shm now 0600');
  t.match(run.stderr, /plants\.db had mode 644; set to 600/, 'the warning names the file and what was done');
  t.equal(mode(loose), '755', "an existing directory is the operator's and is left as it is");
});

t.test("Node's compile cache: in a directory of the service's user, created 0700, filled by a start", async (t) => {
  const base = scratch(t);
  const env = { ...serverEnv(join(base, 'data')), XDG_CACHE_HOME: join(base, 'xdg'), TMPDIR: join(base, 'tmp') };
  mkdirSync(env.TMPDIR, { mode: 0o1777 });
  const server = await startServer(t, env, { command: underUmask('000', ['src/entry.js']) });
  t.same(await server.stop(), { code: 0, signal: null });
  const cache = join(base, 'xdg', 'plant-store');
  t.ok(existsSync(cache), `the cache is in $XDG_CACHE_HOME/plant-store (temp dir holds: ${readdirSync(env.TMPDIR).join(', ') || 'nothing'})`);
  if (!existsSync(cache)) return;
  t.equal(mode(cache), '700', 'created 0700 under umask 000');
  t.equal(statSync(cache).uid, process.getuid?.(), "owned by the service's user");
  t.not(readdirSync(cache).length, 0, 'Node wrote the cache there');
  t.same(readdirSync(env.TMPDIR), [], 'nothing in the shared temp directory');
});

t.test('a compile cache directory another user created is never used', { skip: isRoot ? false : 'needs root to create a directory owned by nobody' }, async (t) => {
  const base = scratch(t);
  const env = { ...serverEnv(join(base, 'data')), XDG_CACHE_HOME: join(base, 'xdg'), TMPDIR: join(base, 'tmp') };
  mkdirSync(env.TMPDIR, { mode: 0o1777 });
  chmodSync(env.TMPDIR, 0o1777);
  // Every place a cache could go, pre-created by `nobody`, writable by all, as a hostile local user would.
  const planted = [join(base, 'xdg', 'plant-store'), join(env.TMPDIR, 'node-compile-cache'), join(env.TMPDIR, `plant-store-compile-cache-${process.getuid!()}`)];
  for (const dir of planted) {
    mkdirSync(dir, { recursive: true });
    chmodSync(dir, 0o777);
    chownSync(dir, NOBODY, NOBODY);
  }
  const server = await startServer(t, env, { command: underUmask('022', ['src/entry.js']) });
  const health = await fetch(`${server.url}/healthz`);
  t.equal(health.status, 200, 'the service serves without the cache');
  t.same(await server.stop(), { code: 0, signal: null });
  t.same(
    planted.map((dir) => readdirSync(dir)),
    planted.map(() => []),
    'nothing read from or written into the directories nobody created',
  );
  t.match(server.stderr(), /compile cache off: .*xdg\/plant-store belongs to uid 65534/, 'a warning says why the cache is off');
});

/** What Node reports as its compile cache directory after entry.js's choice, in a fresh process with `env`. */
async function cacheChoice(t: Test, env: Record<string, string>): Promise<{ used: string | null; refused?: string }> {
  const script = `
    import module from 'node:module';
    import { privateCacheDir } from './src/compile-cache.js';
    const cache = privateCacheDir();
    if (cache.dir) module.enableCompileCache(cache.dir);
    console.log(JSON.stringify({ used: module.getCompileCacheDir() ?? null, refused: cache.refused }));
  `;
  const run = await runToEnd(t, underUmask('000', ['--input-type=module', '-e', script]), env);
  return JSON.parse(run.stdout) as { used: string | null; refused?: string };
}

t.test('the compile cache directory is refused when it is a symbolic link or others can write it; without a home it goes to a 0700 temp directory', async (t) => {
  const base = scratch(t);
  const tmp = join(base, 'tmp');
  mkdirSync(tmp, { mode: 0o1777 });
  const env = (xdg: string) => ({ XDG_CACHE_HOME: join(base, xdg), TMPDIR: tmp });

  const fresh = await cacheChoice(t, env('fresh'));
  t.match(fresh.used, `${join(base, 'fresh', 'plant-store')}/`, "Node's cache is under $XDG_CACHE_HOME/plant-store");

  mkdirSync(join(base, 'linked'));
  mkdirSync(join(base, 'elsewhere'), { mode: 0o700 });
  symlinkSync(join(base, 'elsewhere'), join(base, 'linked', 'plant-store'));
  t.same(await cacheChoice(t, env('linked')), { used: null, refused: `${join(base, 'linked', 'plant-store')} is not a directory` }, 'a symbolic link: no cache');

  mkdirSync(join(base, 'open', 'plant-store'), { recursive: true });
  chmodSync(join(base, 'open', 'plant-store'), 0o777);
  t.same(await cacheChoice(t, env('open')), { used: null, refused: `${join(base, 'open', 'plant-store')} can be written by others (mode 777)` }, 'writable by others: no cache');

  // A home where nothing can be created (a file: even root cannot make directories under it).
  writeFileSync(join(base, 'no-home'), '');
  const homeless = await cacheChoice(t, { XDG_CACHE_HOME: '', HOME: join(base, 'no-home'), TMPDIR: tmp });
  const fallback = join(tmp, `plant-store-compile-cache-${process.getuid!()}`);
  t.match(homeless.used, `${fallback}/`, 'no home to write: the temp directory, in a directory of this uid');
  t.equal(mode(fallback), '700');
});
