// The faults of `npm run chaos` (test/harness/chaos.ts) as tests, a second or two each, against the real
// server and real PostgreSQL / Redis / SQLite processes; see test/system/chaos.test.ts. They are spread over a few
// test files (FAULT_GROUPS) so that tap runs them beside other files instead of one after the other in a
// single long file; chaos.test.ts checks that every fault of FAULTS is in exactly one group.
import t from 'tap';
import { FAULTS, runFault, type ChaosOptions } from './chaos.ts';

export const OPTIONS: ChaosOptions = {
  faultMs: 1_500,
  // A bound, not an expectation: above the 5 s a write may wait for another process's SQLite lock, and
  // 2 s shorter than Redis stays frozen, so a request waiting on a frozen Redis without a deadline shows.
  requestTimeoutMs: 8_000,
  recoverDeadlineMs: 15_000,
  clients: 8,
  settleWrites: 50,
  maxRequests: 20_000,
};

/** Which test file runs which faults (by FaultDefinition.name); each group's faults run one after the other. */
export const FAULT_GROUPS = {
  postgres: ['postgres: pg_terminate_backend', 'postgres: kill -9, restart', 'postgres: SIGSTOP (hung), SIGCONT'],
  redis: ['redis: SIGSTOP, SIGCONT'],
  sqlite: ['sqlite: write lock held by another process', 'sqlite: disk full'],
  service: ['rolling deploy: SIGTERM, new instance', 'auth guard: failed authentications, same address'],
} as const satisfies Record<string, readonly string[]>;

/**
 * One test per fault of the group: nothing acknowledged may be lost, every answer must be one openapi.yaml
 * documents, every request must be answered (no reset, no hang past the client's bound), a valid write is
 * answered 2xx or the documented 503, the process never exits, and a write succeeds again after the fault.
 * Without initdb, redis-server or a mountable tmpfs a fault skips visibly; with CI=true it fails instead.
 */
export async function testFaults(group: keyof typeof FAULT_GROUPS): Promise<void> {
  // Each fault with its own processes, one after the other.
  t.setTimeout(15 * 60_000);
  for (const name of FAULT_GROUPS[group]) {
    const fault = FAULTS.find((candidate) => candidate.name === name);
    if (fault === undefined) {
      t.fail(`no fault named ${JSON.stringify(name)} in test/harness/chaos.ts`);
      continue;
    }
    const missing = await fault.unavailable();
    const skip = missing !== undefined && process.env.CI !== 'true' ? `${missing}; fault skipped` : false;
    t.test(fault.name, { skip }, async (t) => {
      if (missing !== undefined) return t.fail(`${missing} (CI=true: a missing dependency is a failure)`);
      const figures = await runFault(fault, { ...OPTIONS, log: (line) => t.comment(line) });
      for (const note of figures.notes) t.comment(note);
      t.ok(figures.acknowledged > 0, `${figures.acknowledged} writes acknowledged, ${figures.sent} requests sent`);
      t.equal(figures.lost, 0, 'no acknowledged write is lost');
      t.equal(figures.outsideContract, 0, 'every answer is one openapi.yaml documents');
      t.equal(figures.unanswered, 0, 'every request is answered: no reset, no hang');
      t.equal(figures.otherErrors, 0, 'every valid write is answered 2xx or the documented 503');
      t.equal(figures.processExits, 0, 'the service process never exits');
      t.not(figures.recoverMs, undefined, 'a write succeeds again after the fault');
    });
  }
}
