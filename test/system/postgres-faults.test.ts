// PostgreSQL faults under load, on real processes: the server (node src/entry.js) on a cluster of
// its own (test/harness/postgres-cluster.ts), whose backends are terminated or whose postmaster
// is SIGKILLed while writers keep sending. The service must survive, answer each request 200 or
// the documented 503 (with Retry-After), say not ready while the database is gone, recover by
// itself once it is back, and have stored every write it acknowledged.
import pg from 'pg';
import t, { type Test } from 'tap';
import { postgresBinDir, startPostgresCluster, type PostgresCluster } from '../harness/postgres-cluster.ts';
import { contractProblems } from '../harness/contract.ts';
import { serverEnv, startServer, type RunningServer } from '../harness/process.ts';

const TOKEN = 'postgres-faults-token-0123456789';
const HEADERS = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const WRITERS = 12;

const options =
  postgresBinDir() !== undefined || process.env.CI === 'true'
    ? { skip: false as const }
    : { skip: 'initdb was not found (install PostgreSQL or set POSTGRES_BIN_DIR); PostgreSQL fault tests skipped' };

interface Answer {
  method: string;
  url: string;
  status: number;
  retryAfter: string | null;
  problems: string[];
}

/** Writers that each create plants of their own and replace them, until stopped; every answer is kept. */
class WriteLoad {
  readonly answers: Answer[] = [];
  /** Failures below HTTP: resets, refused or dropped connections. */
  readonly transportErrors: string[] = [];
  /** Per plant: the name its last acknowledged write stored, and the names of later writes whose answer was not 200. */
  readonly plants = new Map<number, { acknowledged?: string; maybe: Set<string> }>();
  #stopped = false;
  #writers: Promise<void>[] = [];
  #waiters = new Set<() => void>();
  readonly server: RunningServer;

  constructor(server: RunningServer) {
    this.server = server;
    server.exited.then(() => this.#notify());
  }

  start(): void {
    this.#writers = Array.from({ length: WRITERS }, (_, writer) => this.#write(writer));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#writers);
  }

  count(status: number): number {
    return this.answers.reduce((sum, answer) => sum + (answer.status === status ? 1 : 0), 0);
  }

  /** Resolves once `condition` holds; rejects if the server process exits first. */
  until(condition: () => boolean, what: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (condition()) {
          this.#waiters.delete(check);
          resolve();
        } else if (this.server.child.exitCode !== null || this.server.child.signalCode !== null) {
          this.#waiters.delete(check);
          reject(new Error(`the server exited while waiting for ${what}; stderr:\n${this.server.stderr().slice(-2000)}`));
        }
      };
      this.#waiters.add(check);
      check();
    });
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }

  async #write(writer: number): Promise<void> {
    const mine: number[] = [];
    for (let n = 0; !this.#stopped; n++) {
      // Creates (the group-commit path) and replaces (a transaction holding a row lock) in turn.
      const replacing = n % 2 === 1 && mine.length > 0;
      const id = replacing ? mine[n % mine.length]! : writer * 1_000_000 + n;
      const name = `w${writer} n${n}`;
      const plant = this.plants.get(id) ?? { maybe: new Set<string>() };
      this.plants.set(id, plant);
      const status = await this.#send(replacing ? 'PUT' : 'POST', replacing ? `/plants/${id}` : '/plants', replacing ? { name } : { id, name });
      if (status === 200) {
        plant.acknowledged = name;
        plant.maybe.clear();
        if (!replacing) mine.push(id);
      } else {
        plant.maybe.add(name);
      }
      this.#notify();
      // A client backs off a little after a failure instead of spinning on a database that is down.
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  async #send(method: string, path: string, body: object): Promise<number | undefined> {
    const url = `${this.server.url}${path}`;
    try {
      const response = await fetch(url, { method, headers: HEADERS, body: JSON.stringify(body) });
      const text = await response.text();
      const headers = Object.fromEntries(response.headers);
      const problems = contractProblems(method, path, { statusCode: response.status, headers, body: text });
      this.answers.push({ method, url: path, status: response.status, retryAfter: response.headers.get('retry-after'), problems });
      return response.status;
    } catch (error) {
      const cause = (error as Error & { cause?: Error }).cause;
      this.transportErrors.push(`${method} ${path}: ${cause?.message ?? (error as Error).message}`);
      return undefined;
    }
  }
}

async function readiness(server: RunningServer): Promise<{ status: number; problems: string[] }> {
  const response = await fetch(`${server.url}/readyz`);
  const body = await response.text();
  return { status: response.status, problems: contractProblems('GET', '/readyz', { statusCode: response.status, headers: Object.fromEntries(response.headers), body }) };
}

async function setUp(t: Test): Promise<{ cluster: PostgresCluster; server: RunningServer; load: WriteLoad }> {
  const cluster = await startPostgresCluster();
  t.teardown(() => cluster.destroy());
  const server = await startServer(t, serverEnv(t.testdir(), { DATABASE_URL: cluster.url, API_TOKENS: TOKEN }));
  const load = new WriteLoad(server);
  t.teardown(() => load.stop()); // a failed test must not leave writers running
  return { cluster, server, load };
}

/** The answers a client must accept: 200, or the documented 503 with Retry-After; no resets; the process alive. */
function checkAnswers(t: Test, load: WriteLoad): void {
  t.equal(load.server.child.exitCode, null, 'the service process is still running');
  t.notMatch(load.server.stderr(), /Unhandled 'error' event|uncaught/i, 'and it reported no unhandled error');
  t.same(load.transportErrors.slice(0, 5), [], `no request failed below HTTP (${load.transportErrors.length} did)`);
  const unexpected = load.answers.filter((answer) => answer.status !== 200 && answer.status !== 503);
  t.same(unexpected.slice(0, 5), [], 'every write answered 200 or 503');
  const outside = load.answers.filter((answer) => answer.problems.length > 0);
  t.same(outside.slice(0, 5), [], 'every answer as openapi.yaml documents it');
  const without = load.answers.filter((answer) => answer.status === 503 && !/^\d+$/.test(answer.retryAfter ?? ''));
  t.same(without.slice(0, 5), [], 'every 503 says when to retry');
}

/** Every acknowledged write is in the database; a plant whose later writes were not acknowledged may hold one of those. */
async function checkAcknowledgedWrites(t: Test, cluster: PostgresCluster, load: WriteLoad): Promise<void> {
  const client = new pg.Client({ connectionString: cluster.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string; name: string }>('SELECT id::text, name FROM plants');
    const stored = new Map(rows.map((row) => [Number(row.id), row.name]));
    const lost: string[] = [];
    let acknowledged = 0;
    for (const [id, plant] of load.plants) {
      if (plant.acknowledged === undefined) continue;
      acknowledged++;
      const name = stored.get(id);
      if (name !== plant.acknowledged && !(name !== undefined && plant.maybe.has(name))) {
        lost.push(`${id}: acknowledged "${plant.acknowledged}", stored ${JSON.stringify(name)}`);
      }
    }
    t.ok(acknowledged > 0, `${acknowledged} plants had acknowledged writes`);
    t.same(lost.slice(0, 5), [], `every acknowledged write is in the database (${lost.length} lost)`);
  } finally {
    await client.end();
  }
}

t.test('PostgreSQL faults under a write load', options, async (t) => {
  t.test('backends terminated by pg_terminate_backend', async (t) => {
    const { cluster, server, load } = await setUp(t);
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    t.teardown(() => admin.end());

    load.start();
    let terminated = 0;
    for (let round = 1; round <= 5; round++) {
      const target = load.count(200) + 40;
      await load.until(() => load.count(200) >= target, `40 more acknowledged writes before termination round ${round}`);
      const { rows } = await admin.query<{ done: boolean }>(
        `SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity
          WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database()`,
      );
      terminated += rows.filter((row) => row.done).length;
    }
    const afterwards = load.count(200) + 100;
    await load.until(() => load.count(200) >= afterwards, '100 acknowledged writes after the last termination');
    await load.stop();

    t.ok(terminated > 0, `${terminated} of the service's backends were terminated`);
    checkAnswers(t, load);
    t.equal((await readiness(server)).status, 200, '/readyz answers 200 without a restart');
    await checkAcknowledgedWrites(t, cluster, load);
  });

  t.test('the postmaster killed with SIGKILL, then started again', async (t) => {
    const { cluster, server, load } = await setUp(t);
    load.start();
    await load.until(() => load.count(200) >= 100, '100 acknowledged writes before the kill');
    await cluster.kill('SIGKILL');

    const refusedBefore = load.count(503);
    await load.until(() => load.count(503) >= refusedBefore + 20, '20 answers of 503 while the database is down');
    const down = await readiness(server);
    t.equal(down.status, 503, '/readyz answers 503 while the database is down');
    t.same(down.problems, [], 'as documented');
    const metrics = await fetch(`${server.url}/metrics`);
    const exposition = await metrics.text();
    t.equal(metrics.status, 200, '/metrics still answers: monitoring matters most while the database is down');
    t.match(exposition, /^store_operation_duration_seconds_count\{method="replacePlant",outcome="error"\} [1-9]/m, 'and shows the failing store calls');

    await cluster.start();
    // Recovery is the service's own doing: poll readiness as a load balancer would.
    for (let ready = await readiness(server); ready.status !== 200; ready = await readiness(server)) {
      if (ready.status !== 503 || ready.problems.length > 0) t.fail(`/readyz answered ${ready.status} before it was ready again`, ready);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const recovered = load.count(200) + 100;
    await load.until(() => load.count(200) >= recovered, '100 acknowledged writes after the restart');
    await load.stop();

    t.ok(load.count(503) > 0, `${load.count(503)} writes answered 503 while the database was down`);
    checkAnswers(t, load);
    await checkAcknowledgedWrites(t, cluster, load);
  });

  t.test('a database that neither answers nor refuses: readiness says so instead of hanging', async (t) => {
    const { cluster, server } = await setUp(t);
    const created = await fetch(`${server.url}/plants`, { method: 'POST', headers: HEADERS, body: '{"id":1,"name":"Monstera"}' });
    t.equal(created.status, 200, 'a write before: the pool holds an open connection');
    t.equal((await readiness(server)).status, 200, 'ready before');

    cluster.freeze();
    const frozen = await readiness(server);
    t.equal(frozen.status, 503, '/readyz answers 503 while every PostgreSQL process is stopped');
    t.same(frozen.problems, [], 'as documented');

    cluster.thaw();
    for (let ready = await readiness(server); ready.status !== 200; ready = await readiness(server)) {
      if (ready.status !== 503 || ready.problems.length > 0) t.fail(`/readyz answered ${ready.status} before it was ready again`, ready);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const after = await fetch(`${server.url}/plants`, { method: 'POST', headers: HEADERS, body: '{"id":2,"name":"Pilea"}' });
    t.equal(after.status, 200, 'writes succeed again once it answers');
    t.equal(server.child.exitCode, null, 'the service process is still running');
  });
});
