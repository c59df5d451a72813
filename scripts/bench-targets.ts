// The baselines `npm run bench` measures the service against, each run as its own process:
//   node scripts/bench-targets.ts node     a bare node:http server (the ceiling on this machine)
//   node scripts/bench-targets.ts fastify  a bare Fastify route
// Both read the request body and answer a constant JSON plant; each prints its port when listening.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';

const PLANT = '{"id":1,"name":"Monstera","tag":"aroid"}';

const kind = process.argv[2];
if (kind === 'node') {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(PLANT) });
      response.end(PLANT);
    });
  });
  server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => console.log((server.address() as AddressInfo).port));
} else if (kind === 'fastify') {
  const app = Fastify();
  app.all('/*', async (_request, reply) => reply.type('application/json').send(PLANT));
  await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
  console.log((app.server.address() as AddressInfo).port);
} else {
  console.error('usage: node scripts/bench-targets.ts node|fastify');
  process.exit(2);
}
