// A rolling deploy as a load balancer sees it, on the real process and real sockets: during
// SHUTDOWN_DELAY readiness fails while everything else is served as usual; the stop that follows,
// while 64 keep-alive connections send without pause, answers every request and refuses none;
// SIGINT skips the delay; and `npm start` (as a supervisor runs it) hands SIGTERM and SIGINT to the server.
import t from 'tap';
import { contractProblems } from '../harness/contract.ts';
import { isRunning, serverEnv, startServer } from '../harness/process.ts';
import { openRaw, tryConnect, type RawConnection, type RawResponse } from '../harness/raw-http.ts';

const TOKEN = 'rolling-deploy-token-0123456789';
const CONNECTIONS = 64;
/** Creates answered before SIGTERM, on top of at least one answer on every connection. */
const ANSWERS_BEFORE_SIGNAL = CONNECTIONS * 8;

function createRequest(id: number, name: string): string {
  const body = JSON.stringify({ id, name });
  return (
    `POST /plants HTTP/1.1\r\nHost: plants.test\r\nAuthorization: Bearer ${TOKEN}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

/** What is wrong with an answer to a create, from a client's point of view; undefined when nothing is. */
function problemWith(answer: RawResponse, name: string): string | undefined {
  if (answer.statusCode !== 200) return `${answer.statusCode} ${answer.body}`;
  const problems = contractProblems('POST', '/plants', answer);
  if (answer.body !== JSON.stringify({ name })) problems.push(`200 with ${answer.body}`);
  return problems.length > 0 ? problems.join('; ') : undefined;
}

t.test('SIGTERM with 64 busy keep-alive connections: no reset, nothing unanswered, each connection told to close before it is closed', async (t) => {
  const dir = t.testdir();
  const env = serverEnv(dir, { API_TOKENS: TOKEN });
  const server = await startServer(t, env);
  const port = Number(new URL(server.url).port);

  const acknowledged = new Map<number, string>();
  /** Requests written whose connection ended without their answer: the client saw a reset or a hang-up. */
  const lost: string[] = [];
  const wrong: string[] = [];
  const answered = new Array<number>(CONNECTIONS).fill(0);
  const after = { keepAlive: 0, closing200: 0, closingOther: 0 };
  let signalled = false;
  let newConnectionAfterClose: Promise<string> | undefined;

  const signalOnceBusy = () => {
    if (signalled || acknowledged.size < ANSWERS_BEFORE_SIGNAL || answered.includes(0)) return;
    signalled = true;
    server.child.kill('SIGTERM');
  };

  const keepSending = async (connection: RawConnection, c: number): Promise<void> => {
    let socketError = '';
    connection.socket.on('error', (error: NodeJS.ErrnoException) => (socketError ||= error.code ?? error.message));
    for (let n = 0; ; n++) {
      const id = (c + 1) * 1_000_000 + n;
      const name = `plant ${c}-${n}`;
      connection.socket.write(createRequest(id, name));
      let answer: RawResponse;
      try {
        answer = await connection.response(n);
      } catch {
        lost.push(`connection ${c}, create ${id}${signalled ? ' (after SIGTERM)' : ''}: ${socketError || 'closed without an answer'}`);
        return;
      }
      answered[c]!++;
      const problem = problemWith(answer, name);
      if (problem) wrong.push(`connection ${c}, create ${id}: ${problem}`);
      if (answer.statusCode === 200) acknowledged.set(id, name);
      if (answer.headers.connection !== 'close') {
        if (signalled) after.keepAlive++;
        signalOnceBusy();
        continue;
      }
      if (answer.statusCode === 200) after.closing200++;
      else after.closingOther++;
      // Closing has begun: from now on the listener is closed.
      newConnectionAfterClose ??= tryConnect(port);
      const closed = await connection.closed;
      if (!closed.byServer) wrong.push(`connection ${c}: not closed by the server after Connection: close`);
      return;
    }
  };

  const connections = await Promise.all(Array.from({ length: CONNECTIONS }, () => openRaw(port)));
  await Promise.all(connections.map((connection, c) => keepSending(connection, c)));
  const exit = await server.exited;

  t.ok(signalled, `SIGTERM was sent once ${ANSWERS_BEFORE_SIGNAL} creates were acknowledged on all ${CONNECTIONS} connections`);
  t.same(lost, [], 'no request written on a connection was reset or left unanswered');
  t.same(wrong, [], 'every answer is the created Plant: requests arriving while closing are served, not refused');
  t.equal(after.closing200 + after.closingOther, CONNECTIONS, 'every connection ended with an answer saying Connection: close, then the server closed it');
  t.equal(await (newConnectionAfterClose ?? 'never tried: no answer said Connection: close'), 'ECONNREFUSED', 'a new connection after closing began is refused');
  t.comment(
    `after SIGTERM: ${after.keepAlive} answers still kept alive (sent before closing began), ` +
      `${after.closing200} creates answered 200 with Connection: close, ${after.closingOther} other answers with it`,
  );
  t.same(exit, { code: 0, signal: null }, 'the process exits 0');
  t.match(server.stdout(), /"msg":"stopped cleanly"/, "and logs 'stopped cleanly'");

  const restarted = await startServer(t, env);
  const missing: string[] = [];
  const checks: { id: number; expected: { status: number; body: string } }[] = [...acknowledged].map(([id, name]) => ({ id, expected: { status: 200, body: JSON.stringify({ id, name }) } }));
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let check = checks.pop(); check; check = checks.pop()) {
        const response = await fetch(`${restarted.url}/plants/${check.id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
        const body = await response.text();
        if (response.status !== check.expected.status || (check.expected.body && body !== check.expected.body)) {
          missing.push(`${check.id}: expected ${check.expected.status}, got ${response.status} ${body}`);
        }
      }
    }),
  );
  t.same(missing, [], `after a restart the ${acknowledged.size} acknowledged creates are stored`);
  t.same(await restarted.stop('SIGTERM'), { code: 0, signal: null });
});

/** Resolves `value`, or `fallback` once `ms` have passed: turns a stop that never comes into a failure, not a hang. */
function within<T, F>(ms: number, value: Promise<T>, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<F>((resolve) => (timer = setTimeout(() => resolve(fallback), ms)));
  return Promise.race([value, expired]).finally(() => clearTimeout(timer));
}


t.test('a second signal while stopping (a second Ctrl-C, or the one npm forwards) does not cut the stop short', async (t) => {
  // At debug a request's arrival is logged too: the test waits for it.
  const server = await startServer(t, serverEnv(t.testdir(), { API_TOKENS: TOKEN, LOG_LEVEL: 'debug' }));
  const upload = await openRaw(Number(new URL(server.url).port));
  // A create whose body is still arriving holds the stop open for as long as the test needs.
  const request = createRequest(1, 'Monstera');
  const split = request.length - 5;
  upload.socket.write(request.slice(0, split));
  await server.waitFor('stdout', /"method":"POST","url":"\/plants".*"msg":"incoming request"/);

  server.child.kill('SIGINT');
  await server.waitFor('stdout', /"msg":"shutting down"/);
  server.child.kill('SIGINT');
  server.child.kill('SIGTERM');
  upload.socket.write(request.slice(split));
  const created = await upload.response(0);
  t.equal(created.statusCode, 200, 'the create in flight completes');
  t.equal(created.headers.connection, 'close', 'saying Connection: close');
  t.same(await server.exited, { code: 0, signal: null }, 'the process exits 0');
  t.match(server.stdout(), /"msg":"stopped cleanly"/, 'after a clean stop');
});

// A supervisor signals npm alone (Docker, Kubernetes, systemd with KillMode=mixed) or the whole
// process group (Ctrl-C in a terminal, systemd's default KillMode=control-group): then the server
// receives the signal twice, once directly and once forwarded by npm.
const SUPERVISED = [
  { signal: 'SIGTERM', to: 'npm' },
  { signal: 'SIGINT', to: 'npm' },
  { signal: 'SIGINT', to: 'the process group' },
  { signal: 'SIGTERM', to: 'the process group' },
] as const;

for (const { signal, to } of SUPERVISED) {
  t.test(`npm start: ${signal} to ${to} stops the server cleanly, then npm exits 0`, async (t) => {
    const env = serverEnv(t.testdir(), { API_TOKENS: TOKEN, SHUTDOWN_TIMEOUT: '5s' });
    const npm = await startServer(t, env, { command: ['npm', 'start'], detached: true });
    const listening = await npm.waitFor('stdout', /^\{.*"pid":(\d+).*"msg":"Server listening at /m);
    const serverPid = Number(listening[1]);
    t.not(serverPid, npm.child.pid, `the server (pid ${serverPid}) runs under npm (pid ${npm.child.pid})`);
    // Only if the test fails: the orphan it found is stopped, by its pid.
    t.teardown(() => {
      if (isRunning(serverPid)) process.kill(serverPid, 'SIGKILL');
    });

    process.kill(to === 'npm' ? npm.child.pid! : -npm.child.pid!, signal);
    const exit = await within(20_000, npm.exited, 'npm still running 20 s after the signal' as const);
    t.same(exit, { code: 0, signal: null }, 'npm exits 0');
    t.notOk(isRunning(serverPid), 'the server process is gone, not left orphaned');
    t.match(npm.stdout(), new RegExp(`"signal":"${signal}".*"msg":"shutting down"`), `the server received ${signal}`);
    t.match(npm.stdout(), /"msg":"stopped cleanly"/, 'and stopped cleanly');
  });
}

// ---- SHUTDOWN_DELAY: the balancer notices first, then the stop -----------------------------------

const GET_PLANTS = 'GET /plants HTTP/1.1\r\nHost: plants.test\r\nAuthorization: Bearer ' + TOKEN + '\r\n\r\n';
const GET_READYZ = 'GET /readyz HTTP/1.1\r\nHost: plants.test\r\n\r\n';

t.test('SIGTERM: during SHUTDOWN_DELAY /readyz answers 503 while every other request, new connections included, is served with keep-alive; SIGINT then stops at once', async (t) => {
  // Longer than any test: only the SIGINT below ends the delay.
  const server = await startServer(t, serverEnv(t.testdir(), { API_TOKENS: TOKEN, SHUTDOWN_DELAY: '1h' }));
  const port = Number(new URL(server.url).port);
  const pooled = await openRaw(port);
  pooled.socket.write(GET_PLANTS);
  t.equal((await pooled.response(0)).statusCode, 200, 'a keep-alive connection, as a balancer pools it');

  server.child.kill('SIGTERM');
  await server.waitFor('stdout', /"signal":"SIGTERM".*"msg":"draining/);
  pooled.socket.write(GET_READYZ);
  const readiness = await pooled.response(1);
  t.equal(readiness.statusCode, 503, '/readyz answers 503 at once');
  t.match(JSON.parse(readiness.body), { error: 503, message: /shutting down/ }, 'with the Error body saying why');
  t.same(contractProblems('GET', '/readyz', readiness), [], 'as openapi.yaml documents');
  t.not(readiness.headers.connection, 'close', 'and the connection stays open');

  pooled.socket.write(createRequest(1, 'Monstera'));
  const created = await pooled.response(2);
  t.equal(created.statusCode, 200, 'a create on the pooled connection is served');
  t.not(created.headers.connection, 'close', 'with keep-alive as usual');
  const fresh = await openRaw(port);
  fresh.socket.write(GET_PLANTS);
  const listed = await fresh.response(0);
  t.equal(listed.statusCode, 200, 'a new connection is accepted and served');
  t.equal(listed.body, '[{"id":1,"name":"Monstera"}]', 'with what was just created');
  t.not(listed.headers.connection, 'close', 'with keep-alive too');
  t.notMatch(server.stdout(), /"msg":"shutting down"/, 'the stop has not begun');

  server.child.kill('SIGINT');
  const exit = await within(20_000, server.exited, 'still running 20 s after SIGINT' as const);
  t.same(exit, { code: 0, signal: null }, 'SIGINT cuts the delay short: the process stops and exits 0');
  t.match(server.stdout(), /"signal":"SIGINT".*"msg":"shutting down"/, 'the stop began on SIGINT');
  t.match(server.stdout(), /"msg":"stopped cleanly"/);
  t.same(await pooled.closed, { byServer: true }, 'the pooled connection was closed by the server');
});

t.test('SIGTERM: once SHUTDOWN_DELAY is over the stop begins by itself', async (t) => {
  const server = await startServer(t, serverEnv(t.testdir(), { API_TOKENS: TOKEN, SHUTDOWN_DELAY: '200ms' }));
  server.child.kill('SIGTERM');
  const exit = await within(20_000, server.exited, 'still running 20 s after SIGTERM' as const);
  t.same(exit, { code: 0, signal: null }, 'exit 0');
  t.match(server.stdout(), /"delayMs":200,.*"msg":"draining[^]*"signal":"SIGTERM".*"msg":"shutting down"[^]*"msg":"stopped cleanly"/, 'draining, then shutting down, then stopped cleanly');
});

t.test('SIGINT (Ctrl-C) stops at once, whatever SHUTDOWN_DELAY says', async (t) => {
  const server = await startServer(t, serverEnv(t.testdir(), { API_TOKENS: TOKEN, SHUTDOWN_DELAY: '1h' }));
  const port = Number(new URL(server.url).port);
  const idle = await openRaw(port);
  idle.socket.write(GET_PLANTS);
  await idle.response(0);
  server.child.kill('SIGINT');
  const exit = await within(20_000, server.exited, 'still running 20 s after SIGINT' as const);
  t.same(exit, { code: 0, signal: null }, 'the process exits 0 without waiting for the delay');
  t.notMatch(server.stdout(), /"msg":"draining/, 'it never drained');
  t.match(server.stdout(), /"signal":"SIGINT".*"msg":"shutting down"/);
});
