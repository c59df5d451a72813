// A PostgreSQL that neither answers nor refuses, under load, on real processes: the server
// (node src/entry.js, DATABASE_QUERY_TIMEOUT=1s) on a cluster of its own whose every process is
// SIGSTOPped (test/harness/postgres-cluster.ts). Every request waiting on the store must get the
// documented 503 with Retry-After while the database is still frozen (the answers arrive before
// thaw() is called: no duration is asserted, the tap timeout is the bound), those waiting for one of
// the pool's three connections included; after the thaw the service is ready again by itself, and
// every create it acknowledged reads back.
import pg from 'pg';
import t, { type Test } from 'tap';
import { contractProblems } from '../harness/contract.ts';
import { postgresBinDir, startPostgresCluster, type PostgresCluster } from '../harness/postgres-cluster.ts';
import { runScript, serverEnv, startServer, type RunningServer } from '../harness/process.ts';

const TOKEN = 'postgres-deadline-token-0123456789';
const WRITERS = 8;
/** Answers of 503 each client must have received, on requests it sent while the database was frozen. */
const FROZEN_ROUNDS = 3;

const options =
  postgresBinDir() !== undefined || process.env.CI === 'true'
    ? { skip: false as const }
    : { skip: 'initdb was not found (install PostgreSQL or set POSTGRES_BIN_DIR); PostgreSQL deadline tests skipped' };

interface Sent {
  method: string;
  path: string;
  client: number;
  /** Sent while the database was frozen. */
  sentFrozen: boolean;
  status?: number;
  retryAfter?: string | null;
  problems?: string[];
  /** Answered while the database was frozen. */
  answeredFrozen?: boolean;
  transportError?: string;
}

/** Clients that create plants, read them back and replace them, until stopped; every request is kept. */
class Load {
  readonly requests: Sent[] = [];
  /** Per plant: the name its last acknowledged write stored, and the names of later writes not acknowledged. */
  readonly plants = new Map<number, { acknowledged?: string; maybe: Set<string>; body: string }>();
  frozen = false;
  readonly #abort = new AbortController();
  #stopped = false;
  #clients: Promise<void>[] = [];
  readonly #waiters = new Set<() => void>();
  readonly server: RunningServer;

  constructor(server: RunningServer) {
    this.server = server;
    server.exited.then(() => this.#notify());
  }

  start(): void {
    this.#clients = Array.from({ length: WRITERS }, (_, client) => this.#run(client));
  }

  /** Stops sending; with `abandon`, requests still waiting are given up (a failed test must not hang in its teardown). */
  async stop(abandon = false): Promise<void> {
    this.#stopped = true;
    if (abandon) this.#abort.abort();
    await Promise.all(this.#clients);
  }

  count(test: (sent: Sent) => boolean): number {
    return this.requests.reduce((sum, sent) => sum + (test(sent) ? 1 : 0), 0);
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

  async #run(client: number): Promise<void> {
    const mine: number[] = [];
    for (let n = 0; !this.#stopped; n++) {
      // Creates (the group-commit batch), reads, and replaces (a transaction holding a row lock) in turn.
      const kind = mine.length === 0 ? 0 : n % 3;
      const id = kind === 0 ? client * 1_000_000 + n : mine[n % mine.length]!;
      const name = `c${client} n${n}`;
      let status: number | undefined;
      if (kind === 1) {
        status = await this.#send(client, 'GET', `/plants/${id}`);
      } else {
        const body = JSON.stringify(kind === 0 ? { id, name } : { name });
        const plant = this.plants.get(id) ?? { maybe: new Set<string>(), body };
        this.plants.set(id, plant);
        status = await this.#send(client, kind === 0 ? 'POST' : 'PUT', kind === 0 ? '/plants' : `/plants/${id}`, body);
        if (status === 200) {
          plant.acknowledged = name;
          plant.maybe.clear();
          if (kind === 0) mine.push(id);
        } else {
          plant.maybe.add(name);
        }
      }
      this.#notify();
      // A client backs off a little after a failure instead of spinning on a database that does not answer.
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  async #send(client: number, method: string, path: string, body?: string): Promise<number | undefined> {
    const sent: Sent = { method, path, client, sentFrozen: this.frozen };
    this.requests.push(sent);
    try {
      const headers = { authorization: `Bearer ${TOKEN}`, ...(body !== undefined && { 'content-type': 'application/json' }) };
      const response = await fetch(`${this.server.url}${path}`, { method, headers, body, signal: this.#abort.signal });
      const text = await response.text();
      sent.answeredFrozen = this.frozen;
      sent.status = response.status;
      sent.retryAfter = response.headers.get('retry-after');
      sent.problems = contractProblems(method, path, { statusCode: response.status, headers: Object.fromEntries(response.headers), body: text });
      return response.status;
    } catch (error) {
      sent.answeredFrozen = this.frozen;
      const cause = (error as Error & { cause?: Error }).cause;
      sent.transportError = cause?.message ?? (error as Error).message;
      return undefined;
    }
  }
}

interface Answer {
  status: number;
  retryAfter: string | null;
  problems: string[];
}

async function request(server: RunningServer, method: string, path: string, token?: string, body?: string): Promise<Answer & { body: string }> {
  const headers: Record<string, string> = {};
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${server.url}${path}`, { method, headers, body });
  const text = await response.text();
  const problems = contractProblems(method, path, { statusCode: response.status, headers: Object.fromEntries(response.headers), body: text });
  return { status: response.status, retryAfter: response.headers.get('retry-after'), problems, body: text };
}

/** A token in the store, never used yet: the first request with it must look it up. */
async function storedToken(t: Test, cluster: PostgresCluster): Promise<string> {
  const run = await runScript(t, 'scripts/token.ts', ['create', '--name', 'frozen-lookup'], { DATABASE_URL: cluster.url });
  if (run.code !== 0) throw new Error(`npm run token -- create failed: ${run.stderr}`);
  return run.stdout.trim().split('\n').at(-1)!;
}

t.test('a frozen PostgreSQL: each waiting request answers 503 while it is still frozen, and the service recovers after', options, async (t) => {
  const cluster = await startPostgresCluster();
  t.teardown(() => cluster.destroy());
  const server = await startServer(t, serverEnv(t.testdir(), { DATABASE_URL: cluster.url, API_TOKENS: TOKEN, DATABASE_QUERY_TIMEOUT: '1s', DATABASE_POOL_SIZE: '3' }));
  const load = new Load(server);
  t.teardown(() => load.stop(true));
  const fresh = await storedToken(t, cluster);

  load.start();
  await load.until(() => load.count((sent) => sent.status === 200) >= 60, '60 answers of 200 before the freeze');

  cluster.freeze();
  load.frozen = true;
  const inFlight = load.requests.filter((sent) => sent.status === undefined && sent.transportError === undefined);
  t.comment(`frozen with ${inFlight.length} requests in flight; waiting for their answers before the thaw`);
  const frozenRounds = (client: number) => load.count((sent) => sent.client === client && sent.sentFrozen && sent.answeredFrozen === true);
  const answered = load.until(
    () => inFlight.every((sent) => sent.answeredFrozen !== undefined) && Array.from({ length: WRITERS }, (_, client) => frozenRounds(client)).every((n) => n >= FROZEN_ROUNDS),
    `an answer to each of the ${inFlight.length} requests in flight at the freeze, and ${FROZEN_ROUNDS} answers to each client's requests sent during it`,
  );
  const [ready, lookup, metrics] = await Promise.all([
    request(server, 'GET', '/readyz'),
    request(server, 'GET', '/plants?limit=1', fresh),
    request(server, 'GET', '/metrics'), // its outbox gauge asks the store
    answered,
  ]);
  load.frozen = false;
  const whileFrozen = load.requests.filter((sent) => sent.sentFrozen && sent.answeredFrozen);
  cluster.thaw();

  t.ok(inFlight.length > 0, `${inFlight.length} requests were in flight when the database froze, and each was answered before the thaw`);
  t.same(
    whileFrozen.filter((sent) => sent.status !== 503 || !/^\d+$/.test(sent.retryAfter ?? '')).slice(0, 5),
    [],
    `each of the ${whileFrozen.length} requests sent and answered while frozen got 503 with Retry-After`,
  );
  t.same({ status: ready.status, problems: ready.problems }, { status: 503, problems: [] }, '/readyz answered 503 while frozen, as documented');
  t.same(
    { status: lookup.status, retry: /^\d+$/.test(lookup.retryAfter ?? ''), problems: lookup.problems },
    { status: 503, retry: true, problems: [] },
    'a stored token that had to be looked up got the documented 503 with Retry-After (not 401)',
  );
  t.same({ status: metrics.status, problems: metrics.problems }, { status: 200, problems: [] }, '/metrics answered while frozen: monitoring matters most then');

  // Recovery is the service's own doing: poll readiness as a load balancer would.
  for (let again = await request(server, 'GET', '/readyz'); again.status !== 200; again = await request(server, 'GET', '/readyz')) {
    if (again.status !== 503 || again.problems.length > 0) t.fail(`/readyz answered ${again.status} before it was ready again`, again);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const after = load.count((sent) => sent.status === 200) + 60;
  await load.until(() => load.count((sent) => sent.status === 200) >= after, '60 more answers of 200 after the thaw');
  await load.stop();

  t.equal(server.child.exitCode, null, 'the service process is still running');
  t.notMatch(server.stderr(), /Unhandled 'error' event|uncaught/i, 'and it reported no unhandled error');
  t.same(load.requests.filter((sent) => sent.transportError !== undefined).slice(0, 5), [], 'no request failed below HTTP');
  t.same(load.requests.filter((sent) => sent.status !== 200 && sent.status !== 503).slice(0, 5), [], 'every request answered 200 or 503');
  t.same(load.requests.filter((sent) => (sent.problems ?? []).length > 0).slice(0, 5), [], 'every answer as openapi.yaml documents it');
  t.equal((await request(server, 'GET', '/plants?limit=1', fresh)).status, 200, 'the stored token works after the thaw');
  await checkAcknowledged(t, cluster, load);
  await checkReplays(t, server, load);
});

/** Every acknowledged write is in the database; a plant whose later writes were not acknowledged may hold one of those. */
async function checkAcknowledged(t: Test, cluster: PostgresCluster, load: Load): Promise<void> {
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
      if (name !== plant.acknowledged && !(name !== undefined && plant.maybe.has(name))) lost.push(`${id}: acknowledged "${plant.acknowledged}", stored ${JSON.stringify(name)}`);
    }
    t.ok(acknowledged > 0, `${acknowledged} plants had acknowledged writes`);
    t.same(lost.slice(0, 5), [], `every acknowledged write is in the database (${lost.length} lost)`);
  } finally {
    await client.end();
  }
}

/** A create answered 503 may or may not have been written; sending it again answers 200 with the plant either way. */
async function checkReplays(t: Test, server: RunningServer, load: Load): Promise<void> {
  const unknown = [...load.plants].filter(([, plant]) => plant.acknowledged === undefined);
  t.ok(unknown.length > 0, `${unknown.length} creates were answered 503`);
  const wrong: string[] = [];
  for (const [id, plant] of unknown) {
    const replay = await request(server, 'POST', '/plants', TOKEN, plant.body);
    if (replay.status !== 200 || replay.problems.length > 0 || JSON.parse(replay.body).name !== JSON.parse(plant.body).name) wrong.push(`${id}: ${replay.status} ${replay.body}`);
  }
  t.same(wrong.slice(0, 5), [], 'each of them, sent again, answers 200 with the plant as sent');
}
