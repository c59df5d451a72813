// The real server process: `node src/entry.js` (as npm start) on a real socket, with its stdout/stderr captured.
// start() resolves once the JSON log line "Server listening at http://..." says where it listens;
// every process is SIGKILLed at the end of the test that spawned it if it is still running, and by
// the reaper if the test process ends first (a tap timeout).
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import { REPO_ROOT } from './paths.ts';
import { reapChild } from './reaper.ts';
import { copyRepository, NO_COVERAGE } from './scratch.ts';

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServerProcess {
  child: ChildProcess;
  /** Everything written to stdout / stderr so far. */
  stdout: () => string;
  stderr: () => string;
  /** Settles when the process has exited and its output streams have closed. */
  exited: Promise<Exit>;
  /** Resolves with the first match of `pattern` in the output, as soon as it appears; rejects if the process exits first. */
  waitFor: (stream: 'stdout' | 'stderr', pattern: RegExp) => Promise<RegExpExecArray>;
  /** Sends the signal and waits for the exit. */
  stop: (signal?: NodeJS.Signals) => Promise<Exit>;
}

export interface RunningServer extends ServerProcess {
  /** http://127.0.0.1:PORT, the port the server reported in its log. */
  url: string;
}

export type ServerEnv = Record<string, string>;

/** What the helpers need of a tap Test: somewhere to register the kill. Cleanup is one outside tap. */
export type Teardown = Pick<Test, 'teardown'>;

/** Runs what the harness started, in reverse order; a Teardown for startServer outside tap (the chaos and crash runs). */
export class Cleanup implements Teardown {
  readonly #tasks: (() => unknown)[] = [];

  teardown(task: () => unknown): void {
    this.#tasks.push(task);
  }

  /** Runs every task, even after one fails; returns the failures' messages. */
  async run(): Promise<string[]> {
    const failures: string[] = [];
    for (let task = this.#tasks.pop(); task !== undefined; task = this.#tasks.pop()) {
      try {
        await task();
      } catch (error) {
        failures.push((error as Error).message);
      }
    }
    return failures;
  }
}

/**
 * The environment the tests start from: loopback, an ephemeral port, a SQLite file in `dir`; SIGTERM stops at once (no
 * SHUTDOWN_DELAY) unless a test sets one; no event-loop-delay shedding, since on a busy machine a process can go
 * unscheduled for a whole sample whatever the test does (test/system/load-shedding sets it to test it).
 */
export function serverEnv(dir: string, overrides: ServerEnv = {}): ServerEnv {
  return {
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: `sqlite:${dir}/plants.db`,
    LOG_LEVEL: 'info',
    API_TOKENS: '',
    SHUTDOWN_DELAY: '0s',
    MAX_EVENT_LOOP_DELAY: '0s',
    ...overrides,
  };
}

export interface SpawnOptions {
  /** What a person would type: `node src/entry.js` by default, or say `npm start`. */
  command?: readonly string[];
  /** In a process group of its own, as a terminal's foreground job is: `process.kill(-pid)` signals the whole group. */
  detached?: boolean;
  /**
   * Without root's power to ignore file permissions, for a test that needs to be refused what root is
   * allowed. As root the process keeps its user (so it still reads a private checkout) and loses
   * CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH through setpriv; any other user has neither anyway.
   */
  unprivileged?: boolean;
  /** Where it runs: the repository's root unless a test gives a scratch copy (a page's relative paths then stay in it). */
  cwd?: string;
  /** A file its stdout is written to, unread (stdout() stays empty): what the process wrote, not what a reader has read yet. */
  stdoutFile?: string;
}

/** Drops root's permission override from `command` (see SpawnOptions.unprivileged). */
function withoutPermissionOverride(command: readonly string[]): readonly string[] {
  if (process.getuid?.() !== 0) return command;
  return ['setpriv', '--bounding-set=-dac_override,-dac_read_search', '--', ...command];
}

export function spawnServer(
  t: Teardown,
  env: ServerEnv,
  { command = [process.execPath, 'src/entry.js'], detached = false, unprivileged = false, cwd = REPO_ROOT, stdoutFile }: SpawnOptions = {},
): ServerProcess {
  const [file, ...args] = unprivileged ? withoutPermissionOverride(command) : command;
  const stdout = stdoutFile === undefined ? 'pipe' : openSync(stdoutFile, 'a');
  const child = spawn(file!, args, {
    cwd,
    detached,
    env: { ...process.env, ...env },
    stdio: ['ignore', stdout, 'pipe'],
  });
  if (typeof stdout === 'number') closeSync(stdout);
  const forget = reapChild(child, { group: detached });
  const output = { stdout: '', stderr: '' };
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const waiter of [...waiters]) waiter();
  };
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    output.stdout += chunk;
    notify();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    output.stderr += chunk;
    notify();
  });

  let done = false;
  const exited = new Promise<Exit>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      done = true;
      forget();
      notify();
      resolve({ code, signal });
    });
  });

  t.teardown(async () => {
    if (!done) {
      child.kill('SIGKILL');
      await exited.catch(() => undefined);
    }
  });

  const waitFor = (stream: 'stdout' | 'stderr', pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const match = new RegExp(pattern.source, pattern.flags.replace('g', '')).exec(output[stream]);
        if (match) {
          waiters.delete(check);
          resolve(match);
        } else if (done) {
          waiters.delete(check);
          reject(new Error(`server exited before ${stream} matched ${pattern}; stderr:\n${output.stderr}`));
        }
      };
      waiters.add(check);
      check();
    });

  return {
    child,
    stdout: () => output.stdout,
    stderr: () => output.stderr,
    exited,
    waitFor,
    stop: (signal: NodeJS.Signals = 'SIGTERM') => {
      if (!done) child.kill(signal);
      return exited;
    },
  };
}

/** Spawns the server and resolves once it listens; rejects (with its stderr) if it exits instead. */
export async function startServer(t: Teardown, env: ServerEnv, options?: SpawnOptions): Promise<RunningServer> {
  const server = spawnServer(t, env, options);
  const listening = await server.waitFor('stdout', /^\{.*"msg":"Server listening at (http:\/\/127\.0\.0\.1:\d+)".*\}\n/m);
  return { ...server, url: listening[1]! };
}

/** Runs the server until it exits on its own (a boot failure); kills it if the test ends first. */
export async function runToExit(
  t: Test,
  env: ServerEnv,
  options: Pick<SpawnOptions, 'unprivileged' | 'command'> = {},
): Promise<Exit & { stdout: string; stderr: string }> {
  const server = spawnServer(t, env, options);
  // A server that boots when it should not is stopped at once, so the test fails instead of hanging.
  server.waitFor('stdout', /"msg":"Server listening at /).then(() => server.child.kill('SIGKILL'), () => undefined);
  const exit = await server.exited;
  return { ...exit, stdout: server.stdout(), stderr: server.stderr() };
}

/**
 * Starts the server of a copy of the repository (test/harness/scratch.ts) that must refuse to start: it
 * exits 1 without listening, with one line on stderr and no stack trace. Answers that line.
 */
export async function failedStartLine(t: Test, repo: string, env: ServerEnv): Promise<string> {
  const result = await runToExit(t, { ...env, ...NO_COVERAGE }, { command: [process.execPath, join(repo, 'src/entry.js')] });
  const stderr = result.stderr.trimEnd();
  t.equal(result.code, 1, 'exits 1');
  t.notMatch(result.stdout, /Server listening/, 'never listened');
  t.equal(stderr.split('\n').length, 1, `one line:\n${stderr}`);
  t.notMatch(stderr, /^\s+at /m, 'no stack trace');
  return stderr;
}

/** Starts a copy of the repository whose openapi.yaml is `spec`, which must refuse to start: answers failedStartLine's line. */
export async function failedStartOnSpec(t: Test, spec: string): Promise<string> {
  const dir = t.testdir();
  const repo = copyRepository(join(dir, 'repo'), ['openapi.yaml', 'package.json', 'src']);
  writeFileSync(join(repo, 'openapi.yaml'), spec);
  return failedStartLine(t, repo, serverEnv(dir));
}

/** Runs `node <script> ...args` from the repository root until it exits; kills it if the test ends first. */
export async function runScript(
  t: Test,
  script: string,
  args: readonly string[],
  env: ServerEnv,
): Promise<Exit & { stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [script, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const forget = reapChild(child);
  const output = { stdout: '', stderr: '' };
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output.stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output.stderr += chunk));
  let done = false;
  const exited = new Promise<Exit>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      done = true;
      forget();
      resolve({ code, signal });
    });
  });
  t.teardown(async () => {
    if (!done) {
      child.kill('SIGKILL');
      await exited.catch(() => undefined);
    }
  });
  const exit = await exited;
  return { ...exit, ...output };
}

/** Whether a process of this pid is alive: it exists (signal 0 checks without signalling) and is no zombie, dead but not yet reaped. */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // An orphan's zombie stays until PID 1 reaps it, which a container's init may never do.
  if (!existsSync('/proc/self/stat')) return true; // no /proc here: signal 0 has answered
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false; // gone since
  }
}
