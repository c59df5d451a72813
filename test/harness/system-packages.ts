// System programs some tests need (podman, an older Node...): found on the machine, or installed from
// Debian with apt-get when missing. Without them a test skips visibly, or fails when CI=true.
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/** Every executable called `name` on PATH, in PATH order. */
export function onPath(name: string): string[] {
  return (process.env.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, name)).filter(isExecutable);
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Installs Debian packages (apt-get update first when the index lacks them); undefined once installed, else why not in one line. */
export function aptInstall(packages: readonly string[]): string | undefined {
  const sudo = process.getuid?.() === 0 ? [] : ['sudo', '-n'];
  const run = (args: string[]) => {
    const [command, ...rest] = [...sudo, 'apt-get', ...args];
    return spawnSync(command!, rest, { encoding: 'utf8', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  };
  const install = ['install', '-y', '-qq', '--no-install-recommends', ...packages];
  let result = run(install);
  if (result.status !== 0 && !result.error) {
    run(['update', '-qq']);
    result = run(install);
  }
  if (result.status === 0) return undefined;
  const why = result.error?.message ?? result.stderr.trim().split('\n').at(-1) ?? `exit code ${result.status}`;
  return `apt-get install ${packages.join(' ')} failed: ${why}`;
}

/**
 * tap's `skip` for a test whose dependency is missing: the reason, so it skips visibly; or, with
 * CI=true, false, so that the test runs and fails on the missing dependency.
 */
export function skipUnlessCi(reason: string | undefined): string | false {
  return reason === undefined || process.env.CI === 'true' ? false : reason;
}
