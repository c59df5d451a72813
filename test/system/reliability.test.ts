// Reliability over real sockets: a graceful stop (in flight completes, idle keep-alive closes,
// late requests on open connections are served with Connection: close, new connections are refused), SIGTERM under load in the
// real process, SHUTDOWN_TIMEOUT, slow-loris and keep-alive timeouts, /metrics and X-Request-Id.
// Timers appear only where the behaviour under test is itself a timeout, and then only as the
// pace of a slow client or as a bound that turns a missing timeout into a failure, not a hang.
import t from 'tap';
import { createServer as createHttpServer } from 'node:http';
import { connect as connectNet, createServer as createNetServer, type AddressInfo, type Socket as NetSocket } from 'node:net';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { IDLE_GRACE_MS, QUIET_MS, SHORT_TURN_MS } from '../../src/transport/lifecycle.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { PlantStore } from '../../src/store/types.ts';
import { contractProblems } from '../harness/contract.ts';
import { AUTH, TOKEN, api, build, createPlant } from '../harness/helper.ts';
import { serverEnv, startServer } from '../harness/process.ts';
import { openRaw, tryConnect } from '../harness/raw-http.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const PROCESS_TOKEN = 'reliability-test-token-0123456789';

async function listen(app: FastifyInstance): Promise<number> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return (app.server.address() as AddressInfo).port;
}

/** Resolves `value`, or `fallback` once `ms` have passed: bounds a wait for a timeout under test. */
function within<T, F>(ms: number, value: Promise<T>, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<F>((resolve) => (timer = setTimeout(() => resolve(fallback), ms)));
  return Promise.race([value, expired]).finally(() => clearTimeout(timer));
}

function postHead(length: number, token = TOKEN): string {
  return (
    `POST /plants HTTP/1.1\r\nHost: plants.test\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`
  );
}

/** Blocks this thread for `ms`, as a long GC, a blocked write or a starved CPU does. */
function stallLoop(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Resolves once the listener refuses connections: from then on the stop is under way. */
async function listenerClosed(port: number): Promise<void> {
  while ((await tryConnect(port)) !== 'ECONNREFUSED') {
    // accepted: close() has not reached the listener yet
  }
}

/** An onRequest hook (added before listen) that resolves once a request with this method arrives. */
function arrivalOf(app: FastifyInstance, method: string): Promise<void> {
  return new Promise((resolve) => {
    app.addHook('onRequest', async (request) => {
      if (request.method === method) resolve();
    });
  });
}

// ---------------------------------------------------------------------------------------------
// 1. Graceful stop, in process

t.test('closing: in flight completes, idle keep-alive closes, new connections are refused', async (t) => {
  const { app } = await build(t);
  const postArrived = arrivalOf(app, 'POST');
  const port = await listen(app);

  // (a) a create whose body is only partly sent: the server has the request, not yet its body
  const body = '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}';
  const uploading = await openRaw(port);
  uploading.socket.write(postHead(Buffer.byteLength(body)) + body.slice(0, 10));
  await postArrived;

  // (b) an idle keep-alive connection
  const idle = await openRaw(port);
  idle.socket.write('GET /healthz HTTP/1.1\r\nHost: plants.test\r\n\r\n');
  const health = await idle.response(0);
  t.equal(health.statusCode, 200, 'the keep-alive connection was served');
  t.not(health.headers.connection, 'close', 'and stays open');

  // (c) the stop begins
  const closing = app.close();
  t.same(await idle.closed, { byServer: true }, 'the idle keep-alive connection is closed by the server (after the grace)');
  t.equal(idle.responses.length, 1, 'with nothing more sent on it');
  t.equal(await tryConnect(port), 'ECONNREFUSED', 'a new connection is refused');

  // (d) the rest of the body, and a second request pipelined right behind it
  uploading.socket.write(body.slice(10) + 'GET /healthz HTTP/1.1\r\nHost: plants.test\r\n\r\n');
  const created = await uploading.response(0);
  t.equal(created.statusCode, 200, 'the create that was in flight completes');
  t.equal(created.body, '{"name":"Monstera","tag":"aroid"}', 'with the full Plant body');
  t.equal(created.headers.connection, 'close', 'and Connection: close, since the service is stopping');
  t.same(contractProblems('POST', '/plants', created), [], 'POST /plants 200 matches openapi.yaml');
  // HTTP/1.1 (RFC 9112, 9.6): requests pipelined behind an answer saying close were not processed; a client retries them.
  t.same(await uploading.closed, { byServer: true }, 'then the server closes that connection');
  t.equal(uploading.responses.length, 1, 'leaving the pipelined request unprocessed');

  // (e)
  await closing;
  t.pass('close() resolves');
});

t.test('a keep-alive connection whose request was in flight when closing began is closed once answered', async (t) => {
  const { app } = await build(t);
  const postArrived = arrivalOf(app, 'POST');
  const port = await listen(app);
  const body = '{"id":1,"name":"Fern"}';
  const uploading = await openRaw(port);
  uploading.socket.write(postHead(Buffer.byteLength(body)) + body.slice(0, 5));
  await postArrived;

  const idle = await openRaw(port);
  idle.socket.write('GET /healthz HTTP/1.1\r\nHost: plants.test\r\n\r\n');
  await idle.response(0);

  const closing = app.close();
  await listenerClosed(port);
  uploading.socket.write(body.slice(5));
  const created = await uploading.response(0);
  t.equal(created.statusCode, 200, 'the create in flight completes');
  t.equal(created.body, '{"name":"Fern"}', 'with its Plant body');
  t.equal(created.headers.connection, 'close', 'saying Connection: close, so the client will not reuse the connection');
  // The client sends nothing more. Left open as keep-alive, the connection would hold close()
  // until KEEP_ALIVE_TIMEOUT (65 s by default, past SHUTDOWN_TIMEOUT: the process would exit 1).
  const closed = await within(2_000, uploading.closed, 'still open after 2 s' as const);
  t.same(closed, { byServer: true }, 'the server closes the connection once it is answered');
  if (closed === 'still open after 2 s') uploading.destroy();
  await closing;
  t.pass('close() resolves');
});

t.test('a keep-alive connection idle when closing began may still bring a request: it is served with Connection: close, not refused or reset', async (t) => {
  const { app } = await build(t);
  const port = await listen(app);
  const idle = await openRaw(port);
  idle.socket.write('GET /healthz HTTP/1.1\r\nHost: plants.test\r\n\r\n');
  t.not((await idle.response(0)).headers.connection, 'close', 'a keep-alive connection, idle');

  const closing = app.close();
  await listenerClosed(port);
  // A busy client (a balancer's pooled connection) writes its next request the moment it has the previous answer, maybe just now.
  const body = '{"id":9007199254740993,"name":"Late"}';
  idle.socket.write(postHead(Buffer.byteLength(body)) + body);
  const late = await idle.response(1);
  t.equal(late.statusCode, 200, 'the create that arrived while closing is served, since the store is still open');
  t.equal(late.body, '{"name":"Late"}', 'with its Plant body');
  t.equal(late.headers.connection, 'close', 'and Connection: close, so the client does not reuse the connection');
  t.same(contractProblems('POST', '/plants', late), [], 'POST /plants 200 matches openapi.yaml');
  t.same(await idle.closed, { byServer: true }, 'then the server closes the connection');
  await closing;
  t.pass('close() resolves');
});

t.test('a request that reached an idle connection while the event loop was stalled past the grace is answered, not reset', async (t) => {
  const { app } = await build(t);
  const port = await listen(app);
  const idle = await openRaw(port);
  idle.socket.write('GET /healthz HTTP/1.1\r\nHost: plants.test\r\n\r\n');
  await idle.response(0);

  const closing = app.close();
  await listenerClosed(port);
  idle.socket.write('GET /healthz HTTP/1.1\r\nHost: plants.test\r\n\r\n');
  // A stall (a long GC, a starved CPU) as the request arrives: when the loop resumes, the grace
  // timer is due and runs before the socket is read.
  stallLoop(IDLE_GRACE_MS + 200);
  const late = await idle.response(1);
  t.equal(late.statusCode, 200, 'the request is served');
  t.equal(late.headers.connection, 'close', 'with Connection: close');
  await closing;
});

/**
 * A client in a thread of its own: posts 'ready'; once told to, connects to `port`, writes GET /healthz, flags `connected`
 * (so the stalled main thread may go on) and posts back the status line it got, or the error that ended the connection.
 */
function clientThread(port: number, connected: Int32Array): Worker {
  const code = `
    const { connect } = require('node:net');
    const { parentPort, workerData } = require('node:worker_threads');
    parentPort.postMessage('ready');
    parentPort.once('message', () => {
      let text = '';
      const socket = connect(workerData.port, '127.0.0.1', () => {
        socket.write('GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n');
        Atomics.store(workerData.connected, 0, 1);
        Atomics.notify(workerData.connected, 0);
      });
      socket.setEncoding('latin1');
      socket.on('data', (chunk) => { text += chunk; if (text.includes('\\r\\n\\r\\n')) { parentPort.postMessage(text.split('\\r\\n')[0]); socket.destroy(); } });
      socket.on('error', (error) => parentPort.postMessage(error.code));
      socket.on('close', () => parentPort.postMessage('closed without an answer'));
    });`;
  return new Worker(code, { eval: true, workerData: { port, connected } });
}

t.test('a connection queued while the loop stalled, just before the listener would close, is accepted and answered, not reset', async (t) => {
  const { app } = await build(t);
  const port = await listen(app);
  // A loopback pair of our own, whose reading stalls the loop in a poll phase.
  const stall = createNetServer();
  await new Promise<void>((resolve) => stall.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => stall.close(resolve)));
  const writer = connectNet((stall.address() as AddressInfo).port, '127.0.0.1');
  t.teardown(() => writer.destroy());
  const reader = await new Promise<NetSocket>((resolve) => stall.once('connection', resolve));
  const connected = new Int32Array(new SharedArrayBuffer(4));
  const client = clientThread(port, connected);
  t.teardown(() => client.terminate());
  await once(client, 'message'); // ready: it connects while this thread is stalled
  const answer = new Promise<string>((resolve) => client.once('message', resolve));
  reader.once('data', () => {
    // A write blocked on a full pipe, a stalled process: meanwhile a client connects and Linux queues it unaccepted.
    client.postMessage('connect');
    Atomics.wait(connected, 0, 0, 10_000);
    stallLoop(SHORT_TURN_MS * 5);
  });

  const stopped = app.lifecycle.stopAccepting();
  // Created in the same turn as the listener's first quiet wait, with the same delay: it fires right after that wait
  // ends, in the same timers phase, so the stall is the poll phase right before the check phase that could close.
  setTimeout(() => writer.write('x'), QUIET_MS);
  t.equal(await answer, 'HTTP/1.1 200 OK', 'the queued connection is accepted and its request answered');
  await stopped;
  reader.destroy();
});

// ---------------------------------------------------------------------------------------------
// 2 and 3. The real process

interface Answer {
  status: number;
  body: string;
  retryAfter: string | null;
}

/** POST /plants over fetch; distinguishes a connection error (rejects) from a truncated body. */
async function postPlant(url: string, body: string): Promise<Answer | { truncated: string }> {
  const response = await fetch(`${url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${PROCESS_TOKEN}`, 'content-type': 'application/json' },
    body,
  });
  try {
    return { status: response.status, body: await response.text(), retryAfter: response.headers.get('retry-after') };
  } catch (error) {
    return { truncated: `${response.status}: ${(error as Error).message}` };
  }
}

function errorCode(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? String(error);
}

t.test('SIGTERM under load: nothing acknowledged is lost, nothing is truncated, exit 0, the WAL is checkpointed', async (t) => {
  const dir = t.testdir();
  const dbPath = join(dir, 'plants.db');
  // Shorter than the 10 s default: a stop that hangs fails the test sooner.
  const env = serverEnv(dir, { API_TOKENS: PROCESS_TOKEN, SHUTDOWN_TIMEOUT: '5s' });
  const server = await startServer(t, env);

  const WORKERS = 8;
  const ACKNOWLEDGED_BEFORE_STOP = 200;
  const acknowledged = new Map<string, string>();
  /** Creates whose new connection was refused: never sent, so never applied. */
  const failed = new Map<string, string>();
  const unexpected: string[] = [];
  const after = { ok: 0, connectionErrors: new Map<string, number>() };
  let inFlight = 0;
  let inFlightAtStop = -1;
  let stopped = false;

  const worker = async (w: number): Promise<void> => {
    for (let i = 0; ; i++) {
      const id = String(1_000_000 * (w + 1) + i);
      const name = `plant ${w}-${i}`;
      const sentAfterStop = stopped;
      inFlight++;
      let answer: Awaited<ReturnType<typeof postPlant>>;
      try {
        answer = await postPlant(server.url, `{"id":${id},"name":"${name}"}`);
      } catch (error) {
        // Once the stop began the listener is closed, so a new connection is refused (ECONNREFUSED):
        // the request never left the client, which can send it elsewhere. A request written and then
        // reset (ECONNRESET, UND_ERR_SOCKET) is another matter: the client cannot tell if it was applied.
        const code = errorCode(error);
        if (!stopped || code !== 'ECONNREFUSED') unexpected.push(`${id}: connection error${stopped ? '' : ' before SIGTERM'}: ${code}`);
        after.connectionErrors.set(code, (after.connectionErrors.get(code) ?? 0) + 1);
        failed.set(id, name);
        return;
      } finally {
        inFlight--;
      }
      if ('truncated' in answer) {
        unexpected.push(`${id}: truncated answer ${answer.truncated}`);
        return;
      }
      if (answer.status === 200 && answer.body === JSON.stringify({ name })) {
        acknowledged.set(id, name);
        if (stopped) after.ok++;
      } else {
        unexpected.push(`${id}: ${answer.status} ${answer.body}${sentAfterStop ? ' (sent after SIGTERM)' : ''}`);
        return;
      }
      if (!stopped && acknowledged.size >= ACKNOWLEDGED_BEFORE_STOP) {
        stopped = true;
        inFlightAtStop = inFlight;
        server.child.kill('SIGTERM');
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));

  t.same(await server.exited, { code: 0, signal: null }, 'the process exits 0');
  t.match(server.stdout(), /"msg":"stopped cleanly"/, "and logs 'stopped cleanly'");
  t.notMatch(server.stdout(), /shutdown timed out/, 'well within SHUTDOWN_TIMEOUT');
  t.same(unexpected, [], 'every request got a complete 200 or (after SIGTERM) its new connection refused');
  t.ok(inFlightAtStop > 0, `${inFlightAtStop} creates were in flight at SIGTERM`);
  t.comment(
    `after SIGTERM: ${after.ok} creates completed with 200, ` +
      `connection errors ${JSON.stringify(Object.fromEntries(after.connectionErrors))}`,
  );

  const wal = `${dbPath}-wal`;
  t.ok(!existsSync(wal) || statSync(wal).size === 0, 'after the clean stop the -wal file is absent or empty (checkpointed)');

  const restarted = await startServer(t, env);
  const ids = [...acknowledged.keys()];
  const notStored: string[] = [];
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      for (let id = ids.pop(); id !== undefined; id = ids.pop()) {
        const answer = await postPlant(restarted.url, `{"id":${id},"name":"another plant"}`);
        if (!('status' in answer) || answer.status !== 409) notStored.push(`${id}: ${JSON.stringify(answer)}`);
      }
    }),
  );
  t.same(notStored, [], `each of the ${acknowledged.size} acknowledged plants is still there (409 for another one with its id)`);
  const applied: string[] = [];
  for (const [id, name] of failed) {
    const answer = await postPlant(restarted.url, `{"id":${id},"name":"${name}"}`);
    if (!('status' in answer) || answer.status !== 200) applied.push(`${id}: ${JSON.stringify(answer)}`);
  }
  t.same(applied, [], `none of the ${failed.size} creates whose connection was refused was applied (their ids are free)`);
  const control = await postPlant(restarted.url, '{"id":1,"name":"control"}');
  t.equal('status' in control && control.status, 200, 'an id never acknowledged is free');
  t.same(await restarted.stop('SIGTERM'), { code: 0, signal: null });
});

t.test('a request that never completes holds the stop past SHUTDOWN_TIMEOUT: exit 1', async (t) => {
  // At debug a request's arrival is logged too: the test waits for it.
  const server = await startServer(t, serverEnv(t.testdir(), { API_TOKENS: PROCESS_TOKEN, SHUTDOWN_TIMEOUT: '1s', LOG_LEVEL: 'debug' }));
  const port = Number(new URL(server.url).port);
  const upload = await openRaw(port);
  upload.socket.write(postHead(1_000, PROCESS_TOKEN) + '{"id":1,');
  await server.waitFor('stdout', /"method":"POST","url":"\/plants".*"msg":"incoming request"/);

  const signalled = Date.now();
  server.child.kill('SIGTERM');
  t.same(await server.exited, { code: 1, signal: null }, 'exit code 1');
  const took = Date.now() - signalled;
  t.match(server.stdout(), /"msg":"shutdown timed out[^"]*"/, "it logs 'shutdown timed out'");
  t.notMatch(server.stdout(), /stopped cleanly/, 'and not a clean stop');
  t.ok(took >= 900, `it waited for SHUTDOWN_TIMEOUT first (${took} ms)`);
  t.same(await upload.closed, { byServer: true }, 'the slow upload was cut off by the exit');
});

// ---------------------------------------------------------------------------------------------
// 4. Slow clients and idle connections

t.test('slow-loris: headers trickling in past HEADERS_TIMEOUT get 408 and the connection closes; others are served meanwhile', async (t) => {
  const { app } = await build(t, { HEADERS_TIMEOUT: 1_000 });
  const port = await listen(app);
  const base = `http://127.0.0.1:${port}`;

  const slow = await openRaw(port);
  const started = Date.now();
  slow.socket.write('GET /healthz HTTP/1.1\r\nHost: plants.test\r\nX-Slow: ');
  const normal: Promise<number>[] = [];
  // The slow client's pace: one header byte every 200 ms; a normal request with each byte.
  const trickle = setInterval(() => {
    if (!slow.socket.destroyed) slow.socket.write('a');
    normal.push(fetch(`${base}/healthz`).then(async (response) => {
      await response.text();
      return response.status;
    }));
  }, 200);
  const closed = await within(5_000, slow.closed, 'still open after 5 s' as const);
  clearInterval(trickle);
  const took = Date.now() - started;
  if (closed === 'still open after 5 s') slow.destroy();

  t.same(closed, { byServer: true }, 'the server closed the slow connection');
  t.ok(took >= 950 && took < 3_000, `after HEADERS_TIMEOUT, checked every second (${took} ms)`);
  t.equal(slow.responses.length, 1, 'with one answer');
  t.equal(slow.responses[0]?.statusCode, 408, '408 Request Timeout');
  t.same(JSON.parse(slow.responses[0]?.body ?? '{}'), { error: 408, message: 'The request took too long to arrive.' }, 'the Error body');
  const statuses = await Promise.all(normal);
  t.ok(statuses.length >= 4, `${statuses.length} normal requests were made meanwhile`);
  t.same(statuses.filter((status) => status !== 200), [], 'and all were answered 200');
});

t.test('an idle keep-alive connection is closed after KEEP_ALIVE_TIMEOUT', async (t) => {
  const { app } = await build(t, { KEEP_ALIVE_TIMEOUT: 500 });
  const port = await listen(app);
  const idle = await openRaw(port);
  idle.socket.write('GET /healthz HTTP/1.1\r\nHost: plants.test\r\n\r\n');
  const health = await idle.response(0);
  const answered = Date.now();
  t.equal(health.statusCode, 200, 'served, and kept alive');
  t.not(health.headers.connection, 'close');
  // Node closes at keepAliveTimeout plus its keepAliveTimeoutBuffer (1 s); the 65 s default would fail this.
  const closed = await within(4_000, idle.closed, 'still open after 4 s' as const);
  const took = Date.now() - answered;
  if (closed === 'still open after 4 s') idle.destroy();
  t.same(closed, { byServer: true }, 'the server closed it');
  t.ok(took >= 450, `not before KEEP_ALIVE_TIMEOUT (${took} ms)`);
});

// ---------------------------------------------------------------------------------------------
// 5. /metrics

/** A store whose `attempted` resolves once the dispatcher has counted a delivery attempt and stored its outcome. */
function watchAttempts(store: PlantStore): { store: PlantStore; attempted: Promise<void> } {
  const { promise: attempted, resolve } = Promise.withResolvers<void>();
  const webhooks = new Proxy(store.webhooks, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const result = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (key === 'recordAttempt') Promise.resolve(result).then(() => resolve(), () => resolve());
        return result;
      };
    },
  });
  return { store: { plants: store.plants, tokens: store.tokens, webhooks, ping: () => store.ping(), close: () => store.close() }, attempted };
}

function series(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = new Map([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    if (Object.entries(labels).every(([label, value]) => present.get(label) === value)) return Number(match[3]);
  }
  return undefined;
}

t.test('/metrics: requests per operation and status, store latency, webhook queue and outcomes, process figures', async (t) => {
  const receiver = createHttpServer((request, response) => {
    request.resume();
    request.on('end', () => response.end('ok'));
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    receiver.closeAllConnections();
    return new Promise<void>((resolve) => receiver.close(() => resolve()));
  });
  const hooks = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
  const { store, attempted } = watchAttempts(new SqliteStore(join(t.testdir(), 'plants.db')));
  const { app } = await build(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: true }, { store });

  const subscribed = await api(t, app, { method: 'POST', url: '/webhooks', headers: AUTH, payload: { url: hooks } });
  t.equal(subscribed.statusCode, 201, 'a subscription to a local receiver');
  t.equal((await createPlant(t, app, '{"id":7,"name":"Monstera"}')).statusCode, 200, 'a create');
  t.equal((await api(t, app, { method: 'GET', url: '/plants/7', headers: AUTH })).statusCode, 200, 'a read');
  t.equal((await createPlant(t, app, '{"id":8,"name":"Fern"}', {})).statusCode, 401, 'a create without a token');
  await attempted;

  const response = await api(t, app, { method: 'GET', url: '/metrics' });
  t.equal(response.statusCode, 200, 'GET /metrics needs no token');
  t.match(String(response.headers['content-type']), /^text\/plain\b/, 'text/plain');
  const text = response.body;
  t.equal(series(text, 'http_request_duration_seconds_count', { operation: 'createPlant', method: 'POST', status: '200' }), 1, 'the create, by operation, method and status');
  t.equal(series(text, 'http_request_duration_seconds_count', { operation: 'createPlant', method: 'POST', status: '401' }), 1, 'the refused create');
  t.equal(series(text, 'http_request_duration_seconds_count', { operation: 'getPlant', method: 'GET', status: '200' }), 1, 'the read');
  t.ok(series(text, 'http_request_duration_seconds_bucket', { operation: 'getPlant', le: '+Inf' }), 'as a histogram');
  t.equal(series(text, 'store_operation_duration_seconds_count', { method: 'createPlant', outcome: 'ok' }), 1, 'store latency per method');
  t.equal(series(text, 'store_operation_duration_seconds_count', { method: 'getPlant', outcome: 'ok' }), 1);
  t.equal(series(text, 'webhook_delivery_attempts_total', { result: 'delivered' }), 1, 'the delivery attempt, by result');
  t.equal(series(text, 'webhook_deliveries_pending'), 0, 'the outbox queue depth (delivered: none pending)');
  t.ok((series(text, 'process_resident_memory_bytes') ?? 0) > 0, 'resident memory');
  t.ok(series(text, 'nodejs_eventloop_lag_seconds') !== undefined, 'event-loop lag');
});

t.test('/metrics: each route counts by its own method and status; a path outside the API by its method, as "unknown"; a method no route serves as "other"', async (t) => {
  const { app } = await build(t);
  const count = async (labels: Record<string, string>) =>
    series((await api(t, app, { method: 'GET', url: '/metrics' })).body, 'http_request_duration_seconds_count', labels);
  t.equal((await app.inject({ method: 'GET', url: '/plants/5', headers: AUTH })).statusCode, 404);
  t.equal((await app.inject({ method: 'HEAD', url: '/plants/5', headers: AUTH })).statusCode, 404);
  t.equal((await app.inject({ method: 'HEAD', url: '/plants/5', headers: AUTH })).statusCode, 404);
  t.equal((await app.inject({ method: 'GET', url: '/plants/5' })).statusCode, 401);
  for (const method of ['GET', 'DELETE', 'DELETE', 'PATCH'] as const) {
    t.equal((await app.inject({ method, url: '/nowhere' })).statusCode, 404, `${method} /nowhere`);
  }
  t.equal(await count({ operation: 'getPlant', method: 'GET', status: '404' }), 1, 'the get of a missing plant');
  t.equal(await count({ operation: 'getPlant', method: 'HEAD', status: '404' }), 2, 'its HEAD, apart');
  t.equal(await count({ operation: 'getPlant', method: 'GET', status: '401' }), 1, 'the refused get, apart');
  t.equal(await count({ operation: 'unknown', method: 'GET', status: '404' }), 1, 'outside the API, by method');
  t.equal(await count({ operation: 'unknown', method: 'DELETE', status: '404' }), 2);
  t.equal(await count({ operation: 'unknown', method: 'PATCH', status: '404' }), undefined, 'PATCH, which no route serves, has no series');
  t.equal(await count({ operation: 'unknown', method: 'other', status: '404' }), 1, 'it counts as "other"');
});

// ---------------------------------------------------------------------------------------------
// 6. X-Request-Id

function logLinesOf(logs: string, requestId: string): Record<string, unknown>[] {
  return logs
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.reqId === requestId);
}

t.test('X-Request-Id: a safe id is echoed and logged; an unsafe or missing one is replaced by a UUID; every answer carries it', async (t) => {
  const { app, logs } = await build(t, { LOG_LEVEL: 'info' });

  const given = 'client-Req_42.a';
  const echoed = await api(t, app, { method: 'GET', url: '/healthz', headers: { 'x-request-id': given } });
  t.equal(echoed.headers['x-request-id'], given, 'a safe id is echoed');
  const lines = logLinesOf(logs(), given);
  t.equal(lines.length, 1, 'and logged in one line');
  const line = { msg: 'request completed', req: { method: 'GET', url: '/healthz' }, res: { statusCode: 200 }, responseTime: Number };
  t.match(lines[0], line, 'naming the request and its answer');
  const longest = 'b'.repeat(128);
  t.equal((await app.inject({ url: '/healthz', headers: { 'x-request-id': longest } })).headers['x-request-id'], longest, '128 characters are accepted');

  const unsafe = ['two words', 'line\nbreak', 'c'.repeat(129), 'c'.repeat(200), '{"json":1}', ''];
  for (const value of unsafe) {
    const response = await app.inject({ url: '/healthz', headers: { 'x-request-id': value } });
    const id = String(response.headers['x-request-id']);
    t.match(id, UUID, `${JSON.stringify(value.length > 20 ? `${value.length} characters` : value)} is replaced by a UUID`);
    t.ok(logLinesOf(logs(), id).length > 0, 'which the logs use');
  }
  t.notMatch(logs(), /two words|line\\nbreak|ccccccccc|\\"json\\"/, 'no unsafe id reaches the logs');

  const cases: [string, InjectOptions][] = [
    ['200', { url: '/healthz' }],
    ['400', { method: 'POST', url: '/plants', headers: { ...AUTH, 'content-type': 'application/json' }, payload: '{"id":1}' }],
    ['401', { method: 'POST', url: '/plants', headers: { 'content-type': 'application/json' }, payload: '{"id":1,"name":"a"}' }],
    ['404', { url: '/no-such-path' }],
  ];
  const generated = new Set<string>();
  for (const [status, request] of cases) {
    const without = await app.inject(request);
    t.equal(String(without.statusCode), status, `a ${status}`);
    t.match(String(without.headers['x-request-id']), UUID, `${status} without an id: a generated UUID`);
    generated.add(String(without.headers['x-request-id']));
    const withId = await app.inject({ ...request, headers: { ...request.headers, 'x-request-id': `case-${status}` } });
    t.equal(String(withId.statusCode), status);
    t.equal(withId.headers['x-request-id'], `case-${status}`, `${status} with an id: echoed`);
  }
  t.equal(generated.size, cases.length, 'a new UUID for every request');
});

// Each request's logger becomes pino's child only when the request writes a line (logging.ts).
// (Its children, as tracing makes them, are checked in otel.test.ts.)
t.test('at LOG_LEVEL=warn a request writes only lines at warn and above, each naming the request', async (t) => {
  const store = new SqliteStore(join(t.testdir(), 'plants.db'));
  const { app, logs } = await build(t, { LOG_LEVEL: 'warn' }, { store });
  t.equal((await app.inject({ url: '/readyz', headers: { 'x-request-id': 'ready-1' } })).statusCode, 200);
  t.equal((await app.inject({ url: '/plants/1', headers: { 'x-request-id': 'refused-1' } })).statusCode, 401);
  t.same(logLinesOf(logs(), 'ready-1'), [], 'an answered request writes no line at warn');
  t.same(logLinesOf(logs(), 'refused-1'), [], 'nor does a refusal (logged at info)');
  await store.close(); // the store no longer answers: readiness fails, and says so at warn
  t.equal((await app.inject({ url: '/readyz', headers: { 'x-request-id': 'ready-2' } })).statusCode, 503);
  t.same(
    logLinesOf(logs(), 'ready-2').map((line) => [line.level, line.msg]),
    [
      [40, 'readiness check failed: the store does not answer'],
      [50, 'request failed'],
    ],
    'the warn line and the 503, each with the request id',
  );
});
