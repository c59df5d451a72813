// How connections are treated: the drain when stopping, unread bodies, answers below routing, compression, shedding.
import type { FastifyInstance, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config.ts';
import type { OperationFacts } from '../contract/operation-facts.ts';
import { compressionOf, registerCompression } from './compression.ts';
import { answerTransportEdges } from './edges.ts';
import { limitConnections } from './connections.ts';
import { installLifecycle, type Lifecycle } from './lifecycle.ts';
import { registerPressureChecks, sheddingFor, type ShedRouteOptions } from './load-shedding.ts';
import { closeOnUnreadBodies } from './unread-body.ts';

declare module 'fastify' {
  interface FastifyInstance {
    lifecycle: Lifecycle;
    /** An operation's handler and route config with its load shedding: its turn, or its exemption. */
    shedding: (facts: OperationFacts, handler: RouteOptions['handler']) => ShedRouteOptions;
    /** An operation's `compress` route option: compression options, or false. */
    compressionFor: typeof compressionOf;
  }
}

export interface TransportOptions {
  /** How much the transport admits at once (src/config.ts says what each limit means). */
  limits: Config['limits'];
}

async function transport(app: FastifyInstance, { limits }: TransportOptions): Promise<void> {
  app.decorate('lifecycle', installLifecycle(app));
  closeOnUnreadBodies(app);
  answerTransportEdges(app);
  await registerCompression(app, limits.compressions);
  app.decorate('compressionFor', compressionOf);
  limitConnections(app.server, limits.connections);
  app.decorate('shedding', sheddingFor(limits));
  await registerPressureChecks(app, limits);
}

// After observability and security, whose request hooks run first: the 503 while stopping carries
// its request id and, for a browser app, its CORS headers.
export default fp(transport, { name: 'transport', fastify: '5.x', dependencies: ['observability', 'security'] });
