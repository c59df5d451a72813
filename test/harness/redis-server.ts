// A redis-server of our own for fault tests and `npm run chaos`: on a free loopback port, nothing
// persisted (--save "" --appendonly no, working directory in a temporary folder), frozen with SIGSTOP
// and thawed with SIGCONT. It never touches the shared Redis on 6379: it only signals the PID it
// spawned. redis-server runs under a small node watchdog whose stdin is a pipe from this process:
// however this process ends (a tap timeout ends a test with SIGALRM, then SIGKILL), the pipe closes
// and the watchdog sends the server SIGCONT and SIGTERM, so a failed test leaves no redis-server.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.ts';

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

/** A port taken between our probe and redis-server's bind: try another one this many times. */
const PORT_ATTEMPTS = 5;

// Runs redis-server with the given arguments, prints its PID first, ends it (SIGCONT, SIGTERM) when
// stdin closes, and exits when it exits. CommonJS, as `node -e` reads it.
const WATCHDOG = `
const { spawn } = require('node:child_process');
const server = spawn('redis-server', process.argv.slice(1), { stdio: ['ignore', 'inherit', 'inherit'] });
server.once('spawn', () => process.stdout.write('watchdog: redis-server pid ' + server.pid + '\\n'));
server.once('error', (error) => { process.stderr.write('watchdog: ' + error.message + '\\n'); process.exit(127); });
server.once('exit', (code) => process.exit(code ?? 1));
process.stdin.once('end', () => { server.kill('SIGCONT'); server.kill('SIGTERM'); }).resume();
`;

export interface RedisServerOptions {
  /** A given port, e.g. to start Redis again where a stopped one listened; default: a free one. */
  port?: number;
}

/** Starts a redis-server on a free port (or the given one); resolves once it answers PING. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  if (options.port !== undefined) return startOn(options.port);
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
  throw lastError ?? new Error('no port to try');
}

async function startOn(port: number): Promise<RedisServer> {
  const directory = mkdtempSync(join(tmpdir(), 'plants-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', directory, '--daemonize', 'no', '--logfile', ''];
  // Without the test runner's loaders and coverage: the watchdog is no part of what is tested.
  const { NODE_OPTIONS: _options, NODE_V8_COVERAGE: _coverage, ...env } = process.env;
  const watchdog = spawn(process.execPath, ['-e', WATCHDOG, '--', ...args], { stdio: ['pipe', 'pipe', 'pipe'], env });
  let output = '';
  let exited = false;
  let frozen = false;
  const closed = new Promise<void>((resolve) => {
    watchdog.once('close', () => {
      exited = true;
      rmSync(directory, { recursive: true, force: true });
      resolve();
    });
  });

  const pid = await new Promise<number>((resolve, reject) => {
    let serverPid: number | undefined;
    const onData = (chunk: string) => {
      output += chunk;
      serverPid ??= Number(/^watchdog: redis-server pid (\d+)$/m.exec(output)?.[1]) || undefined;
      if (serverPid !== undefined && output.includes('Ready to accept connections')) done(() => resolve(serverPid!));
    };
    const onError = (error: Error) => done(() => reject(new Error(`redis-server could not be started: ${error.message}`)));
    const onExit = () => done(() => reject(new Error(`redis-server on port ${port} exited at start:\n${output}`)));
    const done = (settle: () => void) => {
      watchdog.stdout!.off('data', onData);
      watchdog.stderr!.off('data', onData);
      watchdog.off('error', onError);
      watchdog.off('exit', onExit);
      settle();
    };
    watchdog.stdout!.setEncoding('utf8').on('data', onData);
    watchdog.stderr!.setEncoding('utf8').on('data', onData);
    watchdog.once('error', onError);
    watchdog.once('exit', onExit);
  });
  // Keep draining its output so a chatty server never blocks on a full pipe.
  watchdog.stdout!.resume();
  watchdog.stderr!.resume();
  await ping(port);

  // Only while the watchdog runs: until then the PID is the server's (running, or a zombie not yet reaped).
  const signal = (name: NodeJS.Signals) => {
    if (!exited) process.kill(pid, name);
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    pid,
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
      watchdog.stdin!.end();
      await closed;
    },
  };
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
