// How the service behaves while it stops, so that a rolling deploy loses no request. Once closing
// starts (preClose): readiness fails; the listener closes, so new connections are refused; every
// answer carries Connection: close, those to requests in flight included; a request that still
// arrives on an open connection gets a 503 Error with Retry-After and Connection: close (Fastify's
// own 503 while closing does not match the published Error body, so it is turned off).
//
// Idle keep-alive connections are not closed at once, as Node's server.close() would do: a client
// may have just written its next request on one, and closing then resets that request. They get
// IDLE_GRACE_MS in which any request is answered 503 + Connection: close; only those that stayed
// idle throughout are closed, as a keep-alive timeout would close them.
import { Server as NetServer } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { HttpError } from '../contract/errors.ts';

/** How long a keep-alive connection idle when closing starts may still bring a request (documented in README). */
export const IDLE_GRACE_MS = 1_000;

export interface Lifecycle {
  readonly closing: boolean;
  /** Runs `stop` as soon as closing starts, while connections drain; close() resolves only after it. */
  onClosing: (stop: () => Promise<void>) => void;
}

export function installLifecycle(app: FastifyInstance, idleGraceMs = IDLE_GRACE_MS): Lifecycle {
  const state = { closing: false, graceOver: false };
  const stops: (() => Promise<void>)[] = [];
  let stopping: Promise<unknown> = Promise.resolve();
  app.addHook('preClose', async () => {
    state.closing = true;
    stopping = Promise.all(stops.map((stop) => stop()));
    stopping.catch(() => undefined); // awaited (and so reported) in onClose; not an unhandled rejection meanwhile
    if (app.server.listening) await stopListening(app.server, idleGraceMs);
    // Fastify's server.close() follows: it closes the connections still idle and waits for the rest.
    state.graceOver = true;
  });
  app.addHook('onClose', async () => {
    await stopping;
  });
  // Callback-style hooks: on every request's path, and an async hook costs a promise each time.
  app.addHook('onRequest', (_request, _reply, done) => {
    if (!state.closing) return done();
    done(
      new HttpError(503, 'The service is shutting down; retry on another instance.', {
        'retry-after': '1',
        connection: 'close',
      }),
    );
  });
  // Node then ends the connection after this answer, and the client knows not to reuse it.
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
    get closing() {
      return state.closing;
    },
    onClosing: (stop) => {
      stops.push(stop);
    },
  };
}

/** Refuses new connections, keeping open ones; settles once none is left or after `graceMs`. */
async function stopListening(server: NetServer, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const graceOver = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
  // net.Server's close, not http.Server's: that one also destroys idle connections at once (Node >= 19).
  const drained = new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
  await Promise.race([drained, graceOver]);
  clearTimeout(timer);
  // Timers run before I/O in the event loop: after a stall, let requests already received be read
  // (so their connections are no longer idle) before the idle ones are closed.
  await new Promise((resolve) => setImmediate(resolve));
}
