// A PostgreSQL cluster of our own for fault tests and the chaos script: initdb in a temporary
// directory, the postmaster on a free 127.0.0.1 port, run as the `postgres` OS user when we are root.
// It can be killed (SIGKILL by default), restarted on the same port and data, and destroyed.
// Only processes we started are ever signalled: the postmaster by the PID we spawned, and its
// children found by their working directory, which PostgreSQL sets to our own data directory.
// A watchdog shell, fed by a pipe from this process, kills and removes the cluster when this
// process ends in any way (SIGKILL included), so a crashed test leaves no orphan cluster.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readlinkSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './ports.ts';

export interface PostgresCluster {
  readonly port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres (trust authentication). */
  readonly url: string;
  /** The postmaster's PID while it runs. */
  readonly pid: number | undefined;
  /** Signals the postmaster (default SIGKILL) to end it; resolves once it and every backend it left have exited. For SIGSTOP, use freeze(). */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** (Re)starts on the same port and data directory; resolves when it accepts connections. */
  start(): Promise<void>;
  /** Fast shutdown (SIGINT). */
  stop(): Promise<void>;
  /** SIGSTOPs the postmaster and every backend: connections stay open and nothing answers (a hung server). */
  freeze(): void;
  /** SIGCONTs them all again. */
  thaw(): void;
  /** Stops or kills whatever it started and removes the temporary directory. */
  destroy(): Promise<void>;
}

const READY = /database system is ready to accept connections/;
const PORT_TAKEN = /could not bind .*Address already in use|could not create any TCP\/IP sockets/;
/** Backends notice their postmaster's death on their own; past this, they are killed. */
const CHILDREN_GRACE_MS = 10_000;
const PROC_POLL_MS = 10;

/** The directory holding initdb and postgres: POSTGRES_BIN_DIR, the newest /usr/lib/postgresql/N/bin, or PATH. */
export function postgresBinDir(): string | undefined {
  const candidates: string[] = [];
  if (process.env.POSTGRES_BIN_DIR) candidates.push(process.env.POSTGRES_BIN_DIR);
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root).filter((name) => /^\d+$/.test(name));
    versions.sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((version) => join(root, version, 'bin')));
  }
  candidates.push(...(process.env.PATH ?? '').split(':').filter(Boolean));
  return candidates.find((dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres')));
}

export async function startPostgresCluster(): Promise<PostgresCluster> {
  const bin = postgresBinDir();
  if (bin === undefined) throw new Error('initdb was not found (set POSTGRES_BIN_DIR or install PostgreSQL)');
  const owner = clusterOwner();
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'pg-fault-')));
  const watchdog = startWatchdog(dir);
  try {
    if (owner) chownSync(dir, owner.uid, owner.gid);
    const dataDir = join(dir, 'data');
    await run(join(bin, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'], dir, owner);
    // The port is free when asked for, but another process may take it before the postmaster binds: then try another.
    for (let attempt = 1; ; attempt++) {
      const cluster = new Cluster(bin, dir, dataDir, await freePort(), owner, watchdog);
      try {
        await cluster.start();
        return cluster;
      } catch (error) {
        if (attempt >= 5 || !PORT_TAKEN.test((error as Error).message)) throw error;
      }
    }
  } catch (error) {
    await removeCluster(dir, undefined, watchdog);
    throw error;
  }
}

interface Owner {
  uid: number;
  gid: number;
}

class Cluster implements PostgresCluster {
  readonly port: number;
  readonly url: string;
  #postmaster: ChildProcess | undefined;
  #exited: Promise<void> | undefined;
  #destroyed = false;
  readonly #bin: string;
  readonly #dir: string;
  readonly #dataDir: string;
  readonly #owner: Owner | undefined;
  readonly #watchdog: ChildProcess;
  readonly #killOnExit = () => {
    if (this.#postmaster?.exitCode === null && this.#postmaster.signalCode === null) this.#postmaster.kill('SIGKILL');
  };

  constructor(bin: string, dir: string, dataDir: string, port: number, owner: Owner | undefined, watchdog: ChildProcess) {
    this.#bin = bin;
    this.#dir = dir;
    this.#dataDir = dataDir;
    this.port = port;
    this.url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    this.#owner = owner;
    this.#watchdog = watchdog;
  }

  get pid(): number | undefined {
    return this.#exited === undefined ? undefined : this.#postmaster?.pid;
  }

  async start(): Promise<void> {
    if (this.#destroyed) throw new Error('the cluster was destroyed');
    if (this.#exited !== undefined) return;
    // A killed postmaster's backends hold its shared memory until they exit; postgres refuses to start before.
    await waitForNoProcesses(this.#dataDir);
    const args = [
      '-D', this.#dataDir,
      '-p', String(this.port),
      '-c', 'listen_addresses=127.0.0.1',
      '-c', `unix_socket_directories=${this.#dir}`,
      '-c', 'fsync=off',
      '-c', 'full_page_writes=off',
      '-c', 'shared_buffers=16MB',
      '-c', 'logging_collector=off',
    ];
    const child = spawn(join(this.#bin, 'postgres'), args, {
      cwd: this.#dir,
      env: { ...process.env, LC_ALL: 'C', LANG: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      ...this.#owner,
    });
    let log = '';
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    const ready = new Promise<void>((resolve, reject) => {
      const onData = (chunk: string) => {
        log = (log + chunk).slice(-16_384); // enough to explain a failed start
        if (READY.test(log)) resolve();
      };
      child.stdout!.setEncoding('utf8').on('data', onData);
      child.stderr!.setEncoding('utf8').on('data', onData);
      child.once('error', reject);
      exited.then(() => reject(new Error(`postgres exited before accepting connections:\n${log}`)));
    });
    this.#postmaster = child;
    this.#exited = exited.then(() => {
      this.#exited = undefined;
      process.off('exit', this.#killOnExit);
    });
    process.on('exit', this.#killOnExit);
    try {
      await ready;
    } catch (error) {
      await this.kill('SIGKILL');
      throw error;
    }
    // Once running, a forgotten cluster must not keep the test process alive: the exit hook and the watchdog clean up.
    setReferenced(child, false);
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const exited = this.#exited;
    if (exited !== undefined) {
      setReferenced(this.#postmaster!, true);
      this.#postmaster!.kill(signal);
      this.thaw(); // a frozen postmaster acts on the signal, and frozen backends notice its death, only once continued
      await exited;
    }
    await waitForNoProcesses(this.#dataDir);
  }

  stop(): Promise<void> {
    return this.kill('SIGINT');
  }

  freeze(): void {
    // The postmaster first, so that it forks no backend that would escape.
    if (this.pid !== undefined) signal(this.pid, 'SIGSTOP');
    for (const pid of processesIn(this.#dataDir)) signal(pid, 'SIGSTOP');
  }

  thaw(): void {
    for (const pid of processesIn(this.#dataDir)) signal(pid, 'SIGCONT');
  }

  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    await removeCluster(this.#dir, this, this.#watchdog);
  }
}

async function removeCluster(dir: string, cluster: Cluster | undefined, watchdog: ChildProcess): Promise<void> {
  if (cluster) await cluster.kill('SIGKILL');
  await waitForNoProcesses(join(dir, 'data'));
  rmSync(dir, { recursive: true, force: true });
  watchdog.stdin?.end();
}

/** PIDs of the processes working in `dataDir`: the postmaster and every backend it forked. */
function processesIn(dataDir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/cwd`) === dataDir) pids.push(Number(entry));
    } catch {
      // Gone already, or a zombie: neither holds the shared memory.
    }
  }
  return pids;
}

/** Waits until no process works in `dataDir`; backends still there after a grace period are killed. */
async function waitForNoProcesses(dataDir: string): Promise<void> {
  // /proc offers no event for the exit of a process that is not our child, so this one wait polls.
  const deadline = Date.now() + CHILDREN_GRACE_MS;
  for (let pids = processesIn(dataDir); pids.length > 0; pids = processesIn(dataDir)) {
    if (Date.now() > deadline) for (const pid of pids) signal(pid, 'SIGKILL');
    await sleep(PROC_POLL_MS);
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Exited meanwhile.
  }
}

/** The `postgres` OS user when we are root (postgres refuses to run as root); undefined otherwise. */
function clusterOwner(): Owner | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) throw new Error('running as root, but there is no `postgres` OS user to run the cluster as');
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** A shell that, once our end of its stdin closes (whenever this process ends), kills what works in the data dir and removes `dir`. */
function startWatchdog(dir: string): ChildProcess {
  const script = [
    'cat >/dev/null',
    'for p in /proc/[0-9]*; do [ "$(readlink "$p/cwd" 2>/dev/null)" = "$1/data" ] && kill -9 "$(basename "$p")" 2>/dev/null; done',
    'rm -rf "$1"',
  ].join('\n');
  const watchdog = spawn('sh', ['-c', script, 'pg-fault-watchdog', dir], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  watchdog.unref();
  (watchdog.stdin as unknown as { unref(): void }).unref();
  return watchdog;
}

/** Whether the child and its output pipes keep this process's event loop alive. */
function setReferenced(child: ChildProcess, referenced: boolean): void {
  for (const handle of [child, child.stdout, child.stderr] as unknown as { ref(): void; unref(): void }[]) {
    if (referenced) handle.ref();
    else handle.unref();
  }
}

function run(command: string, args: string[], cwd: string, owner: Owner | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: { ...process.env, LC_ALL: 'C', LANG: 'C' }, stdio: ['ignore', 'pipe', 'pipe'], ...owner });
    let output = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited with ${code}:\n${output}`))));
  });
}

