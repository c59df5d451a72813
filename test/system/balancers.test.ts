// A rolling restart behind real HAProxy and nginx (Debian's), configured with README's blocks
// verbatim: three instances on one PostgreSQL database, 48 keep-alive clients creating and reading
// without pause, each instance in turn SIGTERMed and replaced on the same port. With each balancer's
// own default retry rules, clients see no error and every acknowledged create is stored.
// README's Kubernetes block is checked against the configuration's defaults.
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.ts';
import { freshSchemaUrl, postgresTestOptions } from '../harness/postgres.ts';
import { readmeBlock } from '../harness/readme-blocks.ts';
import { balancerProgram, startBalancer, type BalancerName } from '../harness/balancers.ts';
import { freePort } from '../harness/ports.ts';
import { serverEnv, startServer, type RunningServer, type ServerEnv } from '../harness/process.ts';
import { skipUnlessCi } from '../harness/system-packages.ts';

// Two rolling restarts, each waiting SHUTDOWN_DELAY and a fresh start three times: past tap's 120 s
// per file when the machine is busy (123 s seen in CI), so this file is given more.
t.setTimeout(240_000);

const TOKEN = 'balancers-test-token-0123456789';
const CLIENTS = 48;
/** Answers each client has had before the first SIGTERM: the load is established everywhere. */
const WARM_UP = 10;
const DEFAULTS = loadConfig({});

const BLOCKS: Record<BalancerName, { marker: string; lang: string }> = {
  haproxy: { marker: 'HAProxy (', lang: 'haproxy' },
  nginx: { marker: 'nginx, inside', lang: 'nginx' },
};

interface Answer {
  status: number;
  body: string;
}

/** One request on the client's own keep-alive connection; rejects on a connection error (a reset, a refusal). */
function send(agent: Agent, url: string, method: 'GET' | 'POST', path: string, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
    if (body !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
    const req = request(`${url}${path}`, { method, agent, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, body: text }));
      response.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

interface Counts {
  sent: number;
  acknowledged: number;
  reads: number;
  errors: string[];
}

/** 48 clients, each on its own keep-alive connection, alternating a create and a read of its last acknowledged plant. */
function load(url: string, prefix: number): { counts: Counts; created: Map<number, string>; warm: Promise<void>; stop: () => Promise<void> } {
  const counts: Counts = { sent: 0, acknowledged: 0, reads: 0, errors: [] };
  const created = new Map<number, string>();
  const state = { running: true };
  let warmed = 0;
  let onWarm: () => void = () => undefined;
  const warm = new Promise<void>((resolve) => (onWarm = resolve));
  const client = async (c: number) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    let last: [number, string] | undefined;
    for (let n = 0; state.running; n++) {
      const reading = last !== undefined && n % 2 === 1;
      const id = prefix + c * 1_000_000 + n;
      const name = `plant ${c}-${n}`;
      counts.sent++;
      try {
        if (reading) {
          const [readId, readName] = last!;
          const answer = await send(agent, url, 'GET', `/plants/${readId}`);
          if (answer.status === 200 && answer.body === JSON.stringify({ id: readId, name: readName })) counts.reads++;
          else counts.errors.push(`client ${c}: GET /plants/${readId}: ${answer.status} ${answer.body}`);
        } else {
          const answer = await send(agent, url, 'POST', '/plants', JSON.stringify({ id, name }));
          if (answer.status === 200 && answer.body === JSON.stringify({ name })) {
            counts.acknowledged++;
            created.set(id, name);
            last = [id, name];
          } else counts.errors.push(`client ${c}: POST /plants ${id}: ${answer.status} ${answer.body}`);
        }
      } catch (error) {
        counts.errors.push(`client ${c}: ${reading ? 'GET' : 'POST'}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
      }
      if (n === WARM_UP && ++warmed === CLIENTS) onWarm();
    }
    agent.destroy();
  };
  const clients = Array.from({ length: CLIENTS }, (_, c) => client(c));
  return {
    counts,
    created,
    warm,
    stop: async () => {
      state.running = false;
      await Promise.all(clients);
    },
  };
}

/** Lists every plant directly from an instance, page by page (Link rel="next"); answers the acknowledged creates not stored as acknowledged. */
async function missingOf(url: string, created: Map<number, string>): Promise<string[]> {
  const stored = new Map<number, string>();
  for (let next: string | undefined = '/plants?limit=1000'; next !== undefined; ) {
    const response = await fetch(new URL(next, url), { headers: { authorization: `Bearer ${TOKEN}` } });
    if (response.status !== 200) return [`listing answered ${response.status} ${await response.text()}`];
    for (const plant of (await response.json()) as { id: number; name: string }[]) stored.set(plant.id, plant.name);
    next = /^<([^>]+)>; rel="next"$/.exec(response.headers.get('link') ?? '')?.[1];
  }
  return [...created].filter(([id, name]) => stored.get(id) !== name).map(([id, name]) => `${id} (${name}): ${stored.get(id) ?? 'absent'}`);
}

/** Resolves once `server` has served a request to /plants: the balancer routes to it again. */
function routedTo(server: RunningServer): Promise<unknown> {
  return server.waitFor('stdout', /"url":"\/plants.*"msg":"request completed"/);
}

for (const name of ['haproxy', 'nginx'] as const) {
  const program = balancerProgram(name);
  const skip = skipUnlessCi('missing' in program ? program.missing : undefined);
  const pgOptions = await postgresTestOptions();
  t.test(`rolling restart of three instances behind ${name}: no client-visible error, nothing acknowledged lost`, { skip: skip || pgOptions.skip }, async (t) => {
    if ('missing' in program) return t.fail(program.missing);
    const dir = t.testdir();
    const ports = await Promise.all([freePort(), freePort(), freePort()]);
    const base: ServerEnv = serverEnv(dir, { DATABASE_URL: await freshSchemaUrl(), API_TOKENS: TOKEN });
    delete base.SHUTDOWN_DELAY; // the default, as README's blocks assume
    const envFor = (port: number) => ({ ...base, PORT: String(port) });
    const instances = await Promise.all(ports.map((port) => startServer(t, envFor(port))));
    const block = readmeBlock(BLOCKS[name].marker, BLOCKS[name].lang);
    const balancer = await startBalancer(t, name, program.path, join(dir, name), block, ports);

    // A timeline, wall-clock times included, to set beside the balancer's own log when a client saw an error.
    const started = Date.now();
    const phases: string[] = [];
    const mark = (what: string) => phases.push(`${what} ${Date.now() - started}ms (${new Date().toISOString().slice(11, 23)})`);
    const traffic = load(balancer.url, name === 'haproxy' ? 1e12 : 2e12);
    await traffic.warm;
    mark('warm');
    for (let i = 0; i < instances.length; i++) {
      const old = instances[i]!;
      const exit = await old.stop('SIGTERM');
      mark(`${i} exited`);
      const at = (msg: string) => {
        const time = new RegExp(`"time":(\\d+).*"msg":"${msg}`).exec(old.stdout())?.[1];
        return time === undefined ? 'never' : new Date(Number(time)).toISOString().slice(11, 23);
      };
      phases.push(`${i}: shutting down at ${at('shutting down')}, stopped at ${at('stopped cleanly')}`);
      if (exit.code !== 0) t.fail(`instance ${i} exited ${JSON.stringify(exit)}: ${old.stderr()}`);
      instances[i] = await startServer(t, envFor(ports[i]!));
      mark(`${i} listening`);
      await routedTo(instances[i]!);
      mark(`${i} routed to`);
    }
    await traffic.stop();

    const { counts } = traffic;
    const missing = await missingOf(instances[0]!.url, traffic.created);
    mark('read back');
    t.comment(phases.join(', '));
    t.comment(
      `${name}: ${counts.sent} requests sent, ${counts.acknowledged} creates acknowledged, ${counts.reads} reads answered, ` +
        `${counts.errors.length} client-visible errors, ${missing.length} acknowledged creates lost`,
    );
    t.ok(counts.acknowledged > CLIENTS * WARM_UP, 'the clients kept creating throughout');
    t.same(counts.errors.slice(0, 20), [], `no client-visible error (${counts.errors.length})`);
    if (counts.errors.length > 0) t.comment(`${name} said:\n${balancer.log().split('\n').filter((line) => /\[error\]/.test(line)).map((line) => line.slice(0, 160)).join('\n')}`);
    t.same(missing.slice(0, 20), [], `every acknowledged create is stored (${missing.length} missing)`);
    for (const instance of instances) t.same(await instance.stop('SIGINT'), { code: 0, signal: null });
  });
}

t.test("README's Kubernetes block: readiness on /readyz, noticed within SHUTDOWN_DELAY, and a grace period above SHUTDOWN_DELAY + SHUTDOWN_TIMEOUT", async (t) => {
  const pod = parse(readmeBlock('Kubernetes, in the pod template', 'yaml')) as {
    terminationGracePeriodSeconds: number;
    containers: { readinessProbe: { httpGet: { path: string; port: number }; periodSeconds: number; failureThreshold: number }; ports: { containerPort: number }[] }[];
  };
  const [container] = pod.containers;
  const probe = container!.readinessProbe;
  t.equal(probe.httpGet.path, '/readyz');
  t.equal(probe.httpGet.port, container!.ports[0]!.containerPort, 'on the port the container listens on');
  t.ok(probe.periodSeconds * probe.failureThreshold * 1000 < DEFAULTS.SHUTDOWN_DELAY, 'the probe takes the pod out before SHUTDOWN_DELAY is over');
  const stopMs = DEFAULTS.SHUTDOWN_DELAY + DEFAULTS.SHUTDOWN_TIMEOUT;
  t.ok(pod.terminationGracePeriodSeconds * 1000 > stopMs, `terminationGracePeriodSeconds (${pod.terminationGracePeriodSeconds} s) exceeds SHUTDOWN_DELAY + SHUTDOWN_TIMEOUT (${stopMs / 1000} s)`);
});

t.test("README's HAProxy block takes an instance out within SHUTDOWN_DELAY", async (t) => {
  const block = readmeBlock(BLOCKS.haproxy.marker, 'haproxy');
  const check = /default-server check inter (\d+)s fall (\d+)/.exec(block);
  t.ok(check, 'health checks every `inter` seconds, `fall` failures to take a server out');
  t.match(block, /option httpchk GET \/readyz/, 'on /readyz');
  t.ok(Number(check?.[1]) * Number(check?.[2]) * 1000 < DEFAULTS.SHUTDOWN_DELAY, 'inter x fall is below SHUTDOWN_DELAY');
});
