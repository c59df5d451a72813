// A scratch copy of the repository, for tests that edit openapi.yaml or the sources and run the result.
import { execFile } from 'node:child_process';
import { cpSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from './paths.ts';

const run = promisify(execFile);

/** What a copy needs to generate (the client package's build included), type-check and serve. */
const ENTRIES = ['openapi.yaml', 'package.json', 'tsconfig.json', 'src', 'scripts', 'test', 'contract', 'docs', 'packages/client'];

/** The Node every npm script runs (the `node` devDependency), whatever runs the test. */
export const PINNED_NODE = join(REPO_ROOT, 'node_modules', 'node', 'bin', 'node');

/** Copies the repository's sources into `dir` (node_modules linked, not copied) and answers `dir`. */
export function copyRepository(dir: string, entries: readonly string[] = ENTRIES): string {
  for (const entry of entries) cpSync(join(REPO_ROOT, entry), join(dir, entry), { recursive: true });
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

/** `npm run generate` in the copy: its types, from its openapi.yaml. */
export async function generateTypes(dir: string): Promise<void> {
  await run(PINNED_NODE, ['scripts/generate.ts'], { cwd: dir, env: withoutCoverage() });
}

/** `tsc --noEmit` in the copy: its diagnostics, empty when it type-checks. Incremental: a second check of the copy takes a fraction of the first. */
export async function typeCheck(dir: string): Promise<string> {
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const args = [tsc, '--noEmit', '--pretty', 'false', '--incremental', '--tsBuildInfoFile', join(dir, '.tsbuildinfo')];
  return run(PINNED_NODE, args, { cwd: dir, env: withoutCoverage(), maxBuffer: 16 << 20 }).then(
    () => '',
    (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ''}${error.stderr ?? ''}` || String(error),
  );
}

/** What withoutCoverage adds, for a child whose environment is given as overrides of process.env (a server of a copy). */
export const NO_COVERAGE = { _TAPJS_PROCESSINFO_COVERAGE_: '0' } as const;

/**
 * The environment without the coverage tap's processinfo starts in every child process (it re-adds its
 * loader to any environment): what runs in a copy is no part of the coverage report, and precise coverage
 * of the compiler doubled its time.
 */
export function withoutCoverage(): NodeJS.ProcessEnv {
  return { ...process.env, ...NO_COVERAGE };
}
