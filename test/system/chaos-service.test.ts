// The bad day, short (see test/harness/chaos-faults.ts and test/system/chaos.test.ts): a rolling deploy (SIGTERM, a new
// instance on the same file), and a client failing authentication from the writers' address.
import { testFaults } from '../harness/chaos-faults.ts';

await testFaults('service');
