// How connections are treated: the drain when the service stops (lifecycle.ts), bodies nobody will
// read, the answers decided below routing (edges.ts), and compression for the routes built with it.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { LimitsConfig } from '../config.ts';
import { registerCompression } from './compression.ts';
import { createCompressionGate, gateCompressedRoutes } from './compression-gate.ts';
import { answerTransportEdges } from './edges.ts';
import { limitConnections } from './connections.ts';
import { installLifecycle, type Lifecycle } from './lifecycle.ts';
import { closeOnUnreadBodies } from './unread-body.ts';

declare module 'fastify' {
  interface FastifyInstance {
    lifecycle: Lifecycle;
  }
}

export interface TransportOptions {
  limits: LimitsConfig;
}

/** The limits when none are configured: those of src/config.ts's defaults. */
export const DEFAULT_LIMITS: LimitsConfig = { compressions: 4, connections: 1000 };

async function transport(app: FastifyInstance, { limits }: TransportOptions): Promise<void> {
  app.decorate('lifecycle', installLifecycle(app));
  closeOnUnreadBodies(app);
  answerTransportEdges(app);
  await registerCompression(app);
  gateCompressedRoutes(app, createCompressionGate(limits.compressions));
  limitConnections(app.server, limits.connections);
}

// After observability and security, whose request hooks run first: the 503 while stopping carries
// its request id and, for a browser app, its CORS headers.
export default fp(transport, { name: 'transport', fastify: '5.x', dependencies: ['observability', 'security'] });
