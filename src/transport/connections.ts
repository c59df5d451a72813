// At most `limit` open connections: past it the one idle the longest is closed (never one with a request in flight),
// so idle connections cannot exhaust the file descriptors and keep health probes out.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export function limitConnections(server: Server, limit: number): void {
  const open = new Set<Socket>();
  // Idle connections in the order they became idle: the first is the one idle the longest.
  const idle = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    idle.add(socket); // no request yet
    socket.once('close', () => {
      open.delete(socket);
      idle.delete(socket);
    });
    while (open.size > limit) {
      const oldest = idle.values().next().value;
      if (oldest === undefined || oldest === socket) break; // all busy: the new one still gets its turn
      idle.delete(oldest);
      open.delete(oldest);
      oldest.destroy();
    }
  });
  server.on('request', (request, response) => {
    const socket = request.socket;
    idle.delete(socket);
    // Idle again once its answer is sent, unless it is closing; at the end of the idle order.
    response.once('finish', () => {
      if (!socket.destroyed && open.has(socket)) idle.add(socket);
    });
  });
}
