// PgBouncer from Debian for pooler tests: our own process on a free 127.0.0.1 port, in front of the
// shared PostgreSQL (trust authentication), in the pool mode asked for, with a small server pool so
// that server connections really are shared between clients. Only the PID we spawned is signalled,
// by the teardown, or by the reaper when this process ends without one (a test timed out, SIGKILL).
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Teardown } from './process.ts';
import { freePort } from './ports.ts';
import { reapChild, reapWithThisProcess } from './reaper.ts';
import { aptInstall, onPath } from './system-packages.ts';

export type PoolMode = 'transaction' | 'session';

export interface PgBouncer {
  readonly port: number;
  readonly pid: number;
  /** Where `database` on the upstream server is reached through this pooler (role `root`). */
  url(database: string): string;
  /** Everything PgBouncer logged so far. */
  log(): string;
}

export interface PgBouncerOptions {
  poolMode: PoolMode;
  /** Server connections per database and user. */
  poolSize: number;
  /** The PostgreSQL it pools: host and port (trust authentication for `root`). */
  upstream: { host: string; port: number };
}

// Debian installs it in /usr/sbin, which a non-root PATH often lacks.
const SBIN = '/usr/sbin/pgbouncer';
const LISTENING = /LOG listening on 127\.0\.0\.1:(\d+)/;
const PORT_TAKEN = /Address already in use/;

/** The pgbouncer executable, installed from Debian when missing; or why there is none, in one line. */
export function pgbouncerBinary(): { path: string } | { problem: string } {
  const found = () => onPath('pgbouncer')[0] ?? (existsSync(SBIN) ? SBIN : undefined);
  const path = found() ?? (aptInstall(['pgbouncer']) === undefined ? found() : undefined);
  return path === undefined ? { problem: 'pgbouncer is not installed and apt-get could not install it' } : { path };
}

/** Starts PgBouncer; it is killed (by its PID) and its directory removed when `t` tears down. */
export async function startPgBouncer(t: Teardown, binary: string, options: PgBouncerOptions): Promise<PgBouncer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(t, binary, options, await freePort());
    } catch (error) {
      // The port was free when asked for, but another process may take it first: then try another.
      if (attempt >= 5 || !PORT_TAKEN.test((error as Error).message)) throw error;
    }
  }
}

async function startOnce(t: Teardown, binary: string, { poolMode, poolSize, upstream }: PgBouncerOptions, port: number): Promise<PgBouncer> {
  const dir = mkdtempSync(join(tmpdir(), 'pgbouncer-'));
  const forgetDir = reapWithThisProcess({ dir });
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
    forgetDir();
  });
  // With auth_type=trust, a user must still be listed in auth_file.
  writeFileSync(join(dir, 'userlist.txt'), '"root" ""\n');
  const config = join(dir, 'pgbouncer.ini');
  writeFileSync(config, [
    '[databases]',
    `* = host=${upstream.host} port=${upstream.port}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(dir, 'userlist.txt')}`,
    `pool_mode = ${poolMode}`,
    `default_pool_size = ${poolSize}`,
    'max_client_conn = 1000',
    'log_connections = 0',
    'log_disconnections = 0',
    '',
  ].join('\n'));
  // PgBouncer refuses to run as root: then it runs as the `postgres` OS user.
  const owner = process.getuid?.() === 0 ? postgresUser() : undefined;
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const child = spawn(binary, [config], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], ...owner });
  const forget = reapChild(child);
  let log = '';
  let done = false;
  const exited = new Promise<void>((resolve) => {
    child.once('close', () => {
      done = true;
      forget(); // the reaper must not signal a PID that may be reused
      resolve();
    });
  });
  t.teardown(async () => {
    if (!done) child.kill('SIGKILL');
    await exited;
  });
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: string) => {
      log += chunk;
      if (LISTENING.test(log)) resolve();
    };
    child.stdout!.setEncoding('utf8').on('data', onData);
    child.stderr!.setEncoding('utf8').on('data', onData);
    child.once('error', reject);
    exited.then(() => reject(new Error(`pgbouncer exited before listening:\n${log}`)));
  });
  return {
    port,
    pid: child.pid!,
    url: (database) => `postgres://root@127.0.0.1:${port}/${database}`,
    log: () => log,
  };
}

function postgresUser(): { uid: number; gid: number } {
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) throw new Error('running as root, but there is no `postgres` OS user to run pgbouncer as');
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}
