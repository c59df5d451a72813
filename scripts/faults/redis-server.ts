// A redis-server of our own for fault tests and `npm run chaos`: on a free loopback port, nothing
// persisted (--save "" --appendonly no, working directory in a temporary folder), frozen with SIGSTOP
// and thawed with SIGCONT. It never touches the shared Redis on 6379: it only signals the PID it
// spawned. Every server still running when the process exits or is killed by SIGINT/SIGTERM/SIGHUP
// is killed too, so a failed test or an interrupted script leaves no redis-server behind.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisServer {
  readonly port: number;
  /** redis://127.0.0.1:PORT */
  readonly url: string;
  readonly pid: number;
  /** SIGSTOP: the socket stays open and accepts connections, but nothing is ever answered. */
  freeze(): void;
  /** SIGCONT: answers again, including what was sent while frozen. */
  thaw(): void;
  /** Kills the server (SIGCONT first if frozen, then SIGTERM) and resolves once it has exited. */
  stop(): Promise<void>;
}

/** Whether a redis-server binary is on PATH. */
export function redisServerAvailable(): boolean {
  const probe = spawnSync('redis-server', ['--version'], { stdio: 'ignore' });
  return probe.error === undefined && probe.status === 0;
}

const running = new Set<ChildProcess>();
let cleanupRegistered = false;
/** A port taken between our probe and redis-server's bind: try another one this many times. */
const PORT_ATTEMPTS = 5;

/** Starts a redis-server on a free port; resolves once it answers PING. */
export async function startRedisServer(): Promise<RedisServer> {
  registerCleanup();
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const port = await freePort();
    try {
      return await startOn(port);
    } catch (error) {
      lastError = error as Error;
      if (!/address already in use/i.test(lastError.message)) throw lastError;
    }
  }
  throw lastError!;
}

async function startOn(port: number): Promise<RedisServer> {
  const directory = mkdtempSync(join(tmpdir(), 'plants-redis-'));
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', directory, '--daemonize', 'no', '--logfile', ''],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  running.add(child);
  let output = '';
  let frozen = false;
  const exited = new Promise<void>((resolve) => {
    child.once('close', () => {
      running.delete(child);
      rmSync(directory, { recursive: true, force: true });
      resolve();
    });
  });

  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: string) => {
      output += chunk;
      if (output.includes('Ready to accept connections')) done(resolve);
    };
    const onError = (error: Error) => done(() => reject(new Error(`redis-server could not be started: ${error.message}`)));
    const onExit = () => done(() => reject(new Error(`redis-server on port ${port} exited at start:\n${output}`)));
    const done = (settle: () => void) => {
      child.stdout!.off('data', onData);
      child.stderr!.off('data', onData);
      child.off('error', onError);
      child.off('exit', onExit);
      settle();
    };
    child.stdout!.setEncoding('utf8').on('data', onData);
    child.stderr!.setEncoding('utf8').on('data', onData);
    child.once('error', onError);
    child.once('exit', onExit);
  });
  // Keep draining its output so a chatty server never blocks on a full pipe.
  child.stdout!.resume();
  child.stderr!.resume();
  await ping(port);

  const signal = (name: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(name);
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    pid: child.pid!,
    freeze: () => {
      signal('SIGSTOP');
      frozen = true;
    },
    thaw: () => {
      signal('SIGCONT');
      frozen = false;
    },
    stop: async () => {
      if (frozen) signal('SIGCONT');
      signal('SIGTERM');
      await exited;
    },
  };
}

/** A port the kernel just handed out on 127.0.0.1 (free now; redis-server binds it right after). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Sends PING in the Redis protocol and resolves on +PONG. */
function ping(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let reply = '';
    socket.setEncoding('utf8');
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk: string) => {
      reply += chunk;
      if (!reply.includes('\r\n')) return;
      socket.destroy();
      if (reply.startsWith('+PONG')) resolve();
      else reject(new Error(`redis-server on port ${port} answered PING with ${JSON.stringify(reply)}`));
    });
    socket.once('error', reject);
  });
}

function killAll(): void {
  for (const child of running) {
    // SIGKILL needs no SIGCONT, and works on a frozen process.
    child.kill('SIGKILL');
  }
}

function registerCleanup(): void {
  if (cleanupRegistered) return;
  cleanupRegistered = true;
  process.once('exit', killAll);
  for (const name of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      killAll();
      // Only our listener: the default action (ending the process) is what everyone expects.
      if (process.listenerCount(name) === 0) process.kill(process.pid, name);
    };
    process.once(name, onSignal);
  }
}
