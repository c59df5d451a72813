// `npm run dev` as a developer runs it, in a directory of the test's (a scratch copy of the repository):
// in a process group of its own, as a terminal's foreground job, so that Ctrl-C (SIGINT to the group)
// reaches npm, the shell, scripts/dev.ts and the server alike; killed whole when the test ends, or by
// the reaper if the test process ends first.
import { spawn } from 'node:child_process';
import type { Test } from 'tap';
import { reapChild } from './reaper.ts';
import { withoutCoverage } from './scratch.ts';

/** A log line of the server saying it listens: its pid and its URL. */
export const LISTENING = /^\{.*"pid":(\d+).*"msg":"Server listening at (http:\/\/127\.0\.0\.1:\d+)".*\}$/gm;
export const REGENERATED = /^dev: openapi\.yaml changed; regenerated src\/generated\/openapi\.ts, restarting$/gm;
/** The last line of a type check. */
export const TYPECHECKED = /^typecheck: (no errors|\d+ error\(s\); the restart does not wait for them .*)$/gm;

/** The log line of the server of this pid beginning to stop; its first group, the signal it stops on. */
export function stopping(pid: string): RegExp {
  return new RegExp(`^\\{.*"pid":${pid},.*"signal":"(\\w+)".*"msg":"shutting down".*\\}$`, 'm');
}

export interface DevRun {
  /** Everything written on stdout and stderr so far, in order. */
  output: () => string;
  /** The `count`-th match of a global pattern in the output, as soon as it appears; rejects if npm run dev exits first. */
  nth: (pattern: RegExp, count: number) => Promise<RegExpExecArray & { index: number }>;
  /** Ctrl-C: SIGINT to the whole group; resolves with npm's exit code. */
  interrupt: () => Promise<number | null>;
}

export function startDev(t: Test, dir: string, env: Record<string, string>): DevRun {
  const dev = spawn('npm', ['run', '--silent', 'dev'], { cwd: dir, env: { ...withoutCoverage(), ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const forget = reapChild(dev, { group: true });
  let output = '';
  let exited = false;
  const waiters = new Set<() => void>();
  const notify = () => [...waiters].forEach((waiter) => waiter());
  const collect = (chunk: string) => {
    output += chunk;
    notify();
  };
  dev.stdout.setEncoding('utf8').on('data', collect);
  dev.stderr.setEncoding('utf8').on('data', collect);
  const exit = new Promise<number | null>((resolve) =>
    dev.on('close', (code) => {
      exited = true;
      forget();
      notify();
      resolve(code);
    }),
  );
  t.teardown(async () => {
    if (!exited) process.kill(-dev.pid!, 'SIGKILL');
    await exit;
  });

  const nth = (pattern: RegExp, count: number) =>
    new Promise<RegExpExecArray & { index: number }>((resolve, reject) => {
      const check = () => {
        const matches = [...output.matchAll(pattern)];
        if (matches.length >= count) {
          waiters.delete(check);
          resolve(matches[count - 1]! as RegExpExecArray & { index: number });
        } else if (exited) {
          waiters.delete(check);
          reject(new Error(`npm run dev exited before ${pattern} appeared ${count} times:\n${output}`));
        }
      };
      waiters.add(check);
      check();
    });

  return {
    output: () => output,
    nth,
    interrupt: () => {
      process.kill(-dev.pid!, 'SIGINT');
      return exit;
    },
  };
}

/** The environment of a dev run in `dir`: its own SQLite file, a token, and a drain longer than any test, which a restart must not wait out. */
export function devEnv(dir: string): Record<string, string> {
  return { HOST: '127.0.0.1', PORT: '0', DATABASE_URL: `sqlite:${dir}/data/plants.db`, API_TOKENS: 'dev-test-token-0123456789', LOG_LEVEL: 'info', SHUTDOWN_DELAY: '1h' };
}
