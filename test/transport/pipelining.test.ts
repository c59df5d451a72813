// Requests pipelined ahead of a malformed one, or of one that times out, over real sockets, on both
// stores: every request already parsed is answered, in order, before the Error answer, which says
// Connection: close; then the connection closes, and the plants stored are those answered. The
// writes are held back by a lock on the store until the service has found the failure, so every
// answer is still being computed when it does.
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import t, { type Test } from 'tap';
import { loadConfig } from '../../src/config.ts';
import { openStore } from '../../src/store/factory.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { PlantStore } from '../../src/store/types.ts';
import { contractProblems, isErrorBody } from '../harness/contract.ts';
import { AUTH, build, type TestConfig } from '../harness/helper.ts';
import { openRaw, type RawConnection, type RawResponse } from '../harness/raw-http.ts';
import { freshSchemaUrl, postgresTestOptions } from '../harness/postgres.ts';

const { timeouts: DEFAULT_TIMEOUTS, limits: DEFAULT_LIMITS } = loadConfig({});
/** Plants already stored, tagged so: the GET reads them as one large page (about 130 KB). */
const STORED = 500;

interface Driver {
  name: string;
  /** A fresh store, and a way to hold back its writes (not its reads) until released. */
  open: (t: Test) => Promise<{ store: PlantStore; holdWrites: () => Promise<() => Promise<void>> }>;
}

const sqlite: Driver = {
  name: 'SQLite',
  open: async (t) => {
    const path = join(t.testdir(), 'plants.db');
    return {
      store: new SqliteStore(path),
      // Another connection's write transaction: the store's writes wait for it on timers (up to LOCK_WAIT_MS).
      holdWrites: async () => {
        const holder = new DatabaseSync(path);
        holder.exec('BEGIN IMMEDIATE');
        return async () => {
          if (!holder.isOpen) return;
          holder.exec('COMMIT');
          holder.close();
        };
      },
    };
  },
};

const postgres: Driver = {
  name: 'PostgreSQL',
  open: async () => {
    const url = await freshSchemaUrl();
    // Writes wait for the lock as long as the test holds it, however slow the machine.
    const store = await openStore(url, { poolSize: 4, queryTimeoutMs: 120_000 });
    return {
      store,
      // EXCLUSIVE blocks inserts and lets reads through.
      holdWrites: async () => {
        const holder = new pg.Client({ connectionString: url });
        await holder.connect();
        await holder.query('BEGIN');
        await holder.query('LOCK TABLE plants IN EXCLUSIVE MODE');
        let released: Promise<void> | undefined;
        return () => (released ??= holder.query('COMMIT').then(() => holder.end()));
      },
    };
  },
};

const post = (id: number, version = '1.1', extra = ''): string => {
  const body = `{"id":${id},"name":"pipelined ${id}"}`;
  return (
    `POST /plants HTTP/${version}\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${body.length}\r\nX-Request-Id: post-${id}\r\n${extra}\r\n${body}`
  );
};
const PAGE = '/plants?limit=1000&tag=stored';
const page = (id: string, version = '1.1', extra = ''): string =>
  `GET ${PAGE} HTTP/${version}\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nX-Request-Id: ${id}\r\n${extra}\r\n`;

/** What follows the valid requests, the answer it gets, and the operation documenting that answer. */
interface Malformed {
  label: string;
  bytes: string;
  status: number;
  documentedOn: [string, string];
}

// Answers to what is no operation are documented at the root; those that may meet any request, on each operation.
const NOT_AN_OPERATION: [string, string] = ['NOT', 'HTTP'];

const MALFORMED: Malformed[] = [
  { label: 'a control character in a header value', bytes: 'GET /plants HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n', status: 400, documentedOn: ['GET', '/plants'] },
  { label: 'an invalid method', bytes: 'G(T /plants HTTP/1.1\r\nHost: x\r\n\r\n', status: 400, documentedOn: NOT_AN_OPERATION },
  { label: 'not HTTP at all', bytes: 'NOT HTTP AT ALL\r\n\r\n', status: 400, documentedOn: NOT_AN_OPERATION },
  {
    // The parser fails inside this request's body, after its headers reached the service.
    label: 'a chunk size that is not hexadecimal',
    bytes: `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
    status: 400,
    documentedOn: ['POST', '/plants'],
  },
  { label: 'headers too large', bytes: `GET /plants HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, status: 431, documentedOn: ['GET', '/plants'] },
];

async function listening(t: Test, driver: Driver, config: TestConfig = {}) {
  const { store, holdWrites } = await driver.open(t);
  const ids = Array.from({ length: STORED }, (_, n) => BigInt(n + 1));
  await Promise.all(ids.map((id) => store.plants.createPlant({ id, name: `stored ${id} `.padEnd(200, 'x'), tag: 'stored' })));
  // No load shedding: on a busy machine its 503s would stand in for the answers under test.
  const limits = { ...DEFAULT_LIMITS, maxEventLoopDelayMs: 0, maxHeapUsedPercent: 0 };
  const { app } = await build(t, { limits, ...config }, { store });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, store, holdWrites, port: (app.server.address() as AddressInfo).port };
}

type Listening = Awaited<ReturnType<typeof listening>>;

interface Exchange {
  responses: RawResponse[];
  byServer: boolean;
}

interface Steps {
  /** Half-closes the connection with the write. */
  halfClose?: boolean;
  /** Written once the service found the malformed request, before the writes are released. */
  then?: (connection: RawConnection) => Promise<void>;
}

/**
 * Writes `bytes` in one write while the store's writes are held, waits for the service to find the
 * malformed request, releases the writes, and reads until the server closes the connection.
 */
async function exchange(service: Listening, bytes: string, { halfClose = false, then }: Steps = {}): Promise<Exchange> {
  const release = await service.holdWrites();
  try {
    const connection = await openRaw(service.port);
    const failed = once(service.app.server, 'clientError');
    if (halfClose) connection.socket.end(bytes);
    else connection.socket.write(bytes);
    const [, socket] = (await failed) as [Error, Socket];
    // The service sees the half-close before any answer goes out: Node then ends the connection after the last.
    if (halfClose && !socket.readableEnded) await once(socket, 'end');
    await then?.(connection);
    await release();
    const { byServer } = await connection.closed;
    return { responses: connection.responses, byServer };
  } catch (error) {
    await release();
    throw error;
  }
}

/** The requests the service parsed on its connections, in order. */
function parsedRequests(service: Listening): IncomingMessage[] {
  const requests: IncomingMessage[] = [];
  service.app.server.on('request', (request: IncomingMessage) => requests.push(request));
  return requests;
}

/** The valid answers come first, in order, each its own; then the Error answer closes the connection. */
function checkAnswers(t: Test, { responses, byServer }: Exchange, ids: number[], pageId: string, last: Omit<Malformed, 'bytes'>): void {
  t.same(responses.map((answer) => answer.statusCode), [...ids.map(() => 200), 200, last.status], 'every answer, in order, then the Error');
  ids.forEach((id, n) => {
    const answer = responses[n];
    t.equal(answer?.headers['x-request-id'], `post-${id}`, `POST ${id}: its own request id`);
    t.same(JSON.parse(answer?.body ?? 'null'), { name: `pipelined ${id}` }, `POST ${id}: the plant created`);
    if (answer) t.same(contractProblems('POST', '/plants', answer), [], `POST ${id}: documented`);
  });
  const read = responses[ids.length];
  t.equal(read?.headers['x-request-id'], pageId, 'GET: its own request id');
  t.equal((JSON.parse(read?.body ?? '[]') as unknown[]).length, STORED, 'GET: the whole page');
  if (read) t.same(contractProblems('GET', PAGE, read), [], 'GET: documented');
  t.notOk(responses.slice(0, -1).some((answer) => answer.headers.connection === 'close'), 'none of them closes the connection');
  const error = responses[ids.length + 1];
  isErrorBody(t, error, last.status, last.label);
  t.equal(error?.headers.connection, 'close', 'the Error says Connection: close');
  if (error) t.same(contractProblems(...last.documentedOn, error), [], `the Error is documented on ${last.documentedOn.join(' ')}`);
  t.ok(byServer, 'and the server closes the connection');
}

/** The plants stored among `ids`, POSTed first, are exactly those whose creation was answered. */
async function checkStored(t: Test, store: PlantStore, ids: number[], { responses }: Exchange): Promise<void> {
  const stored = [];
  for (const id of ids) if (await store.plants.getPlant(BigInt(id))) stored.push(id);
  const answered = ids.filter((_id, n) => responses[n]?.statusCode === 200);
  t.same(stored, answered, `the plants stored (${stored.join(', ') || 'none'}) are exactly those answered`);
}

for (const driver of [sqlite, postgres]) {
  const options = driver === postgres ? await postgresTestOptions() : { skip: false as const };

  t.test(`${driver.name}: valid requests pipelined before a malformed one are all answered, in order, before its Error`, options, async (t) => {
    const service = await listening(t, driver);
    let next = 10_000;
    for (const malformed of MALFORMED) {
      for (const halfClose of [false, true]) {
        const label = `${malformed.label}${halfClose ? ', then a half-close' : ''}`;
        await t.test(label, async (t) => {
          const ids = [next++, next++];
          const bytes = post(ids[0]!) + post(ids[1]!) + page(`page-${ids[0]}`) + malformed.bytes;
          // Node reports the failed parse again with each further chunk: still one Error answer, the last.
          const more = async ({ socket }: RawConnection): Promise<void> => {
            socket.write('MORE GARBAGE\r\n\r\n');
          };
          const answers = await exchange(service, bytes, halfClose ? { halfClose } : { then: more });
          checkAnswers(t, answers, ids, `page-${ids[0]}`, { ...malformed, label });
          await checkStored(t, service.store, ids, answers);
        });
      }
    }
  });

  t.test(`${driver.name}: HTTP/1.0`, options, async (t) => {
    const service = await listening(t, driver);
    await t.test('kept alive: every answer says keep-alive, then the Error closes', async (t) => {
      const ids = [20_001, 20_002];
      const keepAlive = 'Connection: keep-alive\r\n';
      const bytes = post(ids[0]!, '1.0', keepAlive) + post(ids[1]!, '1.0', keepAlive) + page('page-1.0', '1.0', keepAlive) + 'NOT HTTP\r\n\r\n';
      const answers = await exchange(service, bytes);
      checkAnswers(t, answers, ids, 'page-1.0', { status: 400, label: 'not HTTP', documentedOn: NOT_AN_OPERATION });
      t.same(answers.responses.slice(0, -1).map((answer) => answer.headers.connection), ['keep-alive', 'keep-alive', 'keep-alive'], 'each says keep-alive');
      await checkStored(t, service.store, ids, answers);
    });
    await t.test('not kept alive: the answer closes the connection, and nothing follows it', async (t) => {
      const answers = await exchange(service, post(20_003, '1.0') + 'NOT HTTP\r\n\r\n');
      const { responses, byServer } = answers;
      t.same(responses.map((answer) => answer.statusCode), [200], 'the one answer the client can expect');
      t.equal(responses[0]?.headers.connection, 'close', 'saying Connection: close');
      t.equal(responses[0]?.headers['x-request-id'], 'post-20003', 'its own');
      t.ok(byServer, 'and the server closes the connection');
      await checkStored(t, service.store, [20_003], answers);
    });
  });
}

// On PostgreSQL only, whose writes wait for a lock as long as the test holds it: SQLite's give up after
// LOCK_WAIT_MS (5 s), a deadline the timeouts (HEADERS_TIMEOUT, REQUEST_TIMEOUT, checked every second) would race.
t.test('PostgreSQL: a request timing out behind pipelined ones gets its 408 after their answers', await postgresTestOptions(), async (t) => {
  const timeouts = { ...DEFAULT_TIMEOUTS, headersMs: 500, requestMs: 1_000 };
  const service = await listening(t, postgres, { timeouts });
  const cases: [string, string, Malformed['documentedOn']][] = [
    ['headers that never end (HEADERS_TIMEOUT)', 'GET /plants HTTP/1.1\r\nHost: x\r\nX-Slow: ', ['GET', '/plants']],
    ['a body that never comes whole (REQUEST_TIMEOUT)', post(30_000).slice(0, -10), ['POST', '/plants']],
  ];
  let next = 30_001;
  for (const [label, bytes, documentedOn] of cases) {
    await t.test(label, async (t) => {
      const ids = [next++, next++];
      const answers = await exchange(service, post(ids[0]!) + post(ids[1]!) + page(`page-${ids[0]}`) + bytes);
      checkAnswers(t, answers, ids, `page-${ids[0]}`, { status: 408, label, documentedOn });
      await checkStored(t, service.store, ids, answers);
    });
  }
  t.equal(await service.store.plants.getPlant(30_000n), undefined, 'the request that never arrived whole stored nothing');

  await t.test('headers completed after HEADERS_TIMEOUT: that request is refused unread, with the 408', async (t) => {
    const ids = [30_101, 30_102];
    const late = post(30_100);
    const cut = late.indexOf('X-Request-Id');
    const then = async ({ socket, closed }: RawConnection): Promise<void> => {
      const parsed = once(service.app.server, 'request');
      socket.write(late.slice(cut));
      await Promise.race([parsed, closed]);
    };
    const answers = await exchange(service, post(ids[0]!) + post(ids[1]!) + page('page-late') + late.slice(0, cut), { then });
    checkAnswers(t, answers, ids, 'page-late', { status: 408, label: 'the late request', documentedOn: ['POST', '/plants'] });
    t.equal(answers.responses.at(-1)?.headers['x-request-id'], 'post-30100', 'the 408 is that request\'s answer');
    await checkStored(t, service.store, ids, answers);
    t.equal(await service.store.plants.getPlant(30_100n), undefined, 'and it stored nothing');
  });

  await t.test('a body completed after REQUEST_TIMEOUT: it is served, and the connection goes on', async (t) => {
    const ids = [30_201, 30_202, 30_203];
    const slow = post(ids[2]!);
    const release = await service.holdWrites();
    t.teardown(release);
    const connection = await openRaw(service.port);
    t.teardown(() => connection.destroy());
    const failed = once(service.app.server, 'clientError');
    const requests = parsedRequests(service);
    connection.socket.write(post(ids[0]!) + post(ids[1]!) + page('page-slow') + slow.slice(0, -10));
    const [error] = (await failed) as [NodeJS.ErrnoException];
    t.equal(error.code, 'ERR_HTTP_REQUEST_TIMEOUT', 'the body timed out');
    const slowRequest = requests[3]!;
    const whole = once(slowRequest, 'end').catch(() => undefined); // an abort is seen as the connection closing
    connection.socket.write(slow.slice(-10));
    await Promise.race([whole, connection.closed]);
    await release();
    // Each answer, or none once the connection closed.
    const answers = await Promise.all([0, 1, 2, 3].map((n) => connection.response(n).catch(() => undefined)));
    t.same(answers.map((answer) => answer?.statusCode), [200, 200, 200, 200], 'every request answered, the slow one too');
    t.equal(answers[3]?.headers['x-request-id'], `post-${ids[2]}`, 'its own answer');
    t.notOk(answers.some((answer) => answer?.headers.connection === 'close'), 'none closes the connection');
    connection.socket.write(page('page-after'));
    const after = await connection.response(4).catch(() => undefined);
    t.equal(after?.statusCode, 200, 'which serves the next request as any other');
    await checkStored(t, service.store, ids, { responses: connection.responses, byServer: false });
  });
});
