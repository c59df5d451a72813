// The failed-authentication guard (AUTH_FAILURES_PER_MINUTE): one client's wrong tokens never
// cost another client its valid token, guessing from one address is paced, and the guard's
// memory is bounded without forgetting its worst offenders.
import type { FastifyInstance } from 'fastify';
import t, { type Test } from 'tap';
import { createFailureLimiter, OFFENDERS_LIMIT, SUSPECTS_LIMIT } from '../../src/security/failure-limiter.ts';
import { generateToken, hashToken, tokenHint } from '../../src/tokens/format.ts';
import { TOKEN, api, build } from '../harness/helper.ts';

const OFFENDER = '198.51.100.7';
const OTHER = '203.0.113.9';
const WRONG = 'wrong-token-abcdefghij';

function plantsAs(t: Test, app: FastifyInstance, remoteAddress: string, token?: string) {
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
  return api(t, app, { method: 'GET', url: '/plants', headers, remoteAddress });
}

t.test("an offender over the limit never makes the service refuse a valid token, from its own address or another's", async (t) => {
  let now = Date.parse('2026-11-25T10:00:00Z');
  const { app } = await build(t, { authFailuresPerMinute: 3 }, { clock: () => now });
  for (let i = 1; i <= 3; i++) t.equal((await plantsAs(t, app, OFFENDER, `${WRONG}${i}`)).statusCode, 401, `failure ${i}: 401`);
  const blocked = await plantsAs(t, app, OFFENDER, `${WRONG}4`);
  t.equal(blocked.statusCode, 429, "the offender's next wrong token is 429");
  t.equal(blocked.headers['retry-after'], '60', 'with Retry-After');
  t.match(blocked.json(), { error: 429n, message: /^Too many failed authentications from this address; retry in 60 seconds\.$/ });
  t.equal((await plantsAs(t, app, OTHER, TOKEN)).statusCode, 200, 'a valid token from another address is served');
  now += 20_000; // the blocked address's next turn (one every minute / 3)
  t.equal((await plantsAs(t, app, OFFENDER, TOKEN)).statusCode, 200, 'a valid token from the blocked address is served too');
  t.equal((await plantsAs(t, app, OFFENDER, TOKEN)).statusCode, 200, 'and, having authenticated from there, again without waiting a turn');
  now += 20_000;
  t.equal((await plantsAs(t, app, OFFENDER, `${WRONG}5`)).statusCode, 429, 'its wrong tokens are still 429');
});

t.test('a client whose token authenticated from an address skips the queue of guesses from it', async (t) => {
  const now = Date.parse('2026-11-25T10:00:00Z');
  const { app, store } = await build(t, { authFailuresPerMinute: 3 }, { clock: () => now });
  const shop = generateToken();
  await store.tokens.createToken({ name: 'shop', hash: hashToken(shop), hint: tokenHint(shop), scopes: ['*'] });
  // A balancer without TRUST_PROXY: the guesser and the shop share one address.
  t.equal((await plantsAs(t, app, OFFENDER, `${WRONG}0`)).statusCode, 401);
  t.equal((await plantsAs(t, app, OFFENDER, shop)).statusCode, 200, 'the shop authenticates from the address');
  for (let i = 1; i <= 3; i++) await plantsAs(t, app, OFFENDER, `${WRONG}${i}`);
  // Guesses queued at the frozen clock: the last one's turn is minutes away.
  const queued = Array.from({ length: 10 }, (_, i) => plantsAs(t, app, OFFENDER, `${WRONG}q${i}`));
  t.equal((await plantsAs(t, app, OFFENDER, shop)).statusCode, 200, "the shop's token is served without waiting behind them");
  await app.close(); // closing releases the queued guesses at once
  t.same(
    (await Promise.all(queued)).map((response) => response.statusCode),
    Array(10).fill(429),
    'each queued guess is answered 429',
  );
});

t.test('requests without a token are not guesses: any number of them blocks nobody', async (t) => {
  const now = Date.parse('2026-11-25T10:00:00Z');
  const { app } = await build(t, { authFailuresPerMinute: 3 }, { clock: () => now });
  for (let i = 0; i < 150; i++) {
    const response = await app.inject({ method: 'GET', url: '/plants', remoteAddress: OFFENDER });
    if (response.statusCode !== 401) t.fail(`request ${i} without a token answered ${response.statusCode}`);
  }
  t.equal((await plantsAs(t, app, OFFENDER, undefined)).statusCode, 401, 'still 401, not 429');
  t.equal((await plantsAs(t, app, OFFENDER, TOKEN)).statusCode, 200, 'and a valid token from the address is served at once');
});

t.test('10,001 failing addresses do not unblock an offender', async (t) => {
  let now = Date.parse('2026-11-25T10:00:00Z');
  const { app } = await build(t, { authFailuresPerMinute: 3 }, { clock: () => now });
  for (let i = 1; i <= 4; i++) await plantsAs(t, app, OFFENDER, `${WRONG}${i}`);
  let refused = 0;
  const flood = (i: number) =>
    app.inject({ method: 'GET', url: '/plants', headers: { authorization: `Bearer ${WRONG}` }, remoteAddress: `fd00::${i.toString(16)}` });
  for (let first = 0; first <= SUSPECTS_LIMIT; first += 250) {
    const batch = Array.from({ length: Math.min(250, SUSPECTS_LIMIT + 1 - first) }, (_, i) => flood(first + i));
    for (const response of await Promise.all(batch)) if (response.statusCode === 401) refused++;
  }
  t.equal(refused, SUSPECTS_LIMIT + 1, 'each flooding address got its 401');
  // The offender's next turn (one every minute / 3), still inside its window: forgotten, it would get a 401.
  now += 20_000;
  const after = await plantsAs(t, app, OFFENDER, `${WRONG}5`);
  t.equal(after.statusCode, 429, 'the offender is still blocked');
});

t.test('the guard: paced turns, bounded memory, the busiest offenders kept', async (t) => {
  let now = 1_000_000;
  const limiter = createFailureLimiter({ max: 3, windowMs: 60_000, now: () => now });
  const key = (name: string) => () => name;
  t.equal(limiter.recordOf(OFFENDER), undefined, 'an address without failures has no record');
  t.same([1, 2, 3].map(() => limiter.recordFailure(OFFENDER)), [undefined, undefined, undefined], 'up to the limit, 401s');
  t.equal(limiter.recordFailure(OFFENDER), 60, 'past it, 429 with the rest of the window');
  const record = limiter.recordOf(OFFENDER)!;
  const turns = ['a', 'b', 'c', 'd'].map((name) => record.take(key(name)));
  t.same(
    turns.map((turn) => turn.waitMs),
    [0, 20_000, 40_000, 60_000],
    'new tokens from a blocked address take turns, one every window / max, however many arrive at once',
  );
  record.remember('known');
  t.equal(record.take(key('known')).waitMs, 0, 'a token that authenticated from the address waits no turn');
  for (const turn of turns) turn.done();
  now += 60_000;
  t.equal(record.take(key('e')).waitMs, 0, 'once the window ends, the address is no longer blocked');
  t.equal(limiter.recordFailure(OFFENDER), undefined, 'and starts a new window');

  // Below the limit, attempts still being checked count: a burst sent at once is paced too.
  const burst = createFailureLimiter({ max: 3, windowMs: 60_000, now: () => now });
  burst.recordFailure('burst');
  const burstRecord = burst.recordOf('burst')!;
  t.same(
    ['a', 'b', 'c', 'd'].map((name) => burstRecord.take(key(name)).waitMs),
    [0, 0, 0, 20_000],
    'one failure and two attempts in flight reach the limit of 3: the next waits a turn',
  );

  // A flood of addresses failing once each: the oldest are forgotten, the offender is not.
  const busiest = '192.0.2.66';
  for (let i = 0; i < 50; i++) limiter.recordFailure(busiest);
  for (let i = 0; i < SUSPECTS_LIMIT * 2; i++) limiter.recordFailure(`flood-${i}`);
  t.equal(limiter.recordOf('flood-0'), undefined, 'the least recently failing address is forgotten');
  t.ok(limiter.recordOf(`flood-${SUSPECTS_LIMIT * 2 - 1}`), 'the latest is kept');
  t.equal(limiter.recordFailure(busiest), 60, 'the blocked address is still blocked');

  // More offenders than the table holds: the ones with the fewest failures go first.
  for (let i = 0; i < OFFENDERS_LIMIT + 10; i++) for (let j = 0; j < 4; j++) limiter.recordFailure(`offender-${i}`);
  t.ok(limiter.recordOf(busiest), 'the busiest offender is kept');
  t.equal(limiter.recordFailure(busiest), 60, 'and still blocked');
  t.ok(limiter.recordOf(`offender-${OFFENDERS_LIMIT + 9}`), 'the newest offender is kept');
  t.equal(limiter.recordOf('offender-0'), undefined, 'an offender with the fewest failures made room');

  const off = createFailureLimiter({ max: 0, windowMs: 60_000 });
  for (let i = 0; i < 10; i++) t.equal(off.recordFailure(OFFENDER), undefined);
  t.equal(off.recordOf(OFFENDER), undefined, 'AUTH_FAILURES_PER_MINUTE=0 turns the guard off');
});
