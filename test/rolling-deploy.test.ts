// A rolling deploy as a load balancer sees it, on the real process and real sockets: SIGTERM
// while 64 keep-alive connections send without pause loses no request.
import t from 'tap';
import { contractProblems } from './contract.ts';
import { serverEnv, startServer } from './process.ts';
import { openRaw, tryConnect, type RawConnection, type RawResponse } from './raw-http.ts';

const TOKEN = 'rolling-deploy-token-0123456789';
const CONNECTIONS = 64;
/** Creates answered before SIGTERM, on top of at least one answer on every connection. */
const ANSWERS_BEFORE_SIGNAL = CONNECTIONS * 8;

function createRequest(id: number, name: string): string {
  const body = JSON.stringify({ id, name });
  return (
    `POST /plants HTTP/1.1\r\nHost: plants.test\r\nAuthorization: Bearer ${TOKEN}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

/** What is wrong with an answer to a create, from a client's point of view; undefined when nothing is. */
function problemWith(answer: RawResponse, name: string): string | undefined {
  if (answer.status === 200) return answer.body === JSON.stringify({ name }) ? undefined : `200 with ${answer.body}`;
  if (answer.status !== 503) return `${answer.status} ${answer.body}`;
  const problems = contractProblems('POST', '/plants', { statusCode: answer.status, headers: answer.headers, body: answer.body });
  if (!/^\d+$/.test(answer.headers['retry-after'] ?? '')) problems.push('503 without Retry-After');
  if (answer.headers.connection !== 'close') problems.push('503 without Connection: close');
  return problems.length > 0 ? problems.join('; ') : undefined;
}

t.test('SIGTERM with 64 busy keep-alive connections: no reset, nothing unanswered, each connection told to close before it is closed', async (t) => {
  const dir = t.testdir();
  const env = serverEnv(dir, { API_TOKENS: TOKEN });
  const server = await startServer(t, env);
  const port = Number(new URL(server.url).port);

  const acknowledged = new Map<number, string>();
  const refused = new Set<number>();
  /** Requests written whose connection ended without their answer: the client saw a reset or a hang-up. */
  const lost: string[] = [];
  const wrong: string[] = [];
  const answered = new Array<number>(CONNECTIONS).fill(0);
  const after = { keepAlive: 0, closing200: 0, closing503: 0 };
  let signalled = false;
  let newConnectionAfterClose: Promise<string> | undefined;

  const signalOnceBusy = () => {
    if (signalled || acknowledged.size < ANSWERS_BEFORE_SIGNAL || answered.includes(0)) return;
    signalled = true;
    server.child.kill('SIGTERM');
  };

  const keepSending = async (connection: RawConnection, c: number): Promise<void> => {
    let socketError = '';
    connection.socket.on('error', (error: NodeJS.ErrnoException) => (socketError ||= error.code ?? error.message));
    for (let n = 0; ; n++) {
      const id = (c + 1) * 1_000_000 + n;
      const name = `plant ${c}-${n}`;
      connection.socket.write(createRequest(id, name));
      let answer: RawResponse;
      try {
        answer = await connection.response(n);
      } catch {
        lost.push(`connection ${c}, create ${id}${signalled ? ' (after SIGTERM)' : ''}: ${socketError || 'closed without an answer'}`);
        return;
      }
      answered[c]!++;
      const problem = problemWith(answer, name);
      if (problem) wrong.push(`connection ${c}, create ${id}: ${problem}`);
      if (answer.status === 200) acknowledged.set(id, name);
      if (answer.status === 503) refused.add(id);
      if (answer.headers.connection !== 'close') {
        if (signalled) after.keepAlive++;
        signalOnceBusy();
        continue;
      }
      if (answer.status === 200) after.closing200++;
      else after.closing503++;
      // Closing has begun: from now on the listener is closed.
      newConnectionAfterClose ??= tryConnect(port);
      const closed = await connection.closed;
      if (!closed.byServer) wrong.push(`connection ${c}: not closed by the server after Connection: close`);
      return;
    }
  };

  const connections = await Promise.all(Array.from({ length: CONNECTIONS }, () => openRaw(port)));
  await Promise.all(connections.map((connection, c) => keepSending(connection, c)));
  const exit = await server.exited;

  t.ok(signalled, `SIGTERM was sent once ${ANSWERS_BEFORE_SIGNAL} creates were acknowledged on all ${CONNECTIONS} connections`);
  t.same(lost, [], 'no request written on a connection was reset or left unanswered');
  t.same(wrong, [], 'every answer is the created Plant or the documented 503 Error with Retry-After and Connection: close');
  t.equal(after.closing200 + after.closing503, CONNECTIONS, 'every connection ended with an answer saying Connection: close, then the server closed it');
  t.equal(await (newConnectionAfterClose ?? 'never tried: no answer said Connection: close'), 'ECONNREFUSED', 'a new connection after closing began is refused');
  t.comment(
    `after SIGTERM: ${after.keepAlive} answers still kept alive (sent before closing began), ` +
      `${after.closing200} creates in flight answered 200 with Connection: close, ${after.closing503} refused with 503`,
  );
  t.same(exit, { code: 0, signal: null }, 'the process exits 0');
  t.match(server.stdout(), /"msg":"stopped cleanly"/, "and logs 'stopped cleanly'");

  const restarted = await startServer(t, env);
  const missing: string[] = [];
  const checks = [...acknowledged].map(([id, name]) => ({ id, expected: { status: 200, body: JSON.stringify({ id, name }) } }));
  checks.push(...[...refused].map((id) => ({ id, expected: { status: 404, body: '' } })));
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let check = checks.pop(); check; check = checks.pop()) {
        const response = await fetch(`${restarted.url}/plants/${check.id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
        const body = await response.text();
        if (response.status !== check.expected.status || (check.expected.body && body !== check.expected.body)) {
          missing.push(`${check.id}: expected ${check.expected.status}, got ${response.status} ${body}`);
        }
      }
    }),
  );
  t.same(missing, [], `after a restart the ${acknowledged.size} acknowledged creates are stored and the ${refused.size} refused with 503 are not`);
  t.same(await restarted.stop('SIGTERM'), { code: 0, signal: null });
});
