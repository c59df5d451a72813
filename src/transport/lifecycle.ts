// How the service behaves while it stops, so that a rolling deploy loses no request and shows no
// error. First drain() (SIGTERM, for SHUTDOWN_DELAY): readiness fails so that balancers take the
// instance out, while every request, on old and new connections, is served as usual. Then
// stopAccepting(): the listener closes, so new connections are refused (a balancer retries those
// elsewhere, even a POST, since nothing was sent). Only then app.close() (preClose): requests in
// flight, and those that still arrive on open connections, are served with Connection: close, so
// the balancer drops each connection from its pool rather than reusing one about to be closed.
//
// Idle keep-alive connections are not closed at once, as Node's http.Server.close() would do: a
// balancer may have just written its next request on one, and closing then resets that request
// (nginx retries no POST it already wrote). They get IDLE_GRACE_MS in which any request is served
// with Connection: close; only those that stayed idle throughout are closed.
import { Server as NetServer } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** How long a keep-alive connection idle when closing starts may still bring a request (documented in docs/operations.md, "Stopping"). */
export const IDLE_GRACE_MS = 1_000;

export interface Lifecycle {
  /** True from drain() (or closing) on: readiness fails, everything else is served as usual. */
  readonly draining: boolean;
  readonly closing: boolean;
  /** Readiness fails from now on; the stop itself begins with app.close(). */
  drain: () => void;
  /**
   * Closes the listener (at a quiet moment, see quietMoment), keeping open connections. Call it before
   * app.close(), which makes Fastify answer Connection: close at once: each closed connection
   * brings a new one, and those still queued when the listener closes are reset (see quietMoment).
   */
  stopAccepting: () => Promise<void>;
  /** Runs `stop` as soon as closing starts, while connections drain; close() resolves only after it. */
  onClosing: (stop: () => Promise<void>) => void;
}

export function installLifecycle(app: FastifyInstance, idleGraceMs = IDLE_GRACE_MS): Lifecycle {
  const state = { draining: false, closing: false, graceOver: false };
  const stops: (() => Promise<void>)[] = [];
  let stopping: Promise<unknown> = Promise.resolve();
  let listenerClosed: Promise<{ drained: Promise<void> }> | undefined;
  const stopAccepting = () => (listenerClosed ??= app.server.listening ? stopListening(app.server) : Promise.resolve({ drained: Promise.resolve() }));
  app.addHook('preClose', async () => {
    state.draining = true;
    stopping = Promise.all(stops.map((stop) => stop()));
    stopping.catch(() => undefined); // awaited (and so reported) in onClose; not an unhandled rejection meanwhile
    const { drained } = await stopAccepting();
    state.closing = true;
    await drainedOrGraceOver(drained, idleGraceMs);
    // Fastify's server.close() follows: it closes the connections still idle and waits for the rest.
    state.graceOver = true;
  });
  app.addHook('onClose', async () => {
    await stopping;
  });
  // Node then ends the connection after this answer, and the client knows not to reuse it.
  // Callback-style hooks: on every request's path, and an async hook costs a promise each time.
  app.addHook('onSend', (_request, reply, _payload, done) => {
    if (state.closing) reply.header('connection', 'close');
    done();
  });
  // An answer whose headers left just before closing began said keep-alive; once the grace is over
  // nothing would close its connection but KEEP_ALIVE_TIMEOUT, holding the stop open that long.
  app.addHook('onResponse', (_request, reply, done) => {
    if (state.graceOver && reply.getHeader('connection') !== 'close') app.server.closeIdleConnections();
    done();
  });
  return {
    get draining() {
      return state.draining;
    },
    drain: () => {
      state.draining = true;
    },
    stopAccepting: async () => {
      await stopAccepting();
    },
    get closing() {
      return state.closing;
    },
    onClosing: (stop) => {
      stops.push(stop);
    },
  };
}

/** A moment with no new connection for this long is a quiet one: a balancer with a warm pool is not opening any. */
const QUIET_MS = 100;
/** Past this, the listener closes even though connections keep arriving. */
const QUIET_WAIT_MAX_MS = 1_000;

/** Refuses new connections, keeping open ones; `drained` settles once none is left. */
async function stopListening(server: NetServer): Promise<{ drained: Promise<void> }> {
  await quietMoment(server);
  // net.Server's close, not http.Server's: that one also destroys idle connections at once (Node >= 19).
  return { drained: new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve())) };
}

/** Settles once every connection is closed or after `graceMs`, whichever comes first. */
async function drainedOrGraceOver(drained: Promise<void>, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const graceOver = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
  await Promise.race([drained, graceOver]);
  clearTimeout(timer);
  // Timers run before I/O in the event loop: after a stall, let requests already received be read
  // (so their connections are no longer idle) before the idle ones are closed.
  await new Promise((resolve) => setImmediate(resolve));
}

// Closing a listening socket makes Linux reset every connection it has queued that Node has not
// accepted yet, requests already written on them included (nginx retries no such POST). A balancer
// opens connections in bursts (when an instance stalls, its pool runs short), so the listener
// closes after QUIET_MS without one, and in the check phase: right after the poll phase, in which
// Node accepted whatever was queued.
function quietMoment(server: NetServer): Promise<void> {
  return new Promise((resolve) => {
    const started = performance.now();
    let lastArrival = -Infinity;
    const arrived = () => (lastArrival = performance.now());
    server.on('connection', arrived);
    const check = () => {
      const now = performance.now();
      if (now - lastArrival < QUIET_MS && now - started < QUIET_WAIT_MAX_MS) return setTimeout(() => setImmediate(check), QUIET_MS);
      server.off('connection', arrived);
      resolve();
    };
    setTimeout(() => setImmediate(check), QUIET_MS);
  });
}
