// The container image as an operator runs it: `npm run image` builds it offline (a base from scratch
// with the repository's Node 24), podman runs it with a published port and a named volume of the
// test's own: 9007199254740993 is created and read back digit for digit, Node is PID 1 as a non-root
// user, the data lands in the volume (0700, the file 0600), the compile cache in a 0700 directory of
// that user, and SIGTERM stops it with exit code 0.
// No podman: installed from Debian (if that fails: a visible skip, a failure with CI=true). A kernel
// where podman runs no container at all (a trivial one from scratch fails): a visible skip, CI too;
// an image that cannot be built or run where that trivial one runs is a failure.
// As root or rootless: uids and files are read as the containers see them (runAsContainersSee).
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import t, { type Test } from 'tap';
import { contractProblems } from '../harness/contract.ts';
import { baseImage, IMAGE_USER, lastLine, ownerAndMode, probeRunFlags, run, runAsContainersSee } from '../harness/container.ts';
import { REPO_ROOT } from '../harness/paths.ts';
import { reapWithThisProcess } from '../harness/reaper.ts';
import { freePort } from '../harness/ports.ts';
import { rawExchange, rawResponses } from '../harness/raw-http.ts';
import { aptInstall, onPath, skipUnlessCi } from '../harness/system-packages.ts';

const NAME = `plant-store-test-${process.pid}`;
const TAG = `localhost/${NAME}:latest`;
const VOLUME = `${NAME}-data`;
const TOKEN = 'token-container-test-0001';
const BIG = '9007199254740993';

/** The flags podman needs to run a container here, or why this test skips. */
async function setup(): Promise<{ flags: string[]; skip: false } | { flags: undefined; skip: string | false }> {
  if (onPath('podman').length === 0) {
    const failed = aptInstall(['podman']);
    if (failed) return { flags: undefined, skip: skipUnlessCi(`podman is missing and ${failed}`) };
  }
  let probe = await probeRunFlags(`${NAME}-probe`);
  // Debian's crun 1.8 refuses hybrid cgroup v1/v2 hosts, where runc works.
  if (!probe.flags && onPath('runc').length === 0 && aptInstall(['runc']) === undefined) probe = await probeRunFlags(`${NAME}-probe`);
  if (!probe.flags) return { flags: undefined, skip: `podman cannot run any container on this kernel (a trivial one from scratch): ${probe.tried.join('; ')}` };
  return { flags: probe.flags, skip: false };
}

const { flags, skip } = await setup();
// An image build with rootless podman's vfs storage, and npm ci of its dependencies into an empty
// cache, can take minutes: more than tap's 120 s per file.
t.setTimeout(600_000);

t.test('npm run image builds an image that serves, keeps its data in the volume and stops on SIGTERM', { skip }, async (t) => {
  t.ok(flags, 'podman runs containers here');
  if (!flags) return;
  t.comment(`podman run flags this machine needs: ${flags.join(' ') || '(none)'}`);
  cleanUp(t, ['podman', 'rmi', '-f', TAG, baseImage(TAG).base]);

  const [npm, ...npmArgs] = process.env.npm_execpath ? [process.execPath, process.env.npm_execpath] : ['npm'];
  const built = await run(npm!, [...npmArgs, 'run', 'image', '--', TAG], { cwd: REPO_ROOT });
  for (const line of built.stdout.split('\n').filter((line) => line.startsWith('image:'))) t.comment(line);
  t.equal(built.code, 0, built.code === 0 ? 'npm run image built it' : `npm run image: ${lastLine(built)}`);
  if (built.code !== 0) return;

  const [image] = JSON.parse((await run('podman', ['image', 'inspect', TAG])).stdout) as { Config: { User: string; Env: string[]; Volumes: object } }[];
  t.equal(image?.Config.User, `${IMAGE_USER}:${IMAGE_USER}`, 'the image runs as a numeric non-root user');
  t.ok(image && '/data' in image.Config.Volumes, '/data is a volume');
  t.ok(image?.Config.Env.includes('HOST=0.0.0.0'), 'HOST=0.0.0.0');
  t.ok(image?.Config.Env.includes('DATABASE_URL=sqlite:/data/plants.db'), 'DATABASE_URL in the volume');

  t.equal((await run('podman', ['volume', 'create', VOLUME])).code, 0, 'a volume of the test');
  cleanUp(t, ['podman', 'volume', 'rm', '-f', VOLUME]);
  const port = await freePort();
  const container = startContainer(['run', '--name', NAME, ...flags, '-p', `127.0.0.1:${port}:3000`, '-v', `${VOLUME}:/data`, '-e', `API_TOKENS=${TOKEN}`, TAG]);
  t.teardown(() => container.exited);
  cleanUp(t, ['podman', 'rm', '-f', NAME]); // stops it first if an assertion ended the test early
  await container.listening;

  const body = `{"id":${BIG},"name":"Monstera"}`;
  const [created] = rawResponses(await rawExchange(port, request('POST', '/plants', body)));
  t.equal(created?.statusCode, 200, `created: ${created?.body}`);
  t.same(created && contractProblems('POST', '/plants', created), [], 'the create answer is as the contract says');
  const [read] = rawResponses(await rawExchange(port, request('GET', `/plants/${BIG}`)));
  t.equal(read?.statusCode, 200);
  t.match(read?.body, `"id":${BIG},`, 'the id comes back digit for digit in the raw body');
  t.same(read && contractProblems('GET', `/plants/${BIG}`, read), [], 'the read answer is as the contract says');

  const pid = (await run('podman', ['inspect', '--format', '{{.State.Pid}}', NAME])).stdout.trim();
  const status = (await runAsContainersSee('cat', [`/proc/${pid}/status`])).stdout;
  t.same(/^Uid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/), Array(4).fill(String(IMAGE_USER)), `the server runs as uid ${IMAGE_USER}, not root`);
  t.equal(/^NSpid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/).at(-1), '1', 'node is PID 1 in the container: no shell or npm in between');
  // This image's passwd gives uid 1000 no home, so the compile cache goes to /tmp, in a directory of its own.
  const cache = await ownerAndMode(`/proc/${pid}/root/tmp/plant-store-compile-cache-${IMAGE_USER}`);
  t.same(cache, [IMAGE_USER, '700'], "the compile cache directory is the service user's, 0700");

  t.equal((await run('podman', ['kill', '--signal', 'TERM', NAME])).code, 0, 'SIGTERM sent');
  const exit = await container.exited;
  t.equal(exit, 0, 'the container exits 0 on SIGTERM');
  t.match(container.stdout(), /"msg":"stopped cleanly"/);
  t.equal((await run('podman', ['inspect', '--format', '{{.State.ExitCode}}', NAME])).stdout.trim(), '0', 'podman records exit code 0');

  const mountpoint = (await run('podman', ['volume', 'inspect', '--format', '{{.Mountpoint}}', VOLUME])).stdout.trim();
  const file = join(mountpoint, 'plants.db');
  t.same(await ownerAndMode(mountpoint), [IMAGE_USER, '700'], "the volume is the service user's, 0700");
  t.same(await ownerAndMode(file), [IMAGE_USER, '600'], "the SQLite file in it is the service user's, 0600");
  // A copy this process can read: rootless, the file belongs to a uid of podman's namespace.
  const copy = join(t.testdir(), 'plants.db');
  t.equal((await runAsContainersSee('cp', [file, copy])).code, 0, 'the SQLite file copied out of the volume');
  const database = new DatabaseSync(copy, { readOnly: true });
  t.teardown(() => database.close());
  const select = database.prepare('SELECT id, name FROM plants');
  select.setReadBigInts(true);
  t.same(select.all(), [{ id: BigInt(BIG), name: 'Monstera' }], 'the plant is in the volume');
});

t.test('npm run image where neither podman nor buildah is installed: one line saying so, exit 1', async (t) => {
  const result = await run(process.execPath, ['scripts/image.ts'], { cwd: REPO_ROOT, env: { PATH: dirname(process.execPath) } });
  t.equal(result.code, 1);
  t.equal(result.stdout, '');
  t.equal(result.stderr, 'image: needs podman or buildah, and neither is installed (apt-get install podman)\n');
});

/** Runs `command` when the test ends, or, should tap kill this file first, when the reaper finds it gone. */
function cleanUp(t: Test, [command, ...args]: readonly string[]): void {
  const forget = reapWithThisProcess({ command: [command!, ...args] });
  t.teardown(async () => {
    await run(command!, args);
    forget();
  });
}

function request(method: string, path: string, body?: string): string {
  const head = [`${method} ${path} HTTP/1.1`, 'Host: localhost', `Authorization: Bearer ${TOKEN}`, 'Connection: close'];
  if (body !== undefined) head.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`);
  return `${head.join('\r\n')}\r\n\r\n${body ?? ''}`;
}

/** `podman run` attached: its output is the server's, its exit code the container's. */
function startContainer(args: readonly string[]) {
  const child = spawn('podman', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const listening = new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      if (/"msg":"Server listening at /.test(stdout)) resolve();
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    exited.then((code) => reject(new Error(`the container exited (${code}) before listening: ${stderr.trim() || stdout.trim()}`)));
  });
  return { listening, exited, stdout: () => stdout };
}
