// npm run test:quick: tap on the in-process test files only (the rule is in test/harness/quick.ts),
// without coverage; npm test runs them all. Further arguments go to tap.
import { spawn } from 'node:child_process';
import { quickTestFiles } from '../test/harness/quick.ts';
import { REPO_ROOT } from '../test/harness/paths.ts';

const tap = spawn('tap', ['--disable-coverage', ...quickTestFiles(), ...process.argv.slice(2)], { cwd: REPO_ROOT, stdio: 'inherit' });
tap.once('error', (error) => {
  console.error(`test:quick: could not run tap (run it through npm run test:quick): ${error.message}`);
  process.exitCode = 1;
});
tap.once('close', (code, signal) => (process.exitCode = code ?? (signal ? 1 : 0)));
