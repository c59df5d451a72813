// The container image without a registry, for `npm run image` and test/system/container.test.ts: podman (or
// buildah) builds a base from scratch holding the repository's own Node 24 and the libraries ldd
// names, then the Containerfile on it (build argument BASE), its deps stage replaced by production
// node_modules installed here (--build-context deps=<dir>). Builds use chroot isolation, so they
// need no container runtime; running a container does, and probeRunFlags finds the podman flags
// this kernel needs to run one.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, constants, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { REPO_ROOT } from './paths.ts';
import { onPath } from './system-packages.ts';

/** The uid and gid the image runs as: `node` in the official Node images, numeric for runAsNonRoot. */
export const IMAGE_USER = 1000;
export const NODE_24 = join(REPO_ROOT, 'node_modules', 'node', 'bin', 'node');

export interface Engine {
  name: 'podman' | 'buildah';
  version: string;
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end, its output captured (a missing command is code null). */
export function run(command: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const output = { stdout: '', stderr: '' };
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output.stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output.stderr += chunk));
    child.once('error', (error) => resolve({ code: null, stdout: '', stderr: error.message }));
    child.once('close', (code) => resolve({ code, ...output }));
  });
}

/**
 * Runs a command where uids read as the containers see them. As root, directly: rootful podman maps no
 * uid. Rootless, in podman's user namespace (`podman unshare`): there the host's subordinate uids of a
 * volume's files and of a container's processes read as the container's own, and /proc/PID/root of a
 * container's process may be entered; the caller's own uid is root there.
 */
export function runAsContainersSee(command: string, args: readonly string[]): Promise<Run> {
  return process.getuid?.() === 0 ? run(command, args) : run('podman', ['unshare', command, ...args]);
}

/** A file's owner and permission bits (octal) as the containers see them, or undefined when it cannot be read. */
export async function ownerAndMode(path: string): Promise<[number, string] | undefined> {
  const result = await runAsContainersSee('stat', ['-c', '%u %a', path]);
  const [uid, mode] = result.stdout.trim().split(' ');
  return result.code === 0 ? [Number(uid), mode!] : undefined;
}

/** The last line of what a failed command said, for one-line reasons. */
export function lastLine(result: Run): string {
  return (result.stderr.trim() || result.stdout.trim()).split('\n').at(-1) ?? `exit code ${result.code}`;
}

/** podman if installed, else buildah (it builds but cannot run); undefined when neither is. */
export function containerEngine(): Engine | undefined {
  for (const name of ['podman', 'buildah'] as const) {
    if (onPath(name).length === 0) continue;
    const version = spawnSync(name, ['--version'], { encoding: 'utf8' }).stdout?.trim();
    if (version) return { name, version };
  }
  return undefined;
}

/** Builds `tag` from the Containerfile the offline way, on a base image named after it; logs each step in a line. */
export async function buildImage(engine: Engine, tag: string, log: (line: string) => void = () => undefined): Promise<void> {
  const { base, nodeVersion } = baseImage(tag);
  const work = mkdtempSync(join(tmpdir(), 'plant-store-image-'));
  let since = performance.now();
  const seconds = () => `${((performance.now() - since) / 1000).toFixed(1)} s`;
  const step = (line: string) => {
    since = performance.now();
    log(line);
  };
  try {
    const libraries = writeBaseContext(join(work, 'base'));
    await build(engine, ['-t', base, join(work, 'base')]);
    step(`built ${base} (${seconds()}): from scratch, Node ${nodeVersion} (${NODE_24}), ${libraries.length} libraries from ldd (${libraries.join(', ')}), /etc/passwd with node:${IMAGE_USER}, /tmp`);
    const packages = await writeDepsContext(join(work, 'deps'));
    step(`app/node_modules (${seconds()}): npm ci --omit=dev, from npm's cache where it can (${packages})`);
    const args = ['-f', join(REPO_ROOT, 'Containerfile'), '--build-arg', `BASE=${base}`, '--build-context', `deps=${join(work, 'deps')}`, '-t', tag, REPO_ROOT];
    await build(engine, args);
    step(`built ${tag} (${seconds()}): the Containerfile with BASE=${base}, its deps stage replaced by those node_modules`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The base image a build of `tag` makes on the way, named after its last path component. */
export function baseImage(tag: string): { base: string; nodeVersion: string } {
  const name = tag.replace(/:[^/:]*$/, '').split('/').at(-1)!;
  const nodeVersion = spawnSync(NODE_24, ['--version'], { encoding: 'utf8' }).stdout?.trim();
  if (!nodeVersion) throw new Error(`${NODE_24} does not run: run npm ci first`);
  return { base: `localhost/${name}-base:node-${nodeVersion}`, nodeVersion };
}

async function build(engine: Engine, args: readonly string[]): Promise<void> {
  // chroot isolation: RUN steps need no OCI runtime, cgroups or network namespace.
  const result = await run(engine.name, ['build', '--isolation', 'chroot', '--layers=false', ...args]);
  if (result.code !== 0) throw new Error(`${engine.name} build ${args.join(' ')} failed: ${lastLine(result)}`);
}

/** The base's build context: Node 24, its libraries, the user, /tmp. Answers the libraries' names. */
function writeBaseContext(dir: string): string[] {
  const root = join(dir, 'rootfs');
  const place = (path: string, from: string) => {
    mkdirSync(join(root, dirname(path)), { recursive: true });
    copyFileSync(realpathSync(from), join(root, path), constants.COPYFILE_FICLONE);
  };
  place('/usr/local/bin/node', NODE_24);
  const libraries = sharedLibraries(NODE_24);
  for (const library of libraries) place(library, library);
  mkdirSync(join(root, 'etc'), { recursive: true });
  writeFileSync(join(root, 'etc', 'passwd'), `root:x:0:0:root:/root:/usr/sbin/nologin\nnode:x:${IMAGE_USER}:${IMAGE_USER}:node:/nonexistent:/usr/sbin/nologin\n`);
  writeFileSync(join(root, 'etc', 'group'), `root:x:0:\nnode:x:${IMAGE_USER}:\n`);
  writeFileSync(join(root, 'etc', 'nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files dns\n');
  mkdirSync(join(root, 'tmp'));
  chmodSync(join(root, 'tmp'), 0o1777); // Node's compile cache and os.tmpdir()
  writeFileSync(join(dir, 'Containerfile'), 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin\n');
  return libraries.map((library) => library.split('/').at(-1)!);
}

/** The absolute paths ldd lists for a binary (the loader included, the vDSO left out). */
export function sharedLibraries(binary: string): string[] {
  const result = spawnSync('ldd', [binary], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`ldd ${binary} failed: ${(result.stderr || result.error?.message || '').trim()}`);
  return [...result.stdout.matchAll(/(\/\S+) \(0x[0-9a-f]+\)/g)].map((match) => match[1]!);
}

/** What the Containerfile's deps stage holds, app/node_modules, installed here from the lockfile as that stage does. */
async function writeDepsContext(dir: string): Promise<string> {
  const app = join(dir, 'app');
  mkdirSync(app, { recursive: true });
  for (const file of ['package.json', 'package-lock.json']) copyFileSync(join(REPO_ROOT, file), join(app, file));
  const [command, ...args] = process.env.npm_execpath ? [process.execPath, process.env.npm_execpath] : ['npm'];
  const result = await run(command!, [...args, 'ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app });
  if (result.code !== 0) throw new Error(`npm ci --omit=dev failed: ${lastLine(result)}`);
  const lock = JSON.parse(readFileSync(join(app, 'node_modules', '.package-lock.json'), 'utf8')) as { packages: object };
  return `${Object.keys(lock.packages).length} packages`;
}

/** Hard limits this process may hand on: a runtime without CAP_SYS_RESOURCE cannot raise them. */
function limitFlags(): string[] {
  const lines = readFileSync('/proc/self/limits', 'utf8').split('\n');
  // "Max open files            20000                20000                files": name, soft, hard, unit.
  const hard = (name: string) => Number(lines.find((line) => line.startsWith(name))?.split(/\s{2,}/)[2]);
  const files = hard('Max open files');
  // Here nproc above the kernel's pid_max was refused too, though below the hard limit.
  const processes = Math.min(hard('Max processes'), Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8')));
  return [
    ...(Number.isFinite(files) ? ['--ulimit', `nofile=${files}:${files}`] : []),
    ...(Number.isFinite(processes) ? ['--ulimit', `nproc=${processes}:${processes}`] : []),
  ];
}

export type Probe = { flags: string[]; tried: string[] } | { flags: undefined; tried: string[] };

/**
 * The `podman run` flags that let a trivial container from scratch (a static binary) run here:
 * the defaults first, then explicit limits, then runc (crun 1.8 refuses hybrid cgroup v1/v2 hosts).
 */
export async function probeRunFlags(tag: string): Promise<Probe> {
  const tried: string[] = [];
  const binary = ['/usr/sbin/ldconfig', '/sbin/ldconfig'].find((path) => /statically linked/.test(spawnSync('ldd', [path], { encoding: 'utf8' }).stdout ?? ''));
  if (!binary) return { flags: undefined, tried: ['no static ldconfig to build a trivial image from'] };
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-probe-'));
  try {
    copyFileSync(binary, join(dir, 'probe'));
    writeFileSync(join(dir, 'Containerfile'), 'FROM scratch\nCOPY probe /probe\n');
    const built = await run('podman', ['build', '--isolation', 'chroot', '--layers=false', '-t', tag, dir]);
    if (built.code !== 0) return { flags: undefined, tried: [`podman build from scratch: ${lastLine(built)}`] };
    const runtimes = [[], ...(onPath('runc').length > 0 ? [['--runtime', 'runc']] : [])];
    for (const runtime of runtimes) {
      for (const limits of [[], limitFlags()]) {
        const flags = [...runtime, ...limits];
        const result = await run('podman', ['run', '--rm', ...flags, tag, '/probe', '--version']);
        if (result.code === 0) return { flags, tried };
        tried.push(`podman run ${flags.join(' ') || '(defaults)'}: ${lastLine(result)}`);
      }
    }
    return { flags: undefined, tried };
  } finally {
    await run('podman', ['rmi', '-f', tag]);
    rmSync(dir, { recursive: true, force: true });
  }
}
