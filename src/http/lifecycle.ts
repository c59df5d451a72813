// How the service behaves while it stops. Fastify's own 503 while closing does not match the
// published Error body, so it is turned off and replaced: once closing starts (preClose),
// readiness fails and any request that still arrives on an open connection gets a 503 Error
// with Retry-After and Connection: close; requests already in flight finish normally.
import type { FastifyInstance } from 'fastify';
import { HttpError } from './errors.ts';

export interface Lifecycle {
  readonly closing: boolean;
}

export function installLifecycle(app: FastifyInstance): Lifecycle {
  const state = { closing: false };
  app.addHook('preClose', async () => {
    state.closing = true;
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
  // Node closes idle connections once, when closing starts; a connection whose request was in
  // flight then becomes idle later and would hold the close open until KEEP_ALIVE_TIMEOUT.
  app.addHook('onResponse', (_request, _reply, done) => {
    if (state.closing) app.server.closeIdleConnections();
    done();
  });
  return state;
}
