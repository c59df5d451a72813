// The bad day, measured: shared by `npm run chaos` (scripts/chaos.ts) and test/system/chaos.test.ts.
// Each fault runs against real processes: the real server (node src/entry.js, started as test/harness/process.ts
// does) under concurrent keep-alive writers, and a real PostgreSQL cluster, redis-server, lock holder or
// full disk from test/harness/. Per fault: warm up until writes are acknowledged, inject the fault,
// hold it, end it, poll for the first successful write (time to recover), let the load run a little
// longer, then read back every plant whose write was acknowledged. Every request is bounded by a
// client-side timeout, so a hung service shows up as "unanswered" instead of hanging the harness;
// everything started is killed by PID at the end, even when the run fails.
import { Agent, request, type IncomingHttpHeaders } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { contractProblems, spec } from './contract.ts';
import { Cleanup, serverEnv, startServer, type Exit, type RunningServer, type ServerEnv } from './process.ts';
import { postgresBinDir, startPostgresCluster, type PostgresCluster } from './postgres-cluster.ts';
import { redisServerAvailable, startRedisServer } from './redis-server.ts';
import { holdWriteLock, smallDisk, smallDiskSkipReason } from './sqlite-faults.ts';

export const CHAOS_TOKEN = 'chaos-harness-token-0123456789abcdef';

export interface ChaosOptions {
  /** How long each fault lasts (Redis stays frozen 2 s longer than requestTimeoutMs, so a hang shows). */
  faultMs: number;
  /** Client-side bound on every request; a request without an answer by then counts as unanswered.
   *  Keep it above the waits the service documents (5 s for another process's SQLite write lock). */
  requestTimeoutMs: number;
  /** Polling for the first successful write after the fault gives up after this. */
  recoverDeadlineMs: number;
  /** Concurrent keep-alive writers (the rolling deploy always uses 64). */
  clients: number;
  /** Acknowledged writes to wait for before the fault, and again after the recovery. */
  settleWrites: number;
  /** Bound on the requests the writers send per fault. */
  maxRequests: number;
  log?: (line: string) => void;
}

export interface FaultFigures {
  fault: string;
  /** Requests that reached the service, writes and /healthz probes (a refused connection is not counted: nothing was sent). */
  sent: number;
  /** Writes answered 2xx. */
  acknowledged: number;
  /** Acknowledged writes not found (or not as acknowledged) when read back after the recovery. */
  lost: number;
  /** Answers whose status, content type, body or headers openapi.yaml does not document for the operation. */
  outsideContract: number;
  /** Requests without a complete answer: resets, broken answers, no answer within requestTimeoutMs. */
  unanswered: number;
  /** Documented answers a client of a valid write would not accept: neither 2xx nor the 503 (a 500, a 429 for a valid token, ...). */
  otherErrors: number;
  /** Times the service process exited when it should not have (a deploy's SIGTERM may end it, with code 0). */
  processExits: number;
  /** From the fault's end to the first successful write; undefined when none came before recoverDeadlineMs. */
  recoverMs: number | undefined;
  /** The slowest answered write, and the slowest answer of a GET /healthz probe sent every 50 ms (informative only). */
  slowestWriteMs: number;
  slowestHealthMs: number;
  /** Connections refused (the service not listening); these requests were never sent. */
  refused: number;
  /** The first few problems seen, to say what went wrong. */
  notes: string[];
  /** Set when the fault could not run here (a missing initdb or redis-server). */
  skipped?: string;
  /** Set when the harness itself failed (a service that never started): the figures are incomplete. */
  failed?: string;
}

/** Everything the runs in this process started; chaos.ts runs it on SIGINT/SIGTERM too. */
export const everything = new Cleanup();

// ---------------------------------------------------------------------------------------------
// Faults

export interface FaultContext {
  options: ChaosOptions;
  cleanup: Cleanup;
  service: Service;
  figures: FaultFigures;
  note: (line: string) => void;
}

export interface PreparedFault {
  /** The service's environment beyond the defaults (DATABASE_URL, REDIS_URL, ...). */
  env: ServerEnv;
  /** Injects the fault, holds it and ends it; resolves at the fault's end (restart done, lock released, ...). */
  run: (context: FaultContext) => Promise<void>;
  /** Called with no instance running, just before the read-back (a test tampers with the store here). */
  beforeReadBack?: () => void | Promise<void>;
}

export interface FaultDefinition {
  name: string;
  /** Why this fault cannot run on this machine (a missing initdb or redis-server), or undefined. */
  unavailable: () => string | undefined | Promise<string | undefined>;
  prepare: (context: Omit<FaultContext, 'service' | 'figures' | 'note'>) => Promise<PreparedFault>;
  /** Concurrent writers; default options.clients. */
  clients?: number;
}

/** The service's DATABASE_QUERY_TIMEOUT while PostgreSQL hangs: short, so that its answers stand apart from the client's bound. */
export const HUNG_QUERY_TIMEOUT_MS = 1_000;
const HUNG_PROBES = 4;
let hungIds = 1_000_000_000_000;

export const FAULTS: readonly FaultDefinition[] = [
  onOwnCluster('postgres: pg_terminate_backend', (cluster, options) => async ({ note }) => {
    // Every backend of the service, again and again while the fault lasts: idle and checked-out clients alike.
    const until = performance.now() + options.faultMs;
    let terminated = 0;
    do {
      terminated += await terminateBackends(cluster.url);
      await pause(100);
    } while (performance.now() < until);
    note(`${terminated} backends terminated`);
  }),
  onOwnCluster('postgres: kill -9, restart', (cluster, options) => async () => {
    await cluster.kill('SIGKILL');
    await pause(options.faultMs);
    await cluster.start();
  }),
  onOwnCluster(
    'postgres: SIGSTOP (hung), SIGCONT',
    (cluster, options) => async ({ service, note }) => {
      // Frozen longer than a client waits: a request waiting on the database without a deadline shows as unanswered.
      cluster.freeze();
      try {
        for (const line of await measureHung(service.url(), Math.max(options.faultMs, options.requestTimeoutMs + 2_000), options.requestTimeoutMs)) note(line);
      } finally {
        cluster.thaw();
      }
      noteReadiness(service.url(), performance.now(), options, note);
    },
    { DATABASE_QUERY_TIMEOUT: `${HUNG_QUERY_TIMEOUT_MS}ms` },
  ),
  {
    name: 'redis: SIGSTOP, SIGCONT',
    unavailable: () => (redisServerAvailable() ? undefined : 'redis-server is not installed'),
    prepare: async ({ options, cleanup }) => {
      const redis = await startRedisServer();
      cleanup.teardown(() => redis.stop());
      const dir = temporaryDirectory(cleanup);
      return {
        env: { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, RATE_LIMIT_PER_MINUTE: '1000000', REDIS_URL: redis.url },
        // Frozen longer than a client waits: a request that waits on Redis without a deadline shows as unanswered.
        run: async () => {
          await redis.freeze();
          await pause(Math.max(options.faultMs, options.requestTimeoutMs + 2_000));
          await redis.thaw();
        },
      };
    },
  },
  {
    name: 'sqlite: write lock held by another process',
    unavailable: () => undefined,
    prepare: async ({ options, cleanup }) => {
      const path = join(temporaryDirectory(cleanup), 'plants.db');
      return {
        env: { DATABASE_URL: `sqlite:${path}` },
        run: async () => {
          const lock = await holdWriteLock(path);
          await pause(options.faultMs);
          await lock.release();
        },
      };
    },
  },
  {
    name: 'sqlite: disk full',
    unavailable: smallDiskSkipReason,
    prepare: async ({ options, cleanup }) => {
      const disk = await smallDisk(32 * 1024 * 1024);
      cleanup.teardown(() => disk.destroy());
      return {
        env: { DATABASE_URL: `sqlite:${join(disk.dir, 'plants.db')}` },
        run: async () => {
          await disk.fill();
          await pause(options.faultMs);
          await disk.free();
        },
      };
    },
  },
  {
    name: 'rolling deploy: SIGTERM, new instance',
    unavailable: () => undefined,
    clients: 64,
    prepare: async ({ cleanup }) => {
      const dir = temporaryDirectory(cleanup);
      return {
        env: { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` },
        // The fault ends when the old instance has exited and the new one is started on the same file.
        run: async ({ service, figures, note }) => {
          const exit = await service.stop('SIGTERM');
          if (exit.code !== 0) {
            figures.processExits++;
            note(`the old instance did not stop cleanly after SIGTERM: ${JSON.stringify(exit)}`);
          }
          await service.start();
        },
      };
    },
  },
  {
    name: 'auth guard: failed authentications, same address',
    unavailable: () => undefined,
    prepare: async ({ options, cleanup }) => {
      const dir = temporaryDirectory(cleanup);
      const limit = 100;
      return {
        env: { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, AUTH_FAILURES_PER_MINUTE: String(limit) },
        // One client past the guard's limit from the address the writers share: requests without a
        // token, and as many guesses with wrong tokens (the ones the guard counts).
        run: async ({ service, note }) => {
          const agent = new Agent({ keepAlive: true, maxSockets: 1 });
          const statuses = new Map<number | string, number>();
          try {
            for (let i = 0; i < limit * 2 + 4; i++) {
              const guess = i % 2 === 0 ? undefined : `wrong-token-${i}-0123456789abcdef`;
              const outcome = await send(service.url(), agent, 'GET', '/plants', guess, undefined, options.requestTimeoutMs);
              const key = outcome.kind === 'answer' ? outcome.status : outcome.kind;
              statuses.set(key, (statuses.get(key) ?? 0) + 1);
            }
          } finally {
            agent.destroy();
          }
          note(`anonymous client got ${[...statuses].map(([status, count]) => `${count}x ${status}`).join(', ')}`);
        },
      };
    },
  },
];

/** A fault on a PostgreSQL cluster of the harness's own (initdb, a free port), destroyed after it. */
function onOwnCluster(name: string, fault: (cluster: PostgresCluster, options: ChaosOptions) => PreparedFault['run'], env: ServerEnv = {}): FaultDefinition {
  return {
    name,
    unavailable: postgresMissing,
    prepare: async ({ options, cleanup }) => {
      const cluster = await startPostgresCluster();
      cleanup.teardown(() => cluster.destroy());
      return { env: { DATABASE_URL: cluster.url, ...env }, run: fault(cluster, options) };
    },
  };
}

/**
 * While the database is frozen for `holdMs`: HUNG_PROBES clients of their own create plants one after another, and
 * one asks /readyz; answers the lines saying how long their answers took against DATABASE_QUERY_TIMEOUT.
 */
async function measureHung(base: string, holdMs: number, timeoutMs: number): Promise<string[]> {
  const until = performance.now() + holdMs;
  const writes: number[] = [];
  const ready: number[] = [];
  const other = new Map<string, number>();
  const client = async (path: string, times: number[]) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      while (performance.now() < until) {
        const write = path === '/plants';
        const outcome = await send(base, agent, write ? 'POST' : 'GET', path, write ? CHAOS_TOKEN : undefined, write ? JSON.stringify({ id: hungIds++, name: 'hung' }) : undefined, timeoutMs);
        if (outcome.kind === 'answer' && outcome.status === 503) times.push(outcome.ms);
        else other.set(outcome.kind === 'answer' ? String(outcome.status) : outcome.kind, (other.get(outcome.kind === 'answer' ? String(outcome.status) : outcome.kind) ?? 0) + 1);
      }
    } finally {
      agent.destroy();
    }
  };
  await Promise.all([...Array.from({ length: HUNG_PROBES }, () => client('/plants', writes)), client('/readyz', ready)]);
  const bound = `DATABASE_QUERY_TIMEOUT ${HUNG_QUERY_TIMEOUT_MS} ms`;
  return [
    `while frozen, POST /plants answered 503 in ${spread(writes)} (${bound})`,
    `while frozen, /readyz answered 503 in ${spread(ready)} (${bound}; /readyz waits at most 2000 ms)`,
    ...(other.size > 0 ? [`while frozen, other outcomes: ${[...other].map(([kind, count]) => `${count}x ${kind}`).join(', ')}`] : []),
  ];
}

/** After the thaw, notes how long /readyz took to answer 200 again (without holding up the fault's end). */
function noteReadiness(base: string, since: number, options: ChaosOptions, note: (line: string) => void): void {
  const agent = new Agent({ keepAlive: false });
  const poll = async () => {
    while (performance.now() < since + options.recoverDeadlineMs) {
      const outcome = await send(base, agent, 'GET', '/readyz', undefined, undefined, options.requestTimeoutMs);
      if (outcome.kind === 'answer' && outcome.status === 200) return note(`after the thaw, /readyz answered 200 again within ${Math.round(performance.now() - since)} ms`);
      await pause(25);
    }
  };
  poll().finally(() => agent.destroy());
}

function spread(times: number[]): string {
  if (times.length === 0) return 'no answer';
  const sorted = [...times].sort((a, b) => a - b);
  return `p50 ${sorted[Math.floor((sorted.length - 1) / 2)]} ms, max ${sorted.at(-1)} ms (${times.length} answers)`;
}

function postgresMissing(): string | undefined {
  return postgresBinDir() === undefined ? 'PostgreSQL server binaries (initdb) are not installed' : undefined;
}

async function terminateBackends(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    // The cluster is the harness's own: every other client backend is the service's.
    const result = await client.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    );
    return result.rowCount ?? 0;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function temporaryDirectory(cleanup: Cleanup): string {
  const dir = mkdtempSync(join(tmpdir(), 'plants-chaos-'));
  cleanup.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// ---------------------------------------------------------------------------------------------
// Running a fault

/** Runs one fault from start to finish; throws only for a broken harness (a service that cannot start at all). */
export async function runFault(fault: FaultDefinition, options: ChaosOptions): Promise<FaultFigures> {
  const figures = emptyFigures(fault.name);
  const skip = await fault.unavailable();
  if (skip !== undefined) return { ...figures, skipped: skip };
  const log = options.log ?? (() => undefined);
  // Notes are counted by kind (ids left out), so a thousand resets make one line.
  const notes = new Map<string, number>();
  const note = (line: string) => {
    const kind = line.replace(/\/plants\/\d+/g, '/plants/{id}');
    if (notes.has(kind) || notes.size < MAX_NOTE_KINDS) notes.set(kind, (notes.get(kind) ?? 0) + 1);
    else notes.set('(other notes left out)', (notes.get('(other notes left out)') ?? 0) + 1);
  };
  const cleanup = new Cleanup();
  everything.teardown(() => cleanup.run());
  let service: Service | undefined;
  let load: Load | undefined;
  try {
    const prepared = await fault.prepare({ options, cleanup });
    service = new Service(cleanup, {
      ...serverEnv('/nonexistent'),
      API_TOKENS: CHAOS_TOKEN,
      RATE_LIMIT_PER_MINUTE: '',
      REDIS_URL: '',
      AUTH_FAILURES_PER_MINUTE: '0',
      ...prepared.env,
    });
    const supervised = service;
    service.onUnexpectedExit = (exit, stderr) => {
      figures.processExits++;
      note(`the service exited: ${JSON.stringify(exit)}; ${lastLines(stderr)}`);
      // A supervisor restarts a process that died: so does the harness, once the fault is over (a few times at most).
      if (!supervised.faultActive && figures.processExits <= MAX_RESTARTS) supervised.start().catch((error: Error) => note(`restart failed: ${error.message}`));
    };
    await service.start();

    load = new Load(service, figures, options, note);
    const writers = load.start(fault.clients ?? options.clients);
    log(`${fault.name}: service up, ${fault.clients ?? options.clients} writers`);
    await load.acknowledgedAtLeast(options.settleWrites, options.recoverDeadlineMs);
    await load.everyClientAnswered(options.recoverDeadlineMs);

    log(`${fault.name}: fault begins`);
    service.faultActive = true;
    await prepared.run({ options, cleanup, service, figures, note });
    service.faultActive = false;
    const faultEnd = performance.now();
    if (!service.alive()) await service.start().catch((error: Error) => note(`restart failed: ${error.message}`));

    figures.recoverMs = await load.pollRecovery(faultEnd);
    log(`${fault.name}: fault over, ${figures.recoverMs === undefined ? 'no successful write' : `recovered in ${figures.recoverMs} ms`}`);
    await load.acknowledgedAtLeast(figures.acknowledged + options.settleWrites, options.recoverDeadlineMs);
    load.stop();
    await writers;

    const exit = await service.stop('SIGTERM');
    if (exit.code !== 0) note(`the service did not stop cleanly at the end: ${JSON.stringify(exit)}`);
    // Read back through a fresh instance on the same store: nothing the faulted one remembers (a cache, a
    // guard's blocked address) can stand in for the store, and an acknowledged write must survive a restart.
    try {
      await prepared.beforeReadBack?.();
      await service.start();
      figures.lost = await load.readBack();
      await service.stop('SIGTERM');
    } catch (error) {
      // Unverifiable counts as lost: the table must never claim what was not checked.
      figures.lost = load.acknowledgedPlants();
      note(`no instance to read back through: ${(error as Error).message.split('\n')[0]}`);
    }
  } finally {
    load?.stop();
    // First the service, through its supervisor, so its end is not taken for a crash; then the rest.
    await service?.close();
    const failures = await cleanup.run();
    for (const failure of failures) note(`cleanup: ${failure}`);
    if (figures.refused > 0) note(`${figures.refused} connections refused while no instance listened (not sent, not counted)`);
    figures.notes = [...notes].map(([line, count]) => (count > 1 ? `${count}x ${line}` : line));
  }
  return figures;
}

export function emptyFigures(fault: string): FaultFigures {
  return {
    fault,
    sent: 0,
    acknowledged: 0,
    lost: 0,
    outsideContract: 0,
    unanswered: 0,
    otherErrors: 0,
    processExits: 0,
    recoverMs: undefined,
    slowestWriteMs: 0,
    slowestHealthMs: 0,
    refused: 0,
    notes: [],
  };
}

const MAX_RESTARTS = 5;
const MAX_NOTE_KINDS = 15;

/** The service process, restarted when asked; counts exits nobody asked for. */
export class Service {
  faultActive = false;
  onUnexpectedExit: (exit: Exit, stderr: string) => void = () => undefined;
  #server: RunningServer | undefined;
  #generation = 0;
  #dead = true;
  #expectedExit = false;
  #closed = false;
  #changed = withResolvers();

  readonly cleanup: Cleanup;
  readonly env: ServerEnv;

  constructor(cleanup: Cleanup, env: ServerEnv) {
    this.cleanup = cleanup;
    this.env = env;
  }

  url(): string {
    if (this.#server === undefined) throw new Error('the service was never started');
    return this.#server.url;
  }

  generation(): number {
    return this.#generation;
  }

  alive(): boolean {
    return !this.#dead;
  }

  async start(): Promise<void> {
    if (this.#closed) throw new Error('the run is over: no more instances');
    const server = await startServer(this.cleanup, this.env);
    this.#server = server;
    this.#dead = false;
    this.#expectedExit = false;
    this.#generation++;
    server.exited.then((exit) => {
      if (this.#server !== server) return;
      this.#dead = true;
      if (!this.#expectedExit) this.onUnexpectedExit(exit, server.stderr());
      this.#notify();
    });
    this.#notify();
  }

  /** Stops the current instance (SIGKILL after 30 s); resolves with its exit. */
  async stop(signal: NodeJS.Signals): Promise<Exit> {
    const server = this.#server;
    if (server === undefined) return { code: 0, signal: null };
    this.#expectedExit = true;
    const timer = setTimeout(() => server.child.kill('SIGKILL'), 30_000);
    try {
      return await server.stop(signal);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Kills the current instance and refuses to start another: the end of the run. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.stop('SIGKILL');
  }

  /** Resolves when an instance newer than `generation` starts or an instance dies, or when `stopped` settles. */
  changedSince(generation: number, stopped: Promise<void>): Promise<void> {
    if (this.#generation !== generation) return Promise.resolve();
    return Promise.race([this.#changed.promise, stopped]);
  }

  #notify(): void {
    this.#changed.resolve();
    this.#changed = withResolvers();
  }
}

interface PlantModel {
  /** The names the plant may have when read back; null: absent. One after an acknowledged write, more after unanswered ones. */
  allowed: Set<string | null>;
  acknowledged: boolean;
}

/** The writers: each creates plants and replaces its own, one request at a time on its own keep-alive connection. */
class Load {
  readonly plants = new Map<number, PlantModel>();
  #nextId = 1;
  #running = true;
  readonly #stopped = withResolvers();
  readonly #ackWaiters = new Set<() => void>();
  // Clients (writers and the probe) whose connection has brought back a first answer.
  readonly #answered = new Set<number | 'probe'>();
  #clients = 0;
  readonly #connectedWaiters = new Set<() => void>();

  readonly service: Service;
  readonly figures: FaultFigures;
  readonly options: ChaosOptions;
  readonly note: (line: string) => void;

  constructor(service: Service, figures: FaultFigures, options: ChaosOptions, note: (line: string) => void) {
    this.service = service;
    this.figures = figures;
    this.options = options;
    this.note = note;
  }

  start(clients: number): Promise<void> {
    this.#clients = clients + 1;
    const writers = Array.from({ length: clients }, (_, index) => this.#writer(index));
    return Promise.all([...writers, this.#healthProbe()]).then(() => undefined);
  }

  stop(): void {
    this.#running = false;
    this.#stopped.resolve();
  }

  /** Resolves once `count` writes are acknowledged, or after `deadlineMs` (then with false). */
  acknowledgedAtLeast(count: number, deadlineMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const check = () => {
        if (this.figures.acknowledged < count) return;
        clearTimeout(timer);
        this.#ackWaiters.delete(check);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#ackWaiters.delete(check);
        this.note(`only ${this.figures.acknowledged} writes acknowledged after ${deadlineMs} ms, ${count} awaited`);
        resolve(false);
      }, deadlineMs);
      this.#ackWaiters.add(check);
      check();
    });
  }

  /**
   * Resolves once every client has had a first answer on its kept-alive connection (or after
   * `deadlineMs`). A fault begins only then: the faults are about busy kept-alive clients, and on a
   * loaded machine Node may not yet have accepted every connection a second after it was opened.
   * Such a connection, still in the kernel's accept queue when a stopping instance closes its
   * listener, is reset by Linux: a limit README's "Stopping" states, not what this fault measures.
   */
  everyClientAnswered(deadlineMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const check = () => {
        if (this.#answered.size < this.#clients) return;
        clearTimeout(timer);
        this.#connectedWaiters.delete(check);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#connectedWaiters.delete(check);
        this.note(`only ${this.#answered.size} of ${this.#clients} clients answered after ${deadlineMs} ms`);
        resolve(false);
      }, deadlineMs);
      this.#connectedWaiters.add(check);
      check();
    });
  }

  #markAnswered(client: number | 'probe'): void {
    if (this.#answered.has(client)) return;
    this.#answered.add(client);
    for (const waiter of [...this.#connectedWaiters]) waiter();
  }

  /** Creates plants one after another on fresh connections from `since` until one is acknowledged; ms, or undefined past the deadline. */
  async pollRecovery(since: number): Promise<number | undefined> {
    const deadline = since + this.options.recoverDeadlineMs;
    while (performance.now() < deadline) {
      const agent = new Agent({ keepAlive: false });
      const acknowledged = await this.#create(agent).finally(() => agent.destroy());
      if (acknowledged === 'ok') return Math.round(performance.now() - since);
      await pause(25);
    }
    return undefined;
  }

  acknowledgedPlants(): number {
    return [...this.plants.values()].filter((plant) => plant.acknowledged).length;
  }

  /** Reads back every plant with an acknowledged write; returns how many are not as acknowledged. */
  async readBack(): Promise<number> {
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    const queue = [...this.plants].filter(([, plant]) => plant.acknowledged);
    let lost = 0;
    const reader = async () => {
      for (let entry = queue.pop(); entry !== undefined; entry = queue.pop()) {
        const [id, plant] = entry;
        const found = await this.#readPlant(agent, id);
        if (found !== undefined && plant.allowed.has(found)) continue;
        lost++;
        this.note(`plant ${id}: read back ${found === undefined ? 'failed' : JSON.stringify(found)}, acknowledged ${JSON.stringify([...plant.allowed])}`);
      }
    };
    try {
      await Promise.all(Array.from({ length: 8 }, reader));
    } finally {
      agent.destroy();
    }
    return lost;
  }

  // The plant's name (null: 404), or undefined when three tries got no usable answer.
  async #readPlant(agent: Agent, id: number): Promise<string | null | undefined> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const outcome = await send(this.service.url(), agent, 'GET', `/plants/${id}`, CHAOS_TOKEN, undefined, this.options.requestTimeoutMs);
      if (outcome.kind === 'answer' && outcome.status === 404) return null;
      if (outcome.kind === 'answer' && outcome.status === 200) return (JSON.parse(outcome.body) as { name: string }).name;
      await pause(100);
    }
    return undefined;
  }

  async #writer(index: number): Promise<void> {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const own: number[] = [];
    let writes = 0;
    try {
      while (this.#running && this.figures.sent < this.options.maxRequests) {
        const generation = this.service.generation();
        if (!this.service.alive()) {
          await this.service.changedSince(generation, this.#stopped.promise);
          continue;
        }
        const id = own.length > 0 && writes++ % 3 === 2 ? own[writes % own.length]! : undefined;
        const result = id === undefined ? await this.#create(agent, own) : await this.#replace(agent, id, `w${index} r${writes}`);
        if (result !== 'refused') this.#markAnswered(index);
        if (result === 'refused') await this.service.changedSince(generation, this.#stopped.promise);
        // A client backs off a little after a failure instead of spinning on it.
        else if (result === 'failed') await pause(20);
      }
    } finally {
      agent.destroy();
    }
  }

  // Is the process answering at all while writes wait? One probe at a time, as a load balancer's health check.
  async #healthProbe(): Promise<void> {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      while (this.#running) {
        const generation = this.service.generation();
        const outcome = this.service.alive()
          ? await send(this.service.url(), agent, 'GET', '/healthz', undefined, undefined, this.options.requestTimeoutMs)
          : ({ kind: 'refused' } as const);
        if (this.#record('GET', '/healthz', outcome, false) === 'refused') {
          await this.service.changedSince(generation, this.#stopped.promise);
        } else {
          this.#markAnswered('probe');
          await pause(50);
        }
      }
    } finally {
      agent.destroy();
    }
  }

  async #create(agent: Agent, own?: number[]): Promise<'ok' | 'failed' | 'refused'> {
    const id = this.#nextId++;
    const name = `plant ${id}`;
    const plant: PlantModel = { allowed: new Set([null]), acknowledged: false };
    this.plants.set(id, plant);
    const result = await this.#write(agent, 'POST', '/plants', JSON.stringify({ id, name }), plant, name);
    if (result === 'ok') own?.push(id);
    return result;
  }

  #replace(agent: Agent, id: number, name: string): Promise<'ok' | 'failed' | 'refused'> {
    return this.#write(agent, 'PUT', `/plants/${id}`, JSON.stringify({ name }), this.plants.get(id)!, name);
  }

  async #write(agent: Agent, method: string, path: string, body: string, plant: PlantModel, name: string): Promise<'ok' | 'failed' | 'refused'> {
    const outcome = await send(this.service.url(), agent, method, path, CHAOS_TOKEN, body, this.options.requestTimeoutMs);
    const verdict = this.#record(method, path, outcome, true);
    if (verdict === 'ok') {
      plant.allowed = new Set([name]);
      plant.acknowledged = true;
      for (const waiter of [...this.#ackWaiters]) waiter();
    } else if (verdict === 'failed') {
      // Not acknowledged, so nobody was told it happened: either state is acceptable.
      plant.allowed.add(name);
    }
    return verdict;
  }

  #record(method: string, path: string, outcome: Outcome, write: boolean): 'ok' | 'failed' | 'refused' {
    const figures = this.figures;
    if (outcome.kind === 'refused') {
      figures.refused++;
      return 'refused';
    }
    figures.sent++;
    if (outcome.kind === 'unanswered') {
      figures.unanswered++;
      this.note(`${method} ${path}: no answer (${outcome.reason})`);
      return 'failed';
    }
    if (write) figures.slowestWriteMs = Math.max(figures.slowestWriteMs, outcome.ms);
    else figures.slowestHealthMs = Math.max(figures.slowestHealthMs, outcome.ms);
    const problems = answerProblems(method, path, outcome);
    if (problems.length > 0) {
      figures.outsideContract++;
      this.note(problems.join('; '));
    }
    if (!write) return outcome.status === 200 ? 'ok' : 'failed';
    if (outcome.status >= 200 && outcome.status < 300) {
      figures.acknowledged++;
      return 'ok';
    }
    if (outcome.status !== 503) {
      figures.otherErrors++;
      // Counted by kind: "retry in 57 seconds" and "retry in 58 seconds" are one kind.
      this.note(`${method} ${path}: ${outcome.status} ${outcome.body.slice(0, 200).replace(/\d+/g, 'N')}`);
    }
    return 'failed';
  }
}

// ---------------------------------------------------------------------------------------------
// Requests and answers

export type Outcome =
  | { kind: 'answer'; status: number; headers: IncomingHttpHeaders; body: string; ms: number }
  | { kind: 'refused' }
  | { kind: 'unanswered'; reason: string };

/** One request, bounded by `timeoutMs`; never rejects. */
export function send(
  base: string,
  agent: Agent,
  method: string,
  path: string,
  token: string | undefined,
  body: string | undefined,
  timeoutMs: number,
): Promise<Outcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const req = request(new URL(path, base), {
      method,
      agent,
      headers: {
        ...(token !== undefined && { authorization: `Bearer ${token}` }),
        ...(body !== undefined && { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }),
      },
    });
    const timer = setTimeout(() => {
      settle({ kind: 'unanswered', reason: `no answer within ${timeoutMs} ms` });
      req.destroy();
    }, timeoutMs);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('error', () => undefined);
      res.on('close', () => {
        if (res.complete) settle({ kind: 'answer', status: res.statusCode!, headers: res.headers, body: text, ms: Math.round(performance.now() - started) });
        else settle({ kind: 'unanswered', reason: `the answer (${res.statusCode}) broke off` });
      });
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') settle({ kind: 'refused' });
      // Which connection broke says whose it was: a kept-alive one the server closed, or a fresh one it never served.
      else settle({ kind: 'unanswered', reason: `${error.code ?? error.message} on a ${req.reusedSocket ? 'kept-alive' : 'new'} connection` });
    });
    req.end(body);
  });
}

/** What openapi.yaml does not document about the answer: contractProblems, plus its headers. */
export function answerProblems(method: string, path: string, answer: Extract<Outcome, { kind: 'answer' }>): string[] {
  const problems = contractProblems(method, path, { statusCode: answer.status, headers: answer.headers, body: answer.body });
  // Every documented refusal to serve "now" tells the client when to come back.
  if (answer.status === 503 && answer.headers['retry-after'] === undefined) problems.push(`${method} ${path} 503 without Retry-After`);
  for (const [name, schema] of Object.entries(documentedHeaders(method, path, answer.status))) {
    const value = answer.headers[name.toLowerCase()];
    if (schema?.type === 'integer' && typeof value === 'string' && !/^\d+$/.test(value)) {
      problems.push(`${method} ${path} ${answer.status}: header ${name} "${value}" is not an integer`);
    }
  }
  return problems;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed YAML or JSON walked by key: its shape is what this code checks
type Json = Record<string, any>;

function documentedHeaders(method: string, path: string, status: number): Record<string, Json | undefined> {
  const pathname = new URL(path, 'http://localhost').pathname;
  for (const [template, item] of Object.entries<Json>(spec.paths)) {
    if (!new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(pathname)) continue;
    let response: Json | undefined = item[method.toLowerCase()]?.responses?.[String(status)];
    if (typeof response?.$ref === 'string') response = resolve(response.$ref);
    const headers: Json = response?.headers ?? {};
    return Object.fromEntries(Object.entries(headers).map(([name, header]) => [name, (header.$ref ? resolve(header.$ref) : header).schema]));
  }
  return {};
}

function resolve(ref: string): Json {
  return ref.slice(2).split('/').reduce<Json>((node, segment) => node[segment.replaceAll('~1', '/')], spec);
}

// ---------------------------------------------------------------------------------------------
// Small things

export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function withResolvers(): { promise: Promise<void>; resolve: () => void } {
  return Promise.withResolvers<void>();
}

// What a dying process said: its first line naming an error (Node's "Unhandled 'error' event", say), and its last.
function lastLines(text: string): string {
  const lines = text.trim().split('\n').map((line) => line.trim()).filter(Boolean);
  if (lines.length === 0) return 'no stderr';
  const first = lines.find((line) => /error/i.test(line)) ?? lines[0]!;
  return `stderr: ${first.slice(0, 300)}${first === lines.at(-1) ? '' : ` ... ${lines.at(-1)!.slice(0, 200)}`}`;
}

/** The figures as a Markdown table. */
export function formatTable(rows: readonly FaultFigures[]): string {
  const blank = (fault: string, why: string) => [fault, why, '', '', '', '', '', '', '', '', ''];
  const header = ['fault', 'sent', 'acknowledged', 'lost', 'outside contract', 'unanswered', 'other errors', 'process exits', 'recover (ms)', 'slowest write (ms)', 'slowest /healthz (ms)'];
  const lines = rows.map((row) =>
    row.skipped !== undefined
      ? blank(row.fault, `skipped: ${row.skipped}`)
      : row.failed !== undefined
        ? blank(row.fault, `harness failed: ${row.failed}`)
        : [
          row.fault,
          row.sent,
          row.acknowledged,
          row.lost,
          row.outsideContract,
          row.unanswered,
          row.otherErrors,
          row.processExits,
          row.recoverMs ?? 'never',
          row.slowestWriteMs,
          row.slowestHealthMs,
        ].map(String),
  );
  return [header, header.map(() => '---'), ...lines].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}
