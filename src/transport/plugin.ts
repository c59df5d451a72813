// How connections are treated: the drain when the service stops (lifecycle.ts), bodies nobody will
// read, the answers decided below routing (edges.ts), and compression for the routes built with it.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { registerCompression } from './compression.ts';
import { answerTransportEdges } from './edges.ts';
import { installLifecycle, type Lifecycle } from './lifecycle.ts';
import { closeOnUnreadBodies } from './unread-body.ts';

declare module 'fastify' {
  interface FastifyInstance {
    lifecycle: Lifecycle;
  }
}

async function transport(app: FastifyInstance): Promise<void> {
  app.decorate('lifecycle', installLifecycle(app));
  closeOnUnreadBodies(app);
  answerTransportEdges(app);
  await registerCompression(app);
}

// After observability and security, whose request hooks run first: the 503 while stopping carries
// its request id and, for a browser app, its CORS headers.
export default fp(transport, { name: 'transport', fastify: '5.x', dependencies: ['observability', 'security'] });
