// The bad day, short (see test/harness/chaos-faults.ts and test/system/chaos.test.ts): another process holding SQLite's write
// lock, and the disk (a small tmpfs) filling up.
import { testFaults } from '../harness/chaos-faults.ts';

await testFaults('sqlite');
