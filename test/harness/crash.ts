// Repeated crash safety, shared by `npm run crash` (scripts/crash-cycles.ts) and test/system/crash-cycles.test.ts.
// Each cycle starts the real server (node src/entry.js, PORT=0) on the same database, lets concurrent
// writers create, replace and delete plants of their own over real sockets, and SIGKILLs the process
// after a random delay. Between the kill and the restart a SQLite file must pass PRAGMA integrity_check;
// after the restart every plant must be in the state its last acknowledged write (200/204) left it in.
// A write whose answer never came (in flight at the kill) may or may not have been applied, but the
// plant must then be in its old or its new state, nothing else. The random choices (operations, kill
// delays) come from a seeded generator, so a failing run can be replayed with the same seed; the
// interleaving of requests with the kill still depends on timing.
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { encodeCursor } from '../../src/contract/paging.ts';
import { REPO_ROOT } from './paths.ts';
import { Cleanup, startServer, type ServerEnv, type ServerProcess } from './process.ts';

/** The first id handed out: above 2^53, so ids only survive if int64 is handled exactly end to end. */
const BASE_ID = 9_007_199_254_740_993n;
const TOKEN = 'crash-cycles-token-0123456789abcdef';
const TAGS: (string | undefined)[] = [undefined, 'fern', 'aroid', 'cactus', ''];
const NAME_SUFFIXES = ['', ' é', ' 🌱', ' "quoted"', ' back\\slash'];
const LISTING_PAGE = 1000;

export interface CrashCycleOptions {
  cycles: number;
  writers: number;
  seed: number;
  /** sqlite:<path> or postgres://...; default a fresh SQLite file in a temporary directory, removed unless a check failed. */
  databaseUrl?: string;
  /** The kill comes after a delay drawn uniformly from [minKillDelayMs, maxKillDelayMs), counted from the moment the writers start. */
  minKillDelayMs?: number;
  maxKillDelayMs?: number;
  /** One line per cycle and a few about the run; default: none. */
  log?: (line: string) => void;
  /** Called after each kill (and integrity check), before the restart: lets a test tamper with the file. */
  afterKill?: (context: AfterKillContext) => void | Promise<void>;
}

export interface AfterKillContext {
  cycle: number;
  /** The SQLite file, or undefined on PostgreSQL. */
  databasePath: string | undefined;
  /** Plants whose state is certain (their last write was acknowledged), with that state; null: deleted. */
  acknowledged: ReadonlyMap<bigint, PlantContent | null>;
}

export interface PlantContent {
  name: string;
  tag?: string;
}

export interface CycleFigures {
  cycle: number;
  killDelayMs: number;
  /** From spawning to the "Server listening" line, for the server that recovered from this cycle's kill. */
  restartMs: number;
  acknowledged: { create: number; replace: number; delete: number };
  /** Writes sent before the kill whose answer never came. */
  inFlightAtKill: number;
  /** Of those, found applied / not applied after the restart. */
  inFlightApplied: number;
  inFlightNotApplied: number;
  /** Plants compared with the model after the restart (the whole run's, through the listing), and GETs by id. */
  plantsChecked: number;
  getsChecked: number;
  integrity: string;
  violations: number;
}

export interface CrashRunResult {
  seed: number;
  databaseUrl: string;
  cycles: CycleFigures[];
  acknowledged: number;
  inFlightAtKill: number;
  violations: string[];
  /** The temporary directory kept because a check failed; undefined otherwise. */
  keptDirectory?: string;
}

type State = PlantContent | null;

interface ModelPlant {
  id: bigint;
  owner: number;
  /** The states the plant may be found in: one after an acknowledged write, two after an unanswered one. */
  allowed: State[];
  /** Set while an unanswered write is open: the state it would have left. */
  unanswered?: State;
  /** What the plant went through, for violation messages. */
  history: string[];
  /** Touched in the current cycle: checked with GET /plants/{id} after the restart. */
  touched: boolean;
}

interface Reply {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

interface RunningServer extends ServerProcess {
  host: string;
  port: number;
}

/** Runs the cycles; never throws for a failed check, only for a broken harness (a server that cannot start, ...). */
export async function runCrashCycles(options: CrashCycleOptions): Promise<CrashRunResult> {
  const log = options.log ?? (() => undefined);
  const minDelay = options.minKillDelayMs ?? 0;
  const maxDelay = Math.max(options.maxKillDelayMs ?? 500, minDelay);
  const temporary = options.databaseUrl === undefined ? mkdtempSync(join(tmpdir(), 'plants-crash-')) : undefined;
  const databaseUrl = options.databaseUrl ?? `sqlite:${join(temporary!, 'plants.db')}`;
  const databasePath = sqlitePath(databaseUrl);
  const env = {
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: databaseUrl,
    API_TOKENS: TOKEN,
    LOG_LEVEL: 'info', // the listening line is an info line
    RATE_LIMIT_PER_MINUTE: '',
    REDIS_URL: '',
    AUTH_FAILURES_PER_MINUTE: '0',
    SHUTDOWN_DELAY: '0s', // the final SIGTERM stops at once
  };

  const violations: string[] = [];
  const figures: CycleFigures[] = [];
  const model = new Map<bigint, ModelPlant>();
  let nextId = BASE_ID;
  let writeNumber = 0;
  let server: RunningServer | undefined;
  const cleanup = new Cleanup();
  // A harness that dies (a test timing out, an exception) must not leave a server behind.
  const killOnExit = () => server?.child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const report = (message: string) => {
    violations.push(message);
    // All of them are returned; the log shows the first ones, which usually tell the story.
    if (violations.length <= 50) log(`  VIOLATION ${message}`);
    else if (violations.length === 51) log('  (further violations are not printed; the summary counts them)');
  };

  try {
    server = (await startTimed(env, cleanup)).server;
    // A database given by URL may hold plants already: take ids above every existing one, and judge only those.
    const existing = await listPlants(server, BASE_ID - 1n);
    for (const id of existing.keys()) if (id >= nextId) nextId = id + 1n;
    const firstId = nextId;
    if (existing.size > 0) log(`${existing.size} plants already in the database; this run uses ids from ${firstId}`);

    for (let cycle = 1; cycle <= options.cycles; cycle++) {
      const killRandom = rng(options.seed, cycle, 0);
      const killDelayMs = Math.floor(minDelay + killRandom() * (maxDelay - minDelay));
      for (const plant of model.values()) plant.touched = false;

      // Writers: each owns the plants it created; one request at a time per writer, so per plant.
      const live: bigint[][] = Array.from({ length: options.writers }, () => []);
      for (const plant of model.values()) if (plant.allowed[0] !== null) live[plant.owner]!.push(plant.id);
      const acknowledged = { create: 0, replace: 0, delete: 0 };
      let inFlightAtKill = 0;
      let killed = false;
      const agent = new Agent({ keepAlive: true, maxSockets: options.writers });
      const current = server;

      const writer = async (w: number): Promise<void> => {
        const random = rng(options.seed, cycle, w + 1);
        const own = live[w]!;
        // eslint-disable-next-line no-unmodified-loop-condition -- the kill, in another task, sets it while this loop awaits
        while (!killed) {
          const roll = random();
          const kind = own.length === 0 || roll < 0.45 ? 'create' : roll < 0.8 ? 'replace' : 'delete';
          const content: PlantContent = randomContent(random, `w${w} c${cycle} #${++writeNumber}`);
          let plant: ModelPlant;
          let index = -1;
          if (kind === 'create') {
            plant = { id: nextId++, owner: w, allowed: [null], history: [], touched: true };
            model.set(plant.id, plant);
          } else {
            index = Math.floor(random() * own.length);
            plant = model.get(own[index]!)!;
            plant.touched = true;
          }
          const before = plant.allowed[0]!;
          const after: State = kind === 'delete' ? null : content;
          const description = `${kind} ${describe(after)} in cycle ${cycle}`;
          plant.unanswered = after;
          let reply: Reply;
          try {
            reply =
              kind === 'create'
                ? await send(current, agent, 'POST', '/plants', createBody(plant.id, content))
                : kind === 'replace'
                  ? await send(current, agent, 'PUT', `/plants/${plant.id}`, replaceBody(content))
                  : await send(current, agent, 'DELETE', `/plants/${plant.id}`);
          } catch (error) {
            // No answer: old or new state, to be settled after the restart.
            plant.allowed = [before, after];
            plant.history.push(`${description}: no answer (${killed ? 'in flight at the kill' : (error as Error).message})`);
            if (!killed) report(`cycle ${cycle}: plant ${plant.id}: ${kind} failed while the server should be up: ${(error as Error).message}`);
            else inFlightAtKill++;
            if (index >= 0) removeAt(own, index);
            return;
          }
          plant.unanswered = undefined;
          const problem = judgeWriteReply(kind, plant.id, content, reply);
          if (problem !== undefined) {
            // Answered, but not as a successful write: nobody was told it happened, so either state is acceptable.
            plant.allowed = [before, after];
            plant.history.push(`${description}: unexpected answer ${reply.status}`);
            report(`cycle ${cycle}: plant ${plant.id}: ${description}: ${problem}`);
            if (index >= 0) removeAt(own, index);
            continue;
          }
          acknowledged[kind]++;
          plant.allowed = [after];
          plant.history.push(`${description}: acknowledged`);
          if (kind === 'create') own.push(plant.id);
          else if (kind === 'delete') removeAt(own, index);
        }
      };

      const writersDone = Promise.all(Array.from({ length: options.writers }, (_, w) => writer(w)));
      const timer = setTimeout(() => {
        killed = true;
        current.child.kill('SIGKILL');
      }, killDelayMs);
      // The timer kills the server; one that died before it also ends the writers (their requests fail).
      const exit = await current.exited;
      clearTimeout(timer);
      killed = true;
      await writersDone;
      agent.destroy();
      if (exit.signal !== 'SIGKILL') {
        report(`cycle ${cycle}: the server exited before the kill (${JSON.stringify(exit)}); stderr: ${current.stderr().slice(-2000)}`);
      }

      let integrity = 'n/a';
      if (databasePath !== undefined) {
        integrity = integrityCheck(databasePath);
        if (integrity !== 'ok') report(`cycle ${cycle}: PRAGMA integrity_check after the kill: ${integrity}`);
      }
      await options.afterKill?.({
        cycle,
        databasePath,
        acknowledged: new Map([...model.values()].filter((p) => p.allowed.length === 1).map((p) => [p.id, p.allowed[0]!])),
      });

      const restarted = await startTimed(env, cleanup);
      server = restarted.server;
      const before = violations.length;
      const checked = await verify(server, model, firstId, cycle, report);
      figures.push({
        cycle,
        killDelayMs,
        restartMs: restarted.startupMs,
        acknowledged,
        inFlightAtKill,
        inFlightApplied: checked.applied,
        inFlightNotApplied: checked.notApplied,
        plantsChecked: model.size,
        getsChecked: checked.gets,
        integrity,
        violations: violations.length - before,
      });
      log(formatCycle(figures.at(-1)!, options.cycles));
    }

    // The last recovered server must still stop cleanly.
    const exit = await server.stop('SIGTERM');
    server = undefined;
    if (exit.code !== 0) report(`the recovered server did not exit 0 on SIGTERM: ${JSON.stringify(exit)}`);
    if (databasePath !== undefined) {
      const integrity = integrityCheck(databasePath);
      if (integrity !== 'ok') report(`PRAGMA integrity_check after the final clean stop: ${integrity}`);
    }
  } catch (error) {
    // A broken harness (a server that would not start, a failed listing): keep the database to look at.
    if (temporary === undefined) throw error;
    throw new Error(`${(error as Error).message}\n(the database was kept in ${temporary})`, { cause: error });
  } finally {
    process.removeListener('exit', killOnExit);
    await cleanup.run();
  }

  const keep = temporary !== undefined && violations.length > 0;
  if (temporary !== undefined && !keep) rmSync(temporary, { recursive: true, force: true });
  return {
    seed: options.seed,
    databaseUrl,
    cycles: figures,
    acknowledged: figures.reduce((sum, f) => sum + f.acknowledged.create + f.acknowledged.replace + f.acknowledged.delete, 0),
    inFlightAtKill: figures.reduce((sum, f) => sum + f.inFlightAtKill, 0),
    violations,
    ...(keep && { keptDirectory: temporary }),
  };
}

/** Compares the restarted server's view with the model, then settles every open write to what was found. */
async function verify(
  server: RunningServer,
  model: Map<bigint, ModelPlant>,
  firstId: bigint,
  cycle: number,
  report: (message: string) => void,
): Promise<{ applied: number; notApplied: number; gets: number }> {
  // Every plant of the run, through the listing; and each plant touched in the cycle, through GET by id.
  const listed = await listPlants(server, firstId - 1n);
  for (const [id, content] of listed) {
    if (!model.has(id)) report(`after cycle ${cycle}: GET /plants lists plant ${id} (${describe(content)}), which no writer ever sent`);
  }
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  const touched = [...model.values()].filter((plant) => plant.touched);
  const fetched = new Map<bigint, State>();
  const queue = [...touched];
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let plant = queue.pop(); plant !== undefined; plant = queue.pop()) {
        const reply = await send(server, agent, 'GET', `/plants/${plant.id}`);
        if (reply.status === 404) fetched.set(plant.id, null);
        else if (reply.status === 200) {
          const body = parse(reply.body) as { id?: string } & PlantContent;
          if (body.id !== String(plant.id)) report(`after cycle ${cycle}: GET /plants/${plant.id} answered id ${body.id}`);
          fetched.set(plant.id, contentOf(body));
        } else report(`after cycle ${cycle}: GET /plants/${plant.id} answered ${reply.status} ${reply.body}`);
      }
    }),
  );
  agent.destroy();

  let applied = 0;
  let notApplied = 0;
  for (const plant of model.values()) {
    const views: [string, State][] = [['GET /plants (listing)', listed.get(plant.id) ?? null]];
    if (fetched.has(plant.id)) views.push([`GET /plants/${plant.id}`, fetched.get(plant.id)!]);
    for (const [via, found] of views) {
      if (!plant.allowed.some((state) => sameState(state, found))) {
        const expected = plant.allowed.map(describe).join(' or ');
        report(
          `after cycle ${cycle}: plant ${plant.id}: ${via} shows ${describe(found)}, expected ${expected}; history: ${plant.history.slice(-4).join('; ')}`,
        );
      }
    }
    const found = fetched.has(plant.id) ? fetched.get(plant.id)! : (listed.get(plant.id) ?? null);
    if (plant.unanswered !== undefined) {
      if (sameState(found, plant.unanswered)) applied++;
      else notApplied++;
      plant.history.push(`after cycle ${cycle}: found ${sameState(found, plant.unanswered) ? 'applied' : 'not applied'}`);
      plant.unanswered = undefined;
    }
    // What the restarted server shows is what is on disk now: the next cycle starts from it.
    plant.allowed = [found];
  }
  return { applied, notApplied, gets: touched.length };
}

/** Every plant with an id above `after`, walking the pages through their Link headers. */
async function listPlants(server: RunningServer, after: bigint): Promise<Map<bigint, PlantContent>> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const plants = new Map<bigint, PlantContent>();
  let path: string | undefined = `/plants?limit=${LISTING_PAGE}&cursor=${encodeCursor(after)}`;
  try {
    while (path !== undefined) {
      const reply = await send(server, agent, 'GET', path);
      if (reply.status !== 200) throw new Error(`GET ${path} answered ${reply.status}: ${reply.body}`);
      for (const plant of parse(reply.body) as ({ id: string } & PlantContent)[]) {
        plants.set(BigInt(plant.id), contentOf(plant));
      }
      const link = reply.headers.link;
      path = typeof link === 'string' ? /^<([^>]+)>;\s*rel="next"$/.exec(link)?.[1] : undefined;
    }
  } finally {
    agent.destroy();
  }
  return plants;
}

function judgeWriteReply(kind: 'create' | 'replace' | 'delete', id: bigint, content: PlantContent, reply: Reply): string | undefined {
  const expectedStatus = kind === 'delete' ? 204 : 200;
  if (reply.status !== expectedStatus) return `answered ${reply.status} ${reply.body.slice(0, 300)}, expected ${expectedStatus}`;
  if (kind === 'delete') return undefined;
  let body: object;
  try {
    body = parse(reply.body) as object;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new TypeError('not an object');
  } catch {
    return `answered ${reply.status} with a body that is not a JSON object: ${reply.body.slice(0, 300)}`;
  }
  // POST answers the Plant, PUT the StoredPlant (with the id); the key order does not matter.
  const expected = canonical(kind === 'create' ? contentOf(content) : { id: String(id), ...contentOf(content) });
  return canonical(body) === expected ? undefined : `answered ${reply.status} ${reply.body.slice(0, 300)}, expected ${expected}`;
}

function canonical(value: object): string {
  return JSON.stringify(value, Object.keys(value).sort());
}

function createBody(id: bigint, content: PlantContent): string {
  // The id as a plain JSON integer, digit for digit: above 2^53 a JS number would change it.
  return `{"id":${id},${replaceBody(content).slice(1)}`;
}

function replaceBody(content: PlantContent): string {
  return JSON.stringify(contentOf(content));
}

function randomContent(random: () => number, label: string): PlantContent {
  const name = `plant ${label}${NAME_SUFFIXES[Math.floor(random() * NAME_SUFFIXES.length)]}`;
  const tag = TAGS[Math.floor(random() * TAGS.length)];
  return tag === undefined ? { name } : { name, tag };
}

function contentOf(value: PlantContent): PlantContent {
  return value.tag === undefined ? { name: value.name } : { name: value.name, tag: value.tag };
}

function sameState(a: State, b: State): boolean {
  if (a === null || b === null) return a === b;
  return a.name === b.name && a.tag === b.tag;
}

function describe(state: State): string {
  return state === null ? 'absent' : JSON.stringify(contentOf(state));
}

/** JSON with every "id" kept as its exact digits (a string): int64 ids above 2^53 do not fit a number. */
function parse(text: string): unknown {
  return JSON.parse(text, (key: string, value: unknown, context?: { source?: string }) =>
    key === 'id' && typeof value === 'number' && context?.source !== undefined ? context.source : value,
  );
}

function removeAt<T>(array: T[], index: number): void {
  array[index] = array.at(-1)!;
  array.pop();
}

function formatCycle(f: CycleFigures, total: number): string {
  const acked = f.acknowledged.create + f.acknowledged.replace + f.acknowledged.delete;
  return [
    `cycle ${String(f.cycle).padStart(String(total).length)}/${total}`,
    `kill after ${String(f.killDelayMs).padStart(4)} ms`,
    `acknowledged ${String(acked).padStart(5)} (create ${f.acknowledged.create}, replace ${f.acknowledged.replace}, delete ${f.acknowledged.delete})`,
    `in flight at kill ${f.inFlightAtKill} (applied ${f.inFlightApplied}, not ${f.inFlightNotApplied})`,
    `restart ${f.restartMs} ms`,
    `checked ${f.plantsChecked} plants (${f.getsChecked} by id)`,
    `integrity ${f.integrity}`,
    `violations ${f.violations}`,
  ].join(' | ');
}

function integrityCheck(path: string): string {
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(path, { readOnly: true });
    const rows = db.prepare('PRAGMA integrity_check').all() as { integrity_check: string }[];
    return rows.map((row) => row.integrity_check).join('; ');
  } catch (error) {
    return `could not run: ${(error as Error).message}`;
  } finally {
    db?.close();
  }
}

function sqlitePath(databaseUrl: string): string | undefined {
  if (!databaseUrl.startsWith('sqlite:')) return undefined;
  const path = databaseUrl.slice('sqlite:'.length);
  if (path === ':memory:' || path === '') throw new Error('crash cycles need a database that outlives the process, not sqlite::memory:');
  // The server runs from the repository root, so a relative path is relative to it.
  return isAbsolute(path) ? path : resolve(REPO_ROOT, path);
}

/** The real server on `env`, with the time from spawning to its "Server listening at" line. */
async function startTimed(env: ServerEnv, cleanup: Cleanup): Promise<{ server: RunningServer; startupMs: number }> {
  const started = performance.now();
  const running = await startServer(cleanup, env);
  const { hostname, port } = new URL(running.url);
  return { server: { ...running, host: hostname, port: Number(port) }, startupMs: Math.round(performance.now() - started) };
}

/** One request; rejects when no complete answer arrives (the connection broke, as it does at a kill). */
function send(server: RunningServer, agent: Agent, method: string, path: string, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: server.host,
        port: server.port,
        method,
        path,
        agent,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          ...(body !== undefined && { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('error', reject);
        res.on('close', () => {
          if (res.complete) resolve({ status: res.statusCode!, body: text, headers: res.headers });
          else reject(new Error(`the answer to ${method} ${path} broke off`));
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A small seeded generator (mulberry32), one independent stream per (seed, cycle, stream). */
export function rng(seed: number, cycle: number, stream: number): () => number {
  let state = mix(mix(mix(seed >>> 0) ^ cycle) ^ (stream * 0x9e3779b9));
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function mix(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}
