// The bad day, short: each fault of `npm run chaos` (scripts/chaos-lib.ts) for a second or two against the
// real server and real PostgreSQL / Redis / SQLite processes. Nothing acknowledged may be lost, every answer
// must be one openapi.yaml documents, every request must be answered (no reset, no hang past the client's
// bound), a valid write is answered 2xx or the documented 503, the process never exits, and a write succeeds
// again after the fault. Without initdb, redis-server or a mountable tmpfs those faults skip visibly; with
// CI=true they fail instead. Last, a check that the harness itself notices a lost write.
import t from 'tap';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { FAULTS, runFault, type ChaosOptions, type FaultDefinition } from '../scripts/chaos-lib.ts';

const OPTIONS: ChaosOptions = {
  faultMs: 1_500,
  // A bound, not an expectation: above the 5 s a write may wait for another process's SQLite lock, and
  // 2 s shorter than Redis stays frozen, so a request waiting on a frozen Redis without a deadline shows.
  requestTimeoutMs: 8_000,
  recoverDeadlineMs: 15_000,
  clients: 8,
  settleWrites: 50,
  maxRequests: 20_000,
};

// Seven faults, each with its own processes, one after the other.
t.setTimeout(15 * 60_000);

for (const fault of FAULTS) {
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

t.test('the harness reports an acknowledged write that is not read back', async (t) => {
  let path = '';
  const tampering: FaultDefinition = {
    name: 'a store that forgets',
    unavailable: () => undefined,
    prepare: async () => {
      path = join(t.testdir(), 'plants.db');
      return {
        env: { DATABASE_URL: `sqlite:${path}` },
        run: async () => undefined,
        // Between the last instance and the read-back, the first plant created goes missing, as a broken store would.
        beforeReadBack: () => {
          const db = new DatabaseSync(path);
          try {
            db.prepare('DELETE FROM plants WHERE id = 1').run();
          } finally {
            db.close();
          }
        },
      };
    },
  };
  const figures = await runFault(tampering, OPTIONS);
  t.equal(figures.lost, 1, 'the deleted plant is counted lost');
  t.ok(figures.notes.some((note) => note.startsWith('plant 1: read back null')), 'and named');
  t.equal(figures.unanswered + figures.outsideContract + figures.processExits, 0, 'and nothing else is reported');
});
