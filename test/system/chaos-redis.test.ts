// The bad day, short (see test/harness/chaos-faults.ts and test/system/chaos.test.ts): the service's Redis (a redis-server of
// the test's own) frozen with SIGSTOP longer than a client waits, then thawed.
import { testFaults } from '../harness/chaos-faults.ts';

await testFaults('redis');
