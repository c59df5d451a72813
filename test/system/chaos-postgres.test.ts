// The bad day, short (see test/harness/chaos-faults.ts and test/system/chaos.test.ts): PostgreSQL's backends terminated, its
// postmaster killed and restarted, each on a cluster of the test's own (initdb).
import { testFaults } from '../harness/chaos-faults.ts';

await testFaults('postgres');
