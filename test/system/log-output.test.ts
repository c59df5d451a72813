// The access lines of a real server process under sustained load (src/observability/logging.ts, standardOutput): each
// line reaches stdout as its answer closes, so whenever /metrics has counted an answer, its line is already written.
// pino's asynchronous default fell behind instead, its backlog held in memory: 3,844 of 27,841 lines not yet written
// after 1 s of load, 20,684 of 106,540 after 3 s.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { linesAdded } from '../harness/file-lines.ts';
import { REPO_ROOT } from '../harness/paths.ts';
import { freePort } from '../harness/ports.ts';
import { serverEnv, spawnServer } from '../harness/process.ts';

const CONNECTIONS = 64;
const REQUESTS = 80_000;
const AUTOCANNON = join(REPO_ROOT, 'node_modules', 'autocannon', 'autocannon.js');
const ANSWERED = /^http_request_duration_seconds_count\{operation="getPlant",method="GET",status="401"\} (\d+)$/m;

/** Resolves once the file holds a line matching `pattern`, checked on every change the file system reports. */
async function lineIn(file: string, dir: string, pattern: RegExp): Promise<void> {
  const watcher = watch(dir);
  try {
    while (!pattern.test(readFileSync(file, 'utf8'))) await once(watcher, 'change');
  } finally {
    watcher.close();
  }
}

/** Counts the 401s' access lines written to the file so far. */
function refusalLines(file: string): () => number {
  const read = linesAdded(file);
  let count = 0;
  return () => {
    read((line) => {
      if (line.includes('"msg":"request completed"') && line.includes('"statusCode":401')) count++;
    });
    return count;
  };
}

t.test('under sustained load, every answer /metrics has counted already has its access line in stdout', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plants-log-output-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const stdout = join(dir, 'stdout.log');
  const port = await freePort();
  // Unauthenticated reads, the cheapest answer: the most lines per second. No guard turns them into 429s.
  const env = serverEnv(dir, { PORT: String(port), API_TOKENS: 'log-output-token-0123456789abcdef', AUTH_FAILURES_PER_MINUTE: '0' });
  const server = spawnServer(t, env, { stdoutFile: stdout });
  const exitedEarly = server.exited.then(() => Promise.reject(new Error(`the server exited before listening: ${server.stderr()}`)));
  exitedEarly.catch(() => undefined); // past listening, the exit is the teardown's
  await Promise.race([lineIn(stdout, dir, /"msg":"Server listening at /), exitedEarly]);
  const written = refusalLines(stdout);

  // From a process of its own, as clients are: a closed loop of CONNECTIONS keep-alive connections.
  const generator = spawn(process.execPath, [AUTOCANNON, '-c', String(CONNECTIONS), '-a', String(REQUESTS), '-j', `http://127.0.0.1:${port}/plants/1`], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let report = '';
  generator.stdout.setEncoding('utf8').on('data', (chunk: string) => (report += chunk));
  const finished = once(generator, 'exit');
  const load = { over: false };
  finished.then(() => (load.over = true), () => undefined);

  // Answers counted by the server, then the lines in the file: the lines can only have grown meanwhile.
  let [samples, behind] = [0, 0];
  while (!load.over) {
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const counted = Number(ANSWERED.exec(metrics)?.[1] ?? 0);
    behind = Math.max(behind, counted - written());
    samples++;
  }
  const [code] = (await finished) as [number | null];

  t.equal(code, 0, 'the load generator finished');
  const result = JSON.parse(report) as { '4xx': number; errors: number };
  t.same({ refused: result['4xx'], errors: result.errors }, { refused: REQUESTS, errors: 0 }, `all ${REQUESTS} requests answered 401`);
  t.ok(samples >= 3, `/metrics read ${samples} times during the load`);
  t.ok(behind <= CONNECTIONS, `answers counted with no line written yet, the most at any of those times: ${behind}`);
});
