// A refused webhook target never says which address its host name resolved to, so that the service
// is no lookup service for internal names: real server processes refuse a name that resolves to
// loopback, at registration (400) and, subscribed while private networks were allowed, at delivery
// (the delivery's lastError); neither message holds an address the name resolves to.
import t from 'tap';
import { lookup } from 'node:dns/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serverEnv, startServer } from '../harness/process.ts';

const TOKEN = 'webhook-target-privacy-token-0123456789';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const REFUSED = 'resolves to a loopback, private, link-local or reserved address';

t.test('a host name refused for what it resolves to is refused without naming the address', async (t) => {
  const addresses = (await lookup('localhost', { all: true })).map((entry) => entry.address);
  t.ok(addresses.length > 0, `localhost resolves to ${addresses.join(', ')}`);
  let requests = 0;
  const receiver = createServer((request, response) => {
    requests += 1;
    response.writeHead(204).end();
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => receiver.close(() => resolve())));
  const url = `http://localhost:${(receiver.address() as AddressInfo).port}/hooks`;
  const dir = t.testdir();

  // Subscribed while private networks are allowed, as before an operator turns that off.
  const allowing = await startServer(t, serverEnv(dir, { API_TOKENS: TOKEN, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }));
  const subscribed = await fetch(`${allowing.url}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url }) });
  t.equal(subscribed.status, 201, `${url} is subscribed while private networks are allowed`);
  const { id } = (await subscribed.json()) as { id: number };
  t.same(await allowing.stop('SIGTERM'), { code: 0, signal: null });

  const server = await startServer(t, serverEnv(dir, { API_TOKENS: TOKEN, WEBHOOK_RETRY_SCHEDULE: '100ms' }));
  const registration = await fetch(`${server.url}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url }) });
  t.equal(registration.status, 400, 'registration refuses it');
  const { message } = (await registration.json()) as { message: string };
  t.equal(message, `The request body field "url" ${REFUSED}.`, 'saying why, in general terms');
  for (const address of addresses) t.notOk(message.includes(address), `the message does not name ${address}`);

  const created = await fetch(`${server.url}/plants`, { method: 'POST', headers, body: '{"id":1,"name":"Fern"}' });
  t.equal(created.status, 200, 'a plant change queues a delivery to the subscribed name');
  await server.waitFor('stdout', /webhook delivery failed for good after its last attempt/);
  const deliveries = (await (await fetch(`${server.url}/webhooks/${id}/deliveries`, { headers })).json()) as { status: string; lastError?: string }[];
  t.match(deliveries, [{ status: 'failed' }], 'the delivery failed for good');
  const lastError = deliveries[0]?.lastError ?? '';
  t.match(lastError, `localhost ${REFUSED}`, `refused at connection: ${lastError}`);
  for (const address of addresses) t.notOk(lastError.includes(address), `the delivery's lastError does not name ${address}`);
  t.equal(requests, 0, 'the receiver got nothing');
  t.same(await server.stop('SIGTERM'), { code: 0, signal: null });
});
