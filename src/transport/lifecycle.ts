// Stopping without losing a request: readiness fails first, then the listener closes (a refused connection is
// retried elsewhere, even a POST), then answers say Connection: close so balancers drop rather than reuse them.
// An answer given before its body arrived closes the connection: Node would read and discard the rest, gigabytes after a 401.
import type { IncomingMessage } from 'node:http';
import { Server as NetServer } from 'node:net';
import { setImmediate as nextCheckPhase, setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';

/** How long a keep-alive connection idle when closing starts may still bring a request (docs/operations.md, "Stopping"). */
export const IDLE_GRACE_MS = 1_000;
/** The most a connection reads of a body it will not use before carrying the next request. */
const DRAIN_LIMIT = 64 * 1024;

export type Lifecycle = ReturnType<typeof installLifecycle>;

export function installLifecycle(app: FastifyInstance) {
  let closing = false;
  let graceOver = false;
  const stops: (() => Promise<void>)[] = [];
  let stopping: Promise<unknown> = Promise.resolve();
  let listenerClosed: Promise<{ drained: Promise<void> }> | undefined;
  const lifecycle = {
    /** True from drain() (or closing) on: readiness fails, everything else is served as usual. */
    draining: false,
    drain: () => {
      lifecycle.draining = true;
    },
    /** Closes the listener at a quiet moment, keeping open connections; call it before app.close(). */
    stopAccepting: () => (listenerClosed ??= app.server.listening ? stopListening(app.server) : Promise.resolve({ drained: Promise.resolve() })),
    /** Runs `stop` as soon as closing starts, while connections drain; close() resolves only after it. */
    onClosing: (stop: () => Promise<void>) => {
      stops.push(stop);
    },
  };
  app.addHook('preClose', async () => {
    lifecycle.draining = true;
    stopping = Promise.all(stops.map((stop) => stop()));
    stopping.catch(() => undefined); // awaited (and so reported) in onClose; not an unhandled rejection meanwhile
    const { drained } = await lifecycle.stopAccepting();
    closing = true;
    // Idle connections are not closed at once, as Node's close() would: a balancer may have just written a request on one.
    // Unreferenced: once drained, the grace timer must not hold the process open.
    const drainedInTime = await Promise.race([drained.then(() => true), sleep(IDLE_GRACE_MS, false, { ref: false })]);
    // Timers run before I/O: after a stall, let requests already received be read before the idle connections close.
    await nextCheckPhase();
    graceOver = true;
    // Closing an idle connection races a client writing on it: say so, as only the client can avoid the race.
    if (!drainedInTime) app.log.info({ connections: await openConnections(app.server) }, 'grace over: the idle connections still open close now');
  });
  app.addHook('onClose', async () => {
    await stopping;
  });
  // Callback-style hooks: they are on every request's path, and an async hook costs a promise each time.
  app.addHook('onSend', (request, reply, _payload, done) => {
    if (closing || bodyStillArriving(request.raw)) reply.header('connection', 'close');
    done();
  });
  // An answer that said keep-alive just before closing began: past the grace only KEEP_ALIVE_TIMEOUT would close it.
  app.addHook('onResponse', (_request, reply, done) => {
    if (graceOver && reply.getHeader('connection') !== 'close') app.server.closeIdleConnections();
    done();
  });
  return lifecycle;
}

// A small declared body is discarded, as accepting it would cost as much; a chunked one has no length to bound that by.
function bodyStillArriving(request: IncomingMessage): boolean {
  if (request.complete) return false;
  if (request.headers['transfer-encoding'] !== undefined) return true;
  return !(Number(request.headers['content-length'] ?? 0) <= DRAIN_LIMIT);
}

function openConnections(server: NetServer): Promise<number> {
  return new Promise((resolve) => server.getConnections((_error, count) => resolve(count)));
}

/** A moment with no new connection for this long is a quiet one: a balancer with a warm pool is not opening any. */
export const QUIET_MS = 100;
/** Past this, the listener closes even though connections keep arriving. */
const QUIET_WAIT_MAX_MS = 1_000;
/** A turn of the loop this short accepted what was queued when it polled, and little can have arrived since. */
export const SHORT_TURN_MS = 10;

// Closing a listening socket resets the connections Linux queued and Node has not accepted, requests and all, and
// balancers open connections in bursts: so close after QUIET_MS without one, in the check phase right after accepting,
// and only after a short turn: what arrived while a long one ran (a blocked write, a stalled process) is accepted first.
/** Refuses new connections, keeping open ones; `drained` settles once none is left. */
async function stopListening(server: NetServer): Promise<{ drained: Promise<void> }> {
  const started = performance.now();
  let lastArrival = started;
  const arrived = () => (lastArrival = performance.now());
  server.on('connection', arrived);
  for (let turn = Infinity; performance.now() - started < QUIET_WAIT_MAX_MS; turn = await untilCheckPhase()) {
    const quiet = performance.now() - lastArrival >= QUIET_MS;
    if (quiet && turn <= SHORT_TURN_MS) break;
    if (!quiet) await sleep(QUIET_MS);
  }
  server.off('connection', arrived);
  // net.Server's close, not http.Server's: that one also destroys idle connections at once (Node >= 19).
  return { drained: new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve())) };
}

/** Waits for the check phase; resolves with how long that took: the poll phase between, mostly. */
async function untilCheckPhase(): Promise<number> {
  const from = performance.now();
  await nextCheckPhase();
  return performance.now() - from;
}
