// npm run chaos: the bad day in production, on real processes (the runner is test/harness/chaos.ts).
// Runs each fault against the real server under concurrent keep-alive writers (and a GET /healthz probe)
// and prints a table: requests sent, writes acknowledged, acknowledged writes lost, answers outside openapi.yaml,
// unanswered requests (resets, timeouts), other errors (neither 2xx nor the documented 503),
// process exits and the time from the fault's end to the first successful write. Exits 1 when any
// of lost, outside contract, unanswered, other errors or process exits is not zero, or a fault never recovered.
// Settings: CHAOS_FAULT_MS (6000), CHAOS_TIMEOUT_MS (10000: the client-side bound on every request),
// CHAOS_RECOVER_MS (30000), CHAOS_CLIENTS (16), CHAOS_SETTLE_WRITES (200), CHAOS_MAX_REQUESTS (200000),
// CHAOS_FAULTS (comma-separated name fragments, e.g. "postgres,deploy"; default all).
import { emptyFigures, everything, FAULTS, formatTable, runFault, type ChaosOptions, type FaultFigures } from '../test/harness/chaos.ts';
import { integerSetting } from '../test/harness/settings.ts';

const options: ChaosOptions = {
  faultMs: integerSetting('CHAOS_FAULT_MS', 6_000, 1),
  requestTimeoutMs: integerSetting('CHAOS_TIMEOUT_MS', 10_000, 1),
  recoverDeadlineMs: integerSetting('CHAOS_RECOVER_MS', 30_000, 1),
  clients: integerSetting('CHAOS_CLIENTS', 16, 1),
  settleWrites: integerSetting('CHAOS_SETTLE_WRITES', 200, 1),
  maxRequests: integerSetting('CHAOS_MAX_REQUESTS', 200_000, 1),
  log: (line) => console.log(line),
};
const wanted = (process.env.CHAOS_FAULTS ?? '').split(',').map((part) => part.trim().toLowerCase()).filter(Boolean);
const faults = FAULTS.filter((fault) => wanted.length === 0 || wanted.some((part) => fault.name.toLowerCase().includes(part)));

// An interrupted run still kills everything it started.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    everything.run().finally(() => process.exit(130));
  });
}

console.log(
  `chaos: ${faults.length} faults, each held ${options.faultMs} ms, ${options.clients} writers (64 for the deploy), ` +
    `every request bounded by ${options.requestTimeoutMs} ms`,
);
const rows: FaultFigures[] = [];
try {
  for (const fault of faults) {
    const figures = await runFault(fault, options).catch(
      (error: Error): FaultFigures => ({ ...emptyFigures(fault.name), failed: error.message.split('\n')[0]! }),
    );
    rows.push(figures);
    for (const note of figures.notes) console.log(`  ${note}`);
  }
} finally {
  await everything.run();
}

console.log('');
console.log(formatTable(rows));
const failed = rows.filter((row) => row.failed !== undefined || (row.skipped === undefined && !clean(row)));
for (const row of rows.filter((row) => row.skipped !== undefined)) console.log(`skipped ${row.fault}: ${row.skipped}`);
process.exitCode = failed.length === 0 ? 0 : 1;

function clean(row: FaultFigures): boolean {
  return row.lost + row.outsideContract + row.unanswered + row.otherErrors + row.processExits === 0 && row.recoverMs !== undefined;
}
