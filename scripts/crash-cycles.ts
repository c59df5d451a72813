// npm run crash: repeated crash safety of the real server (the runner is test/harness/crash.ts).
// Starts node src/entry.js on one database again and again, SIGKILLs it at a random moment under
// concurrent creates, replaces and deletes, and checks after every restart that each acknowledged
// write is there (and, on SQLite, that the file passes PRAGMA integrity_check). Exits 1 on any violation.
// Settings: CRASH_CYCLES (50), CRASH_WRITERS (8), CRASH_DATABASE_URL (default a fresh SQLite file in a
// temporary directory), CRASH_SEED (default random; printed, to replay a run), CRASH_MIN_DELAY_MS (0)
// and CRASH_MAX_DELAY_MS (500): the kill comes that long after the writers start.
import { randomInt } from 'node:crypto';
import { runCrashCycles } from '../test/harness/crash.ts';
import { integerSetting } from '../test/harness/settings.ts';

const cycles = integerSetting('CRASH_CYCLES', 50, 1);
const writers = integerSetting('CRASH_WRITERS', 8, 1);
const seed = integerSetting('CRASH_SEED', randomInt(2 ** 31), 0);
const minKillDelayMs = integerSetting('CRASH_MIN_DELAY_MS', 0, 0);
const maxKillDelayMs = integerSetting('CRASH_MAX_DELAY_MS', 500, 1);
const databaseUrl = process.env.CRASH_DATABASE_URL || undefined;

console.log(
  `crash cycles: ${cycles} cycles, ${writers} writers, kill ${minKillDelayMs}-${maxKillDelayMs} ms after the writers start, ` +
    `database ${databaseUrl === undefined ? 'a fresh SQLite file' : databaseUrl.replace(/\/\/[^@/]*@/, '//***@')}`,
);
console.log(`seed ${seed} (replay with CRASH_SEED=${seed}; the interleaving of requests with the kill still varies)`);
const started = performance.now();
const result = await runCrashCycles({
  cycles,
  writers,
  seed,
  minKillDelayMs,
  maxKillDelayMs,
  ...(databaseUrl !== undefined && { databaseUrl }),
  log: (line) => console.log(line),
});

const totals = { create: 0, replace: 0, delete: 0, applied: 0, notApplied: 0 };
for (const f of result.cycles) {
  totals.create += f.acknowledged.create;
  totals.replace += f.acknowledged.replace;
  totals.delete += f.acknowledged.delete;
  totals.applied += f.inFlightApplied;
  totals.notApplied += f.inFlightNotApplied;
}
const restarts = result.cycles.map((f) => f.restartMs).sort((a, b) => a - b);
console.log('');
console.log(`summary (seed ${seed}, ${((performance.now() - started) / 1000).toFixed(1)} s)`);
console.log(`  cycles                     ${result.cycles.length}`);
console.log(`  acknowledged writes        ${result.acknowledged} (create ${totals.create}, replace ${totals.replace}, delete ${totals.delete})`);
console.log(`  in flight at kill          ${result.inFlightAtKill} (found applied ${totals.applied}, not applied ${totals.notApplied})`);
console.log(`  restart to listening       median ${restarts[Math.floor(restarts.length / 2)] ?? '-'} ms, max ${restarts.at(-1) ?? '-'} ms`);
const checked = result.cycles.filter((f) => f.integrity !== 'n/a').length;
const intact = result.cycles.filter((f) => f.integrity === 'ok').length;
console.log(`  integrity checks           ${checked === 0 ? 'n/a (not SQLite)' : `${intact} ok of ${checked}`}`);
console.log(`  violations                 ${result.violations.length}`);
if (result.keptDirectory !== undefined) console.log(`  the database was kept for inspection in ${result.keptDirectory}`);
process.exitCode = result.violations.length === 0 ? 0 : 1;
