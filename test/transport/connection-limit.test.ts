// MAX_CONNECTIONS over real sockets: at the limit, the connection idle the longest is closed to
// admit a new one (a health probe gets in whatever idle connections a client holds), one yet to
// send its request only after those, and a connection with a request in flight never.
import type { AddressInfo, Server } from 'node:net';
import t from 'tap';
import { AUTH, build } from '../harness/helper.ts';
import { openRaw } from '../harness/raw-http.ts';

const HEALTHZ = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';

t.test('at MAX_CONNECTIONS, the oldest idle connection is closed to admit a new one; one with a request in flight stays', async (t) => {
  const { app } = await build(t, { MAX_CONNECTIONS: 3 });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;

  // In flight: its body is still to come. The 100 Continue shows the server has the request.
  const busy = await openRaw(port);
  const body = JSON.stringify({ id: 1, name: 'Monstera' });
  busy.socket.write(
    `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`,
  );
  t.equal((await busy.response(0)).statusCode, 100);

  const oldest = await openRaw(port);
  oldest.socket.write(HEALTHZ);
  t.equal((await oldest.response(0)).statusCode, 200);
  const newer = await openRaw(port);
  newer.socket.write(HEALTHZ);
  t.equal((await newer.response(0)).statusCode, 200);

  // The fourth connection: the probe is answered, and the connection idle the longest is closed.
  const probe = await openRaw(port);
  probe.socket.write(HEALTHZ);
  t.equal((await probe.response(0)).statusCode, 200, 'the probe is answered');
  t.same(await oldest.closed, { byServer: true }, 'the connection idle the longest was closed by the server');

  // The others stay usable, the one in flight included.
  busy.socket.write(body);
  const answered = await busy.response(1);
  t.equal(answered.statusCode, 200, `the request in flight is answered: ${answered.body}`);
  newer.socket.write(HEALTHZ);
  t.equal((await newer.response(1)).statusCode, 200, 'the newer idle connection is still open');
  for (const connection of [busy, newer, probe]) connection.destroy();
});

t.test('at MAX_CONNECTIONS, a connection yet to send its request (a probe being read) is closed only after the idle served ones', async (t) => {
  const { app } = await build(t, { MAX_CONNECTIONS: 2 });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;

  const fresh = await openRaw(port);
  const served = await openRaw(port);
  served.socket.write(HEALTHZ);
  t.equal((await served.response(0)).statusCode, 200);

  // The third connection: the served one is closed, though the one without a request came first.
  const probe = await openRaw(port);
  probe.socket.write(HEALTHZ);
  t.equal((await probe.response(0)).statusCode, 200, 'the new connection is answered');
  t.same(await served.closed, { byServer: true }, 'the idle served connection was closed by the server');
  fresh.socket.write(HEALTHZ);
  t.equal((await fresh.response(0)).statusCode, 200, 'the connection yet to send its request is answered');
  for (const connection of [fresh, probe]) connection.destroy();
});

t.test('a connection its client closed no longer counts: at MAX_CONNECTIONS the idle ones still open stay', async (t) => {
  const { app } = await build(t, { MAX_CONNECTIONS: 2 });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;

  // Served in this order: `older` is the connection idle the longest.
  const older = await openRaw(port);
  older.socket.write(HEALTHZ);
  t.equal((await older.response(0)).statusCode, 200);
  const gone = await openRaw(port);
  gone.socket.write(HEALTHZ);
  t.equal((await gone.response(0)).statusCode, 200);
  gone.destroy();
  while ((await openConnections(app.server)) > 1) await new Promise((resolve) => setImmediate(resolve));

  // Two open with the new one: within the limit, so nothing is closed.
  const probe = await openRaw(port);
  probe.socket.write(HEALTHZ);
  t.equal((await probe.response(0)).statusCode, 200, 'the new connection is answered');
  older.socket.write(HEALTHZ);
  t.equal((await older.response(1)).statusCode, 200, 'the connection idle the longest is still open');
  for (const connection of [older, probe]) connection.destroy();
});

function openConnections(server: Server): Promise<number> {
  return new Promise((resolve, reject) => server.getConnections((error, count) => (error ? reject(error) : resolve(count))));
}
