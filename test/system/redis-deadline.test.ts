// Redis on the rate limit's path, with a redis-server of our own (test/harness/redis-server.ts)
// frozen with SIGSTOP: requests are answered (the tap timeout is the bound, no duration is
// asserted), the condition shows in /metrics and in one log line, limits are shared again after the
// thaw, a frozen Redis does not hold the shutdown, and a request checked while the connection to
// Redis is still being set up counts against the shared budget.
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { redisServerAvailable, startRedisServer, type RedisServer } from '../harness/redis-server.ts';
import { build } from '../harness/helper.ts';
import { serverEnv, startServer, type RunningServer } from '../harness/process.ts';

const FROZEN_TOKEN = 'redis-deadline-frozen-0123456789';
const FRESH_TOKEN = 'redis-deadline-fresh-0123456789ab';
const WARNING = /"level":40,.*"msg":"Redis did not answer within REDIS_TIMEOUT/g;
const RECOVERED = /"level":30,.*"msg":"Redis answers again/;

// Without CI a missing redis-server skips visibly; in CI it is a failure.
const missing = !redisServerAvailable();
const skip = missing && process.env.CI !== 'true' && 'redis-server is not on PATH';

async function ownRedis(t: Test): Promise<RedisServer> {
  if (missing) t.fail('redis-server must be on PATH in CI');
  const redis = await startRedisServer();
  t.teardown(() => redis.stop());
  return redis;
}

function get(server: RunningServer, token: string): Promise<number> {
  return fetch(`${server.url}/plants`, { headers: { authorization: `Bearer ${token}` } }).then(async (response) => {
    await response.arrayBuffer();
    return response.status;
  });
}

async function skipped(server: RunningServer, reason: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = new RegExp(`^rate_limit_checks_skipped_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
  return line ? Number(line[1]) : NaN;
}

t.test('a frozen Redis: requests are answered, /metrics and one warning say so, and limits are shared again after the thaw', { skip }, async (t) => {
  const redis = await ownRedis(t);
  const env = serverEnv(t.testdir(), {
    RATE_LIMIT_PER_MINUTE: '3',
    REDIS_URL: redis.url,
    API_TOKENS: `${FROZEN_TOKEN},${FRESH_TOKEN}`,
    // Long enough that a Redis answering on a busy machine is never taken for a hung one.
    REDIS_TIMEOUT: '1s',
  });
  const a = await startServer(t, env);
  const b = await startServer(t, { ...env, DATABASE_URL: `sqlite:${join(t.testdir(), 'b.db')}` });
  t.same([await get(a, FROZEN_TOKEN), await get(b, FROZEN_TOKEN)], [200, 200], 'both instances served with Redis up');

  redis.freeze();
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push(await get(a, FROZEN_TOKEN));
  t.same(statuses, [200, 200, 200, 200, 200, 200], 'every request is answered, unlimited, while Redis is frozen');
  t.equal(await skipped(a, 'timeout'), 6, '/metrics counts each skipped check, with its reason');
  t.equal(a.stdout().match(WARNING)?.length, 1, `one warning, not one per request:\n${a.stdout().match(WARNING)?.join('\n')}`);

  redis.thaw();
  await a.waitFor('stdout', RECOVERED);
  const shared: number[] = [];
  for (const server of [a, b, a, b, a]) shared.push(await get(server, FRESH_TOKEN));
  t.same(shared, [200, 200, 200, 429, 429], 'after the thaw, both instances share one budget again');
  t.equal(a.stdout().match(WARNING)?.length, 1, 'no further warning once Redis answers');
});

t.test('a stopped Redis: requests are answered meanwhile, and the reconnection to a new one shares limits again', { skip }, async (t) => {
  const first = await ownRedis(t);
  const env = serverEnv(t.testdir(), { RATE_LIMIT_PER_MINUTE: '3', REDIS_URL: first.url, API_TOKENS: `${FROZEN_TOKEN},${FRESH_TOKEN}`, REDIS_TIMEOUT: '1s' });
  const a = await startServer(t, env);
  const b = await startServer(t, { ...env, DATABASE_URL: `sqlite:${join(t.testdir(), 'b.db')}` });
  t.same([await get(a, FROZEN_TOKEN), await get(b, FROZEN_TOKEN)], [200, 200], 'both instances served with Redis up');

  await first.stop();
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push(await get(a, FROZEN_TOKEN));
  t.same(statuses, [200, 200, 200, 200], 'every request is answered, unlimited, while Redis is gone');
  // The first check may be sent before the instance has seen the connection close (then it is late).
  t.equal((await skipped(a, 'unavailable')) + (await skipped(a, 'timeout')), 4, '/metrics counts each skipped check');
  t.equal(a.stdout().match(WARNING)?.length, 1, 'one warning');

  const second = await startRedisServer({ port: first.port });
  t.teardown(() => second.stop());
  await Promise.all([a.waitFor('stdout', RECOVERED), b.waitFor('stdout', RECOVERED)]);
  const shared: number[] = [];
  for (const server of [a, b, a, b, a]) shared.push(await get(server, FRESH_TOKEN));
  t.same(shared, [200, 200, 200, 429, 429], 'once reconnected, both instances share one budget again');
});

t.test('a frozen Redis does not hold the shutdown', { skip }, async (t) => {
  const redis = await ownRedis(t);
  const server = await startServer(t, serverEnv(t.testdir(), { RATE_LIMIT_PER_MINUTE: '3', REDIS_URL: redis.url, API_TOKENS: FROZEN_TOKEN }));
  t.equal(await get(server, FROZEN_TOKEN), 200, 'connected to Redis');
  redis.freeze();
  const exit = await server.stop('SIGTERM');
  t.same(exit, { code: 0, signal: null }, `a clean stop within SHUTDOWN_TIMEOUT:\n${server.stdout().slice(-600)}`);
  t.notMatch(server.stdout(), /shutdown timed out/);
});

t.test('a request checked while the connection to Redis is still being set up counts against the shared budget', { skip }, async (t) => {
  const redis = await ownRedis(t);
  const token = 'redis-deadline-connecting-0123456789';
  redis.freeze(); // the TCP connection opens (the kernel accepts it), Redis's reply to the ready check waits
  const timeouts = { ...loadConfig({}).timeouts, redisMs: 60_000 };
  const { app } = await build(t, { rateLimitPerMinute: 1, redisUrl: redis.url, apiTokens: [token], timeouts }, { store: new SqliteStore(join(t.testdir(), 'p.db')) });
  const first = app.inject({ method: 'GET', url: '/plants', headers: { authorization: `Bearer ${token}` } });
  // An unlimited request through the same hooks: once it is answered, the first one has reached its check.
  await app.inject({ method: 'GET', url: '/healthz' });
  redis.thaw();
  t.equal((await first).statusCode, 200, 'the first request is served');
  const second = await app.inject({ method: 'GET', url: '/plants', headers: { authorization: `Bearer ${token}` } });
  t.equal(second.statusCode, 429, 'and it was counted: the second is over the budget of one');
  const client = new Redis(redis.url);
  t.teardown(() => {
    client.disconnect();
  });
  const keys = await client.keys('plant-store:rate-limit:*');
  t.same(await Promise.all(keys.map((key) => client.get(key))), ['2'], 'Redis counted both');
});
