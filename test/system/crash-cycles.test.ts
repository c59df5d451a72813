// Repeated crash safety, short: the runner behind `npm run crash` (test/harness/crash.ts) for a few
// SIGKILL cycles with a fixed seed, and a check that the runner does notice a lost acknowledged write.
import t from 'tap';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { runCrashCycles, type CycleFigures } from '../harness/crash.ts';

const SEED = 20_240_601;
// The two runs use their own files and servers: side by side, the file stays well within its time.
t.jobs = 2;

function total(cycles: CycleFigures[], kind: keyof CycleFigures['acknowledged']): number {
  return cycles.reduce((sum, cycle) => sum + cycle.acknowledged[kind], 0);
}

t.test('acknowledged creates, replaces and deletes survive repeated SIGKILLs', async (t) => {
  const dir = t.testdir();
  const result = await runCrashCycles({
    cycles: 3,
    writers: 8,
    seed: SEED,
    databaseUrl: `sqlite:${join(dir, 'plants.db')}`,
    // Late enough that every cycle acknowledges writes, early enough to stay quick.
    minKillDelayMs: 100,
    maxKillDelayMs: 300,
    log: (line) => t.comment(line),
  });
  t.same(result.violations, [], 'no violations');
  t.equal(result.cycles.length, 3, 'three kill-and-restart cycles ran');
  for (const cycle of result.cycles) {
    t.ok(cycle.killDelayMs >= 100 && cycle.killDelayMs < 300, `cycle ${cycle.cycle}: killed after ${cycle.killDelayMs} ms`);
    t.equal(cycle.integrity, 'ok', `cycle ${cycle.cycle}: the file passed PRAGMA integrity_check after the kill`);
    t.equal(cycle.inFlightApplied + cycle.inFlightNotApplied, cycle.inFlightAtKill, `cycle ${cycle.cycle}: every unanswered write was settled`);
  }
  t.ok(result.acknowledged > 0, `${result.acknowledged} writes acknowledged`);
  for (const kind of ['create', 'replace', 'delete'] as const) {
    t.ok(total(result.cycles, kind) > 0, `${total(result.cycles, kind)} ${kind}s acknowledged and checked after the restarts`);
  }
  t.ok(result.cycles.at(-1)!.plantsChecked > 0, `${result.cycles.at(-1)!.plantsChecked} plants compared after the last restart`);
  t.comment(`${result.inFlightAtKill} writes were in flight at the kills`);
});

t.test('the runner reports an acknowledged write that the restart does not show', async (t) => {
  const dir = t.testdir();
  const dbPath = join(dir, 'plants.db');
  let lost: bigint | undefined;
  let changed: bigint | undefined;
  const result = await runCrashCycles({
    cycles: 1,
    writers: 4,
    seed: SEED,
    databaseUrl: `sqlite:${dbPath}`,
    // Long enough for a few acknowledged creates even on a busy machine.
    minKillDelayMs: 250,
    maxKillDelayMs: 300,
    // Between the kill and the restart, lose one acknowledged plant and alter another, as a broken store would.
    afterKill: ({ databasePath, acknowledged }) => {
      const present = [...acknowledged].filter(([, state]) => state !== null).map(([id]) => id);
      [lost, changed] = present;
      const db = new DatabaseSync(databasePath!);
      try {
        db.prepare('DELETE FROM plants WHERE id = ?').run(lost!);
        db.prepare("UPDATE plants SET name = 'not what was acknowledged' WHERE id = ?").run(changed!);
      } finally {
        db.close();
      }
    },
  });
  t.ok(lost !== undefined && changed !== undefined, 'two acknowledged plants were tampered with');
  t.ok(result.violations.some((v) => v.includes(`plant ${lost}:`) && v.includes('shows absent')), `the lost plant ${lost} is reported`);
  t.ok(
    result.violations.some((v) => v.includes(`plant ${changed}:`) && v.includes('not what was acknowledged')),
    `the altered plant ${changed} is reported`,
  );
  t.equal(result.violations.length, 4, 'each through the listing and GET by id, and nothing else');
});
