// The bad day, short: each fault of `npm run chaos` (test/harness/chaos.ts) for a second or two against the
// real server and real PostgreSQL / Redis / SQLite processes. Nothing acknowledged may be lost, every answer
// must be one openapi.yaml documents, every request must be answered (no reset, no hang past the client's
// bound), a valid write is answered 2xx or the documented 503, the process never exits, and a write succeeds
// again after the fault. Without initdb, redis-server or a mountable tmpfs those faults skip visibly; with
// CI=true they fail instead. The faults run in test/chaos-{postgres,redis,sqlite,service}.test.ts (groups in
// test/harness/chaos-faults.ts), so that tap runs them beside other files; here, a check that every fault is in one
// of those groups, and a check that the harness itself notices a lost write.
import t from 'tap';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { FAULTS, runFault, type FaultDefinition } from '../harness/chaos.ts';
import { FAULT_GROUPS, OPTIONS } from '../harness/chaos-faults.ts';

t.test('every fault of npm run chaos is tested, in exactly one file', async (t) => {
  const grouped: string[] = Object.values(FAULT_GROUPS).flat();
  t.same([...grouped].sort(), FAULTS.map((fault) => fault.name).sort(), 'the groups name each fault once');
});

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
