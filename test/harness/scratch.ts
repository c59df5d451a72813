// A scratch copy of the repository, for tests that edit openapi.yaml or the sources and run the result.
import { cpSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.ts';

/** What a copy needs to generate (the client package's build included), type-check and serve. */
const ENTRIES = ['openapi.yaml', 'package.json', 'tsconfig.json', 'src', 'scripts', 'test', 'contract', 'docs', 'packages/client'];

/** Copies the repository's sources into `dir` (node_modules linked, not copied) and answers `dir`. */
export function copyRepository(dir: string, entries: readonly string[] = ENTRIES): string {
  for (const entry of entries) cpSync(join(REPO_ROOT, entry), join(dir, entry), { recursive: true });
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}
