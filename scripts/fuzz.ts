// npm run fuzz: the hostile-input property of test/harness/fuzz.ts with a far larger budget than the test
// suite gives it, outside tap, on a fresh SQLite store in a temporary directory.
//   FUZZ_RUNS    generated requests (default 20000)
//   FUZZ_SEED    replay a run; random by default, and always printed
//   FUZZ_STRICT  1: fail on the known issues too (each has a todo test in test/contract/hostile-input.test.ts)
// Exits 1 on a counterexample, with fast-check's shrunk request and the seed to replay it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatSummary, runFuzz } from '../test/harness/fuzz.ts';
import { integerSetting } from '../test/harness/settings.ts';

const runs = integerSetting('FUZZ_RUNS', 20_000, 1);
const seed = integerSetting('FUZZ_SEED', Math.floor(Math.random() * 2 ** 31), -(2 ** 31));
const strict = process.env.FUZZ_STRICT === '1';

// build(t) needs only a directory for the store and a place to register its teardown.
const dir = mkdtempSync(join(tmpdir(), 'plants-fuzz-'));
const teardowns: (() => unknown)[] = [];
const harness = {
  testdir: () => dir,
  teardown: (fn: () => unknown) => {
    teardowns.push(fn);
  },
};

process.stderr.write(`fuzz: seed ${seed}, ${runs} runs${strict ? ', strict' : ''} (replay with FUZZ_SEED=${seed} FUZZ_RUNS=${runs})\n`);
let failed = true;
try {
  const summary = await runFuzz(harness as never, {
    seed,
    numRuns: runs,
    strict,
    onProgress: (requests) => process.stderr.write(`  ${requests} requests\n`),
  });
  process.stdout.write(`${formatSummary(summary)}\n`);
  failed = summary.failure !== undefined || summary.finalProblems.length > 0;
  if (failed) process.stdout.write(`\nreplay: FUZZ_SEED=${seed} FUZZ_RUNS=${runs}${strict ? ' FUZZ_STRICT=1' : ''} npm run fuzz\n`);
} catch (error) {
  process.stderr.write(`fuzz: the run itself failed: ${(error as Error)?.stack ?? String(error)}\n`);
} finally {
  for (const teardown of teardowns.reverse()) await teardown();
  rmSync(dir, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
