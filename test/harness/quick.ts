// The quick tests (npm run test:quick) are the in-process ones: a test file is quick unless it, or a
// module of test/ it imports (directly or through others), imports one of PROCESS_STARTERS, the
// modules that start processes (servers, clusters, scripts) or browsers, or it is one of the few
// in-process files listed in SLOW. A new test file is quick exactly when it starts nothing.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { REPO_ROOT } from './paths.ts';

export const PROCESS_STARTERS = ['node:child_process', 'child_process', 'playwright-core'];

/** In-process, but each takes about as long as all the other quick files together. */
export const SLOW: Record<string, string> = {
  'test/contract/fuzz.test.ts': 'thousands of generated requests',
  'test/http-postgres.test.ts': 'the HTTP suite again, on PostgreSQL',
};

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'";]*?from\s+'([^']+)'|(?:^|\n)\s*import\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/g;

/** The module specifiers a source file imports, as written. */
export function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(IMPORT)].map((match) => (match[1] ?? match[2] ?? match[3])!);
}

/** The process starters `file` reaches through the test/ modules it imports; empty for a quick test. */
export function processStartersReached(file: string, seen = new Set<string>()): string[] {
  if (seen.has(file)) return [];
  seen.add(file);
  const found: string[] = [];
  for (const specifier of importsOf(file)) {
    if (PROCESS_STARTERS.includes(specifier)) found.push(`${relative(REPO_ROOT, file)} imports ${specifier}`);
    else if (specifier.startsWith('.')) {
      const target = resolve(dirname(file), specifier);
      // Only modules of test/ are followed: src/ is what runs in-process, and a specifier in a string may name no file.
      if (relative(join(REPO_ROOT, 'test'), target).startsWith('..') || !existsSync(target)) continue;
      found.push(...processStartersReached(target, seen));
    }
  }
  return found;
}

/** Every test file below test/ (tap's include), relative to the repository. */
export function testFiles(): string[] {
  return readdirSync(join(REPO_ROOT, 'test'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.test.ts'))
    .map((name) => `test/${name}`)
    .sort();
}

/** The test files npm run test:quick runs. */
export function quickTestFiles(): string[] {
  return testFiles().filter((file) => !(file in SLOW) && processStartersReached(join(REPO_ROOT, file)).length === 0);
}
