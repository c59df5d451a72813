// TRUST_PROXY: which address is the client's, as logs and the failed-authentication guard see it.
// Requests are injected with the proxy's socket address (remoteAddress) and its X-Forwarded-For.
import type { FastifyInstance } from 'fastify';
import t from 'tap';
import type { Config } from '../../src/config.ts';
import { loadConfig } from '../../src/config.ts';
import { AUTH, build } from '../harness/helper.ts';

const PROXY = '10.0.0.5';
let requests = 0;

/** The client address the service logged for one request from `peer` carrying `forwardedFor`. */
async function loggedClient(app: FastifyInstance, logs: () => string, peer: string, forwardedFor?: string): Promise<unknown> {
  const id = `client-address-${++requests}`;
  const headers = { ...AUTH, 'x-request-id': id, ...(forwardedFor !== undefined && { 'x-forwarded-for': forwardedFor }) };
  const response = await app.inject({ method: 'GET', url: '/plants', headers, remoteAddress: peer });
  if (response.statusCode !== 200) throw new Error(`GET /plants answered ${response.statusCode}`);
  const line = logs()
    .split('\n')
    .filter(Boolean)
    .map((text) => JSON.parse(text) as { reqId?: string; msg?: string; req?: { remoteAddress?: unknown } })
    .find((entry) => entry.reqId === id && entry.msg === 'request completed');
  return line?.req?.remoteAddress;
}

const trustProxy = (value: string): Config['TRUST_PROXY'] => loadConfig({ TRUST_PROXY: value }).TRUST_PROXY;

t.test('TRUST_PROXY picks the client address from X-Forwarded-For, and it is the one logged', async (t) => {
  const cases: [setting: string, peer: string, forwardedFor: string | undefined, client: string][] = [
    ['false', PROXY, '203.0.113.50', PROXY],
    ['true', PROXY, '203.0.113.50, 198.51.100.7', '203.0.113.50'],
    ['1', PROXY, '203.0.113.50, 198.51.100.7', '198.51.100.7'],
    ['2', PROXY, '203.0.113.50, 198.51.100.7', '203.0.113.50'],
    ['10.0.0.0/8', PROXY, '203.0.113.50, 198.51.100.7', '198.51.100.7'],
    ['10.0.0.0/8', PROXY, '198.51.100.7, 10.0.0.9', '198.51.100.7'],
    ['10.0.0.0/8,192.168.1.1', PROXY, '203.0.113.50, 192.168.1.1', '203.0.113.50'],
    ['10.0.0.0/8', PROXY, undefined, PROXY],
    // An untrusted peer's X-Forwarded-For is ignored: a client cannot choose its own address.
    ['10.0.0.0/8', '192.0.2.1', '203.0.113.50', '192.0.2.1'],
    ['loopback', '192.0.2.1', '203.0.113.50', '192.0.2.1'],
  ];
  for (const [setting, peer, forwardedFor, client] of cases) {
    const { app, logs } = await build(t, { LOG_LEVEL: 'info', TRUST_PROXY: trustProxy(setting) });
    t.equal(await loggedClient(app, logs, peer, forwardedFor), client, `TRUST_PROXY=${setting}, from ${peer}, X-Forwarded-For: ${forwardedFor}`);
  }
});

t.test('behind a trusted proxy, the failed-authentication guard counts each client apart', async (t) => {
  const { app } = await build(t, { AUTH_FAILURES_PER_MINUTE: 2, TRUST_PROXY: trustProxy('10.0.0.0/8') });
  const attempt = (client: string) =>
    app.inject({ method: 'GET', url: '/plants', headers: { authorization: 'Bearer wrong-token-abcdefghij', 'x-forwarded-for': client }, remoteAddress: PROXY });
  for (let i = 1; i <= 2; i++) t.equal((await attempt('203.0.113.50')).statusCode, 401, `failure ${i} from 203.0.113.50`);
  t.equal((await attempt('203.0.113.50')).statusCode, 429, 'its next failure is 429');
  t.equal((await attempt('198.51.100.7')).statusCode, 401, 'another client behind the same proxy is not blocked');
  // Without trust, the proxy's address would be the key: the other client would be 429.
});
