// How connections are treated: the drain when stopping, unread bodies, answers below routing, compression, shedding.
import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config.ts';
import { registerCompression } from './compression.ts';
import { answerTransportEdges } from './edges.ts';
import { installLifecycle, type Lifecycle } from './lifecycle.ts';
import { registerShedding, type SheddingLimits } from './load-shedding.ts';

declare module 'fastify' {
  interface FastifyInstance {
    lifecycle: Lifecycle;
    /** An operation's handler and route config with its load shedding: its turn, or its exemption. */
    shedding: Awaited<ReturnType<typeof registerShedding>>;
  }
}

interface TransportOptions {
  /** How much the transport admits at once (src/config.ts says what each limit means). */
  limits: SheddingLimits & Pick<Config, 'COMPRESSION_CONCURRENCY'>;
}

async function transport(app: FastifyInstance, { limits }: TransportOptions): Promise<void> {
  app.decorate('lifecycle', installLifecycle(app));
  answerTransportEdges(app);
  await registerCompression(app, limits.COMPRESSION_CONCURRENCY);
  limitConnections(app.server, limits.MAX_CONNECTIONS);
  app.decorate('shedding', await registerShedding(app, limits));
}

// After observability and security, whose hooks run first: the 503 while stopping carries its request id and CORS headers.
export default fp(transport, { name: 'transport', fastify: '5.x', dependencies: ['observability', 'security'] });

// At most `limit` open connections: past it the one idle the longest is closed, so idle ones cannot keep health probes out.
// No listener per socket: one added to each socket of a burst of new connections made V8 pretenure the arrays of two
// listeners that every request's emitters also build, and each request then outlived a scavenge (docs/performance.md, "Memory").
function limitConnections(server: Server, limit: number): void {
  // Open connections, with those closed since the last count: counted when the limit is passed, so at most `limit` linger.
  const open = new Set<Socket>();
  // Idle connections in the order they became idle: the first is the one idle the longest.
  const idle = new Set<Socket>();
  // Connections yet to send a request, oldest first: a probe is one until it is read, so they are closed after the idle ones.
  const unread = new Set<Socket>();
  const forget = (socket: Socket): void => {
    open.delete(socket);
    idle.delete(socket);
    unread.delete(socket);
  };
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    unread.add(socket);
    if (open.size <= limit) return;
    for (const known of open) if (known.destroyed) forget(known);
    while (open.size > limit) {
      const oldest = idle.values().next().value ?? unread.values().next().value;
      if (oldest === undefined || oldest === socket) break; // all busy: the new one still gets its turn
      forget(oldest);
      oldest.destroy();
    }
  });
  // Idle again once its answer is sent, unless it is closing; at the end of the idle order. One listener for every answer.
  function answered(this: ServerResponse): void {
    const socket = this.req.socket;
    if (!socket.destroyed && open.has(socket)) idle.add(socket);
  }
  server.on('request', (request, response) => {
    idle.delete(request.socket);
    unread.delete(request.socket);
    response.on('finish', answered);
  });
}
