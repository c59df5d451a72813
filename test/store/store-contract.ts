// The one PlantStore contract every driver must pass. A driver's test calls
// storeContract(t, 'sqlite', open) where open(t) returns a fresh, empty store on its own
// database and registers whatever cleanup it needs on t (close() is idempotent).
import type { Test } from 'tap';
import {
  eventPayload,
  SubscriptionLimitError,
  WEBHOOK_EVENTS,
  type AttemptOutcome,
  type ClaimedDelivery,
  type ConditionalWrite,
  type CreateResult,
  type Delivery,
  type NewSubscription,
  type PlantContent,
  type PlantRecord,
  type PlantStore,
  type Precondition,
  type Subscription,
  type WebhookEvent,
} from '../../src/store/types.ts';
import { generateToken, hashToken, tokenHint } from '../../src/tokens/format.ts';

export type OpenStore = (t: Test) => Promise<PlantStore>;

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const TWO_53 = 2n ** 53n;
// "Now" for the webhook outbox: far in the future, so every delivery written during a test is due.
const NOW = new Date('2030-01-01T00:00:00.000Z');
const LEASE_MS = 60_000;
/** WEBHOOK_SUBSCRIPTIONS_MAX's default: room for every subscription a test makes but the limit's own. */
const SUBSCRIPTIONS_MAX = 100;

export async function storeContract(t: Test, name: string, open: OpenStore): Promise<void> {
  await t.test(`${name}: PlantStore contract`, async (t) => {
    t.test('a new id is created and answered with the plant', async (t) => {
      const store = await open(t);
      const withTag = await store.plants.createPlant({ id: 1n, name: 'Monstera', tag: 'aroid' });
      t.equal(withTag.outcome, 'created');
      expectPlant(t, withTag.stored, { id: 1n, name: 'Monstera', tag: 'aroid' });
      const withoutTag = await store.plants.createPlant({ id: 2n, name: 'Fern' });
      t.equal(withoutTag.outcome, 'created', 'another id is another plant');
      expectPlant(t, withoutTag.stored, { id: 2n, name: 'Fern' });
    });

    t.test('an identical replay is unchanged; tag undefined and an absent tag are the same plant', async (t) => {
      const store = await open(t);
      t.equal((await store.plants.createPlant({ id: 10n, name: 'Monstera', tag: 'aroid' })).outcome, 'created');
      const replay = await store.plants.createPlant({ id: 10n, name: 'Monstera', tag: 'aroid' });
      t.equal(replay.outcome, 'unchanged', 'identical replay with a tag');
      expectPlant(t, replay.stored, { id: 10n, name: 'Monstera', tag: 'aroid' });

      t.equal((await store.plants.createPlant({ id: 11n, name: 'Fern' })).outcome, 'created');
      const explicitUndefined = await store.plants.createPlant({ id: 11n, name: 'Fern', tag: undefined });
      t.equal(explicitUndefined.outcome, 'unchanged', 'absent tag, then tag: undefined');
      expectPlant(t, explicitUndefined.stored, { id: 11n, name: 'Fern' });

      t.equal((await store.plants.createPlant({ id: 12n, name: 'Ivy', tag: undefined })).outcome, 'created');
      const absent = await store.plants.createPlant({ id: 12n, name: 'Ivy' });
      t.equal(absent.outcome, 'unchanged', 'tag: undefined, then absent tag');
      expectPlant(t, absent.stored, { id: 12n, name: 'Ivy' });
    });

    t.test('a different plant at a used id is a conflict; the stored plant is answered and untouched', async (t) => {
      const store = await open(t);
      const original: PlantRecord = { id: 20n, name: 'Monstera', tag: 'aroid' };
      t.equal((await store.plants.createPlant({ ...original })).outcome, 'created');
      const others: PlantRecord[] = [
        { id: 20n, name: 'Cactus', tag: 'aroid' },
        { id: 20n, name: 'monstera', tag: 'aroid' },
        { id: 20n, name: 'Monstera', tag: 'other' },
        { id: 20n, name: 'Monstera' },
        { id: 20n, name: 'Monstera', tag: '' },
      ];
      for (const other of others) {
        const result = await store.plants.createPlant(other);
        t.equal(result.outcome, 'conflict', `${other.name} / ${String(other.tag)} conflicts`);
        expectPlant(t, result.stored, original);
      }
      const replay = await store.plants.createPlant({ ...original });
      t.equal(replay.outcome, 'unchanged', 'the original still replays: nothing was overwritten');
      expectPlant(t, replay.stored, original);

      t.equal((await store.plants.createPlant({ id: 21n, name: 'Fern' })).outcome, 'created');
      for (const tag of ['fern', '']) {
        const tagged = await store.plants.createPlant({ id: 21n, name: 'Fern', tag });
        t.equal(tagged.outcome, 'conflict', `tag ${JSON.stringify(tag)} is not the absent tag`);
        expectPlant(t, tagged.stored, { id: 21n, name: 'Fern' });
      }

      t.equal((await store.plants.createPlant({ id: 22n, name: 'Moss', tag: '' })).outcome, 'created');
      const emptyTag = await store.plants.createPlant({ id: 22n, name: 'Moss', tag: '' });
      t.equal(emptyTag.outcome, 'unchanged', 'an empty tag is stored as an empty tag');
      expectPlant(t, emptyTag.stored, { id: 22n, name: 'Moss', tag: '' });
    });

    t.test('int64 extremes and ids above 2^53 are stored and answered exactly, as bigint', async (t) => {
      const store = await open(t);
      const ids = [
        INT64_MIN,
        INT64_MIN + 1n,
        -(TWO_53 + 1n),
        // Each side of 15 characters, sign included: PostgreSQL's int8 text is read two ways.
        -999_999_999_999_999n,
        -99_999_999_999_999n,
        -1n,
        0n,
        7n,
        1_234_567_890n,
        999_999_999_999_999n,
        1_000_000_000_000_000n,
        TWO_53 - 1n,
        TWO_53,
        TWO_53 + 1n,
        TWO_53 + 2n,
        INT64_MAX - 1n,
        INT64_MAX,
      ];
      for (const id of ids) {
        t.equal((await store.plants.createPlant({ id, name: `plant ${id}` })).outcome, 'created', `${id} is its own plant`);
      }
      for (const id of ids) {
        // A conflict answers the row as read back from the database, not the plant passed in.
        const conflict = await store.plants.createPlant({ id, name: 'intruder' });
        t.equal(conflict.outcome, 'conflict', `${id} is taken`);
        t.equal(typeof conflict.stored.id, 'bigint', `${id} reads back as bigint`);
        t.equal(conflict.stored.id, id, `${id} reads back exactly`);
        t.equal(conflict.stored.name, `plant ${id}`, `${id} holds its own plant`);
        const replay = await store.plants.createPlant({ id, name: `plant ${id}` });
        t.equal(replay.outcome, 'unchanged', `${id} replays`);
        t.equal(replay.stored.id, id);
      }
    });

    t.test('concurrent creates of distinct ids, issued together, are all created', async (t) => {
      const store = await open(t);
      const plants: PlantRecord[] = Array.from({ length: 200 }, (_, index) => ({
        id: TWO_53 + BigInt(index),
        name: `plant ${index}`,
        ...(index % 2 === 0 ? { tag: `tag ${index}` } : {}),
      }));
      const results = await Promise.all(plants.map((plant) => store.plants.createPlant(plant)));
      t.same(countOutcomes(results), { created: 200 }, 'every one created');
      t.ok(results.every((result, index) => samePlantRecord(result.stored, plants[index]!)), 'each answered with its own plant');
      const replays = await Promise.all(plants.map((plant) => store.plants.createPlant({ ...plant })));
      t.same(countOutcomes(replays), { unchanged: 200 }, 'every one was stored');
    });

    t.test('creates issued together keep their own outcomes: created, unchanged and conflict side by side', async (t) => {
      const store = await open(t);
      t.equal((await store.plants.createPlant({ id: 1000n, name: 'A' })).outcome, 'created');
      const results = await Promise.all([
        store.plants.createPlant({ id: 1001n, name: 'new 1' }),
        store.plants.createPlant({ id: 1000n, name: 'B' }),
        store.plants.createPlant({ id: 1002n, name: 'new 2' }),
        store.plants.createPlant({ id: 1000n, name: 'A' }),
        store.plants.createPlant({ id: 1003n, name: 'new 3' }),
      ]);
      t.same(
        results.map((result) => result.outcome),
        ['created', 'conflict', 'created', 'unchanged', 'created'],
      );
      expectPlant(t, results[1]!.stored, { id: 1000n, name: 'A' });
      const replays = await Promise.all([1001n, 1002n, 1003n].map((id, index) => store.plants.createPlant({ id, name: `new ${index + 1}` })));
      t.same(countOutcomes(replays), { unchanged: 3 }, 'the conflict did not undo its neighbours');
    });

    t.test('concurrent creates of one id with different names: exactly one created, the rest conflict', async (t) => {
      const store = await open(t);
      const contenders: PlantRecord[] = Array.from({ length: 60 }, (_, index) => ({ id: 77n, name: `contender ${index}` }));
      const results = await Promise.all(contenders.map((plant) => store.plants.createPlant(plant)));
      t.same(countOutcomes(results), { created: 1, conflict: 59 });
      const winner = contenders[results.findIndex((result) => result.outcome === 'created')]!;
      t.ok(results.every((result) => samePlantRecord(result.stored, winner)), 'every conflict answers the winner');
      t.equal((await store.plants.createPlant({ ...winner })).outcome, 'unchanged', 'the winner is what is stored');
    });

    t.test('concurrent identical creates: one created, the rest unchanged', async (t) => {
      const store = await open(t);
      const results = await Promise.all(Array.from({ length: 30 }, () => store.plants.createPlant({ id: 5n, name: 'same', tag: 't' })));
      t.same(countOutcomes(results), { created: 1, unchanged: 29 });
    });

    t.test('listPlants answers every plant in ascending id order over the whole int64 range, exactly, as bigint', async (t) => {
      const store = await open(t);
      // Created out of order, so that insertion order, or a lexical or float order, would show.
      const plants = await seed(t, store, [
        { id: TWO_53 + 1n, name: 'above 2^53', tag: 'aroid' },
        { id: 0n, name: 'zero' },
        { id: INT64_MAX, name: 'int64 max', tag: 'aroid' },
        { id: -1n, name: 'minus one', tag: '' },
        { id: INT64_MIN, name: 'int64 min', tag: 'aroid' },
        { id: TWO_53, name: '2^53' },
        { id: 1n, name: 'one', tag: 'Aroid' },
        { id: -(TWO_53 + 1n), name: 'below -2^53' },
        { id: INT64_MAX - 1n, name: 'int64 max - 1' },
        { id: INT64_MIN + 1n, name: 'int64 min + 1', tag: 'fern' },
        { id: 10n, name: 'ten' },
        { id: 9n, name: 'nine' },
      ]);
      const sorted = byId(plants);
      t.strictSame(
        sorted.map((plant) => plant.id),
        [INT64_MIN, INT64_MIN + 1n, -(TWO_53 + 1n), -1n, 0n, 1n, 9n, 10n, TWO_53, TWO_53 + 1n, INT64_MAX - 1n, INT64_MAX],
        'the expected order itself',
      );

      const all = await store.plants.listPlants({ limit: 100 });
      t.ok(all.every((plant) => typeof plant.id === 'bigint'), 'every id is a bigint');
      t.strictSame(all.map((plant) => plant.id), sorted.map((plant) => plant.id), 'ascending ids, exactly');
      // strictSame tells an absent tag from tag: undefined: a tag is answered only when set.
      t.strictSame(all, sorted, 'every plant exactly, a tag only when it has one');
      t.notOk('tag' in all.find((plant) => plant.id === 0n)!, 'an untagged plant carries no tag field');
      t.equal(all.find((plant) => plant.id === -1n)!.tag, '', 'an empty tag is answered as an empty tag');

      for (const limit of [1, 3, sorted.length - 1, sorted.length, sorted.length + 5]) {
        t.strictSame(await store.plants.listPlants({ limit }), sorted.slice(0, limit), `limit ${limit}`);
      }
    });

    t.test('listPlants answers only ids greater than after', async (t) => {
      const store = await open(t);
      const sorted = byId(
        await seed(t, store, [
          { id: INT64_MAX, name: 'int64 max' },
          { id: INT64_MIN + 1n, name: 'int64 min + 1' },
          { id: TWO_53, name: '2^53' },
          { id: 0n, name: 'zero', tag: 'x' },
          { id: INT64_MIN, name: 'int64 min' },
          { id: TWO_53 + 1n, name: '2^53 + 1' },
          { id: -1n, name: 'minus one' },
          { id: INT64_MAX - 1n, name: 'int64 max - 1' },
        ]),
      );
      for (const [index, plant] of sorted.entries()) {
        t.strictSame(await store.plants.listPlants({ after: plant.id, limit: 100 }), sorted.slice(index + 1), `after ${plant.id}, a stored id`);
      }
      t.strictSame(await store.plants.listPlants({ after: INT64_MAX, limit: 100 }), [], 'after 2^63 - 1: nothing');
      t.strictSame(
        (await store.plants.listPlants({ after: INT64_MIN, limit: 100 })).map((plant) => plant.id),
        sorted.slice(1).map((plant) => plant.id),
        'after -2^63: everything but -2^63',
      );
      const unstored: [bigint, bigint][] = [
        [-2n, -1n],
        [TWO_53 - 1n, TWO_53],
        [1n, TWO_53],
        [INT64_MAX - 2n, INT64_MAX - 1n],
      ];
      for (const [after, first] of unstored) {
        const page = await store.plants.listPlants({ after, limit: 100 });
        t.strictSame(page, sorted.filter((plant) => plant.id > after), `after ${after}, an id not stored`);
        t.equal(page[0]?.id, first, `after ${after} starts at ${first}`);
      }
      t.strictSame(await store.plants.listPlants({ after: -1n, limit: 2 }), sorted.filter((plant) => plant.id > -1n).slice(0, 2), 'after and limit together');
    });

    t.test('listPlants with a tag answers only plants with exactly that tag, with after and limit', async (t) => {
      const store = await open(t);
      const plants = await seed(t, store, [
        { id: INT64_MAX, name: 'a', tag: 'aroid' },
        { id: 5n, name: 'b', tag: 'Aroid' },
        { id: INT64_MIN, name: 'c', tag: 'aroid' },
        { id: 6n, name: 'd' },
        { id: TWO_53 + 1n, name: 'e', tag: 'aroid' },
        { id: 7n, name: 'f', tag: 'aroid ' },
        { id: -1n, name: 'g', tag: 'aroid' },
        { id: 8n, name: 'h', tag: '' },
        { id: TWO_53, name: 'i', tag: 'aroids' },
        { id: 9n, name: 'j', tag: 'fern' },
        { id: 0n, name: 'k', tag: 'aroid' },
      ]);
      const tagged = (tag: string) => byId(plants.filter((plant) => plant.tag === tag));
      const aroid = tagged('aroid');
      t.strictSame(aroid.map((plant) => plant.id), [INT64_MIN, -1n, 0n, TWO_53 + 1n, INT64_MAX], 'the expected aroids themselves');

      t.strictSame(await store.plants.listPlants({ tag: 'aroid', limit: 100 }), aroid, 'exactly "aroid", in id order');
      t.strictSame(await store.plants.listPlants({ tag: 'Aroid', limit: 100 }), tagged('Aroid'), 'tags are case-sensitive');
      t.strictSame(await store.plants.listPlants({ tag: 'aroid ', limit: 100 }), tagged('aroid '), 'a trailing space is another tag');
      t.strictSame(await store.plants.listPlants({ tag: 'fern', limit: 100 }), tagged('fern'));
      t.strictSame(await store.plants.listPlants({ tag: '', limit: 100 }), tagged(''), 'the empty tag matches only the empty tag, not an absent one');
      t.strictSame(await store.plants.listPlants({ tag: 'aroi', limit: 100 }), [], 'no prefix match');
      t.strictSame(await store.plants.listPlants({ tag: 'cactus', limit: 100 }), [], 'an unused tag');

      t.strictSame(await store.plants.listPlants({ tag: 'aroid', limit: 2 }), aroid.slice(0, 2), 'tag and limit');
      t.strictSame(await store.plants.listPlants({ tag: 'aroid', after: INT64_MIN, limit: 100 }), aroid.slice(1), 'tag and after -2^63');
      t.strictSame(await store.plants.listPlants({ tag: 'aroid', after: -1n, limit: 100 }), aroid.slice(2), 'tag and after a tagged id');
      t.strictSame(await store.plants.listPlants({ tag: 'aroid', after: 5n, limit: 100 }), aroid.slice(3), 'tag and after an id with another tag');
      t.strictSame(await store.plants.listPlants({ tag: 'aroid', after: -1n, limit: 2 }), aroid.slice(2, 4), 'tag, after and limit');
      t.strictSame(await store.plants.listPlants({ tag: 'aroid', after: INT64_MAX, limit: 100 }), [], 'tag and after 2^63 - 1');
      t.strictSame(await store.plants.listPlants({ tag: 'Aroid', after: 5n, limit: 100 }), [], 'after the only plant with the tag');
    });

    t.test('text with NUL (U+0000) is refused alike by every driver, naming the field; nothing is written', async (t) => {
      const store = await open(t);
      // Matched by name, not class: the same check shows what a driver without the rule did instead.
      const refused = (field: string) => ({ name: 'UnstorableTextError', field, message: new RegExp(`"${field}" contains the NUL character`) });
      const subscription = await store.webhooks.createSubscription(newSubscription('watching', [...WEBHOOK_EVENTS]), SUBSCRIPTIONS_MAX);
      await seed(t, store, [{ id: 1n, name: 'kept', tag: 'aroid' }]);
      const [created] = await claimAll(store);
      await store.webhooks.recordAttempt({ id: created!.id, at: iso(0), result: 'delivered', responseStatus: 204 });

      await t.rejects(store.plants.createPlant({ id: 2n, name: 'a\u0000b' }), refused('name'), 'createPlant: a NUL in the name');
      await t.rejects(store.plants.createPlant({ id: 2n, name: 'fine', tag: '\u0000' }), refused('tag'), 'createPlant: a NUL in the tag');
      await t.rejects(store.plants.createPlant({ id: 1n, name: 'kept', tag: 'aroid\u0000' }), refused('tag'), 'createPlant at a used id is refused too');
      await t.rejects(store.plants.replacePlant(1n, { name: '\u0000' }), refused('name'), 'replacePlant: a NUL in the name');
      await t.rejects(store.plants.replacePlant(1n, { name: 'kept', tag: 'a\u0000' }), refused('tag'), 'replacePlant: a NUL in the tag');
      await t.rejects(store.plants.listPlants({ tag: 'aroid\u0000', limit: 10 }), refused('tag'), 'listPlants: a NUL in the tag filter');

      t.strictSame(await store.plants.listPlants({ limit: 10 }), [{ id: 1n, name: 'kept', tag: 'aroid' }], 'the stored plants are as they were');
      t.strictSame(await store.webhooks.claimDueDeliveries(later(LEASE_MS), LEASE_MS, 10), [], 'no event was written');

      const token = { name: 'ci\u0000bot', hash: hashToken(generateToken()), hint: 'pst_…abcd' };
      await t.rejects(store.tokens.createFirstToken(token), refused('name'), 'createFirstToken: a NUL in the name');
      await t.rejects(store.tokens.createToken(token), refused('name'), 'createToken: a NUL in the name');
      await t.rejects(store.tokens.revokeToken('ci\u0000bot'), refused('name'), 'revokeToken: a NUL in the name');
      t.strictSame(await store.tokens.listTokens(), [], 'no token was stored');
      await t.rejects(store.webhooks.createSubscription({ ...newSubscription('x', ['plant.created']), url: 'https://hooks.example.com/\u0000' }, SUBSCRIPTIONS_MAX), refused('url'));
      t.strictSame(await store.webhooks.listSubscriptions({ limit: 1000 }), [subscription], 'no subscription was stored');
    });

    t.test('a NUL in why an attempt failed is kept as U+FFFD, so the outcome is recorded on every driver', async (t) => {
      const store = await open(t);
      const subscription = await store.webhooks.createSubscription(newSubscription('nul', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, [{ id: 1n, name: 'one' }]);
      const [claimed] = await claimAll(store);
      await store.webhooks.recordAttempt({ id: claimed!.id, at: iso(1_000), result: 'retry', nextAttemptAt: iso(2_000), error: 'could not deliver: a\u0000b' });
      t.equal((await deliveriesOf(store, subscription.id))[0]?.lastError, 'could not deliver: a\ufffdb', 'retry');
      const [again] = await store.webhooks.claimDueDeliveries(later(2_000), LEASE_MS, 10);
      const disabled = { result: 'failed', error: 'gone\u0000', disableSubscription: 'the receiver said\u0000 gone' } as const;
      await store.webhooks.recordAttempt({ id: again!.id, at: iso(3_000), ...disabled });
      t.equal((await deliveriesOf(store, subscription.id))[0]?.lastError, 'gone\ufffd', 'failed');
      t.equal((await store.webhooks.listSubscriptions({ limit: 1000 }))[0]?.disabledReason, 'the receiver said\ufffd gone', 'why the subscription was disabled');
    });

    t.test('walking pages with after = the last id of the previous page visits every plant once', async (t) => {
      const store = await open(t);
      const ids = new Set([INT64_MIN, INT64_MIN + 1n, -1n, 0n, 1n, TWO_53, TWO_53 + 1n, INT64_MAX - 1n, INT64_MAX]);
      for (let k = -31n; k <= 31n; k += 1n) ids.add(k * 2n ** 58n + k);
      const plants = [...ids].map((id, index) => ({ id, name: `plant ${index}`, ...(index % 3 === 0 ? { tag: 'third' } : {}) }));
      const sorted = byId(await seed(t, store, plants));
      for (const tag of [undefined, 'third']) {
        const expected = sorted.filter((plant) => tag === undefined || plant.tag === tag);
        for (const limit of [1, 2, 7, expected.length, 1000]) {
          const visited: PlantRecord[] = [];
          let after: bigint | undefined;
          for (let pages = 0; pages <= expected.length + 1; pages += 1) {
            const page = await store.plants.listPlants({ after, tag, limit });
            t.ok(page.length <= limit, 'no page is longer than the limit');
            if (page.length === 0) break;
            visited.push(...page);
            after = page.at(-1)!.id;
          }
          t.strictSame(visited, expected, `tag ${String(tag)}, limit ${limit}: every plant once, in order`);
        }
      }
    });

    t.test('getPlant answers the plant exactly, or undefined', async (t) => {
      const store = await open(t);
      const plants = await seed(t, store, [
        { id: INT64_MIN, name: 'int64 min', tag: 'edge' },
        { id: -1n, name: 'minus one' },
        { id: 0n, name: 'zero', tag: '' },
        { id: TWO_53, name: '2^53' },
        { id: TWO_53 + 1n, name: '2^53 + 1', tag: 'Aroid' },
        { id: INT64_MAX, name: 'int64 max' },
      ]);
      for (const plant of plants) {
        const found = (await store.plants.getPlant(plant.id))?.plant;
        t.strictSame(found, plant, `${plant.id} exactly`);
        t.equal(typeof found?.id, 'bigint', `${plant.id} as bigint`);
      }
      t.notOk('tag' in (await store.plants.getPlant(-1n))!.plant, 'an untagged plant carries no tag field');
      for (const id of [INT64_MIN + 1n, -2n, 1n, TWO_53 - 1n, TWO_53 + 2n, INT64_MAX - 1n]) {
        t.equal(await store.plants.getPlant(id), undefined, `${id} is not stored`);
      }
    });

    t.test('replacePlant replaces name and tag and answers the new plant', async (t) => {
      const store = await open(t);
      const id = TWO_53 + 1n;
      const neighbour: PlantRecord = { id: TWO_53, name: 'Neighbour', tag: 'aroid' };
      await seed(t, store, [{ id, name: 'Monstera', tag: 'aroid' }, neighbour]);

      const replaced = await store.plants.replacePlant(id, { name: 'Monstera deliciosa', tag: 'big' });
      expectWrite(t, replaced, { outcome: 'done', plant: { id, name: 'Monstera deliciosa', tag: 'big' } }, 'name and tag');
      t.strictSame((await store.plants.getPlant(id))?.plant, { id, name: 'Monstera deliciosa', tag: 'big' }, 'getPlant shows the new plant');
      t.strictSame((await store.plants.getPlant(TWO_53))?.plant, neighbour, 'the neighbour below is untouched');
      t.strictSame(await store.plants.listPlants({ tag: 'aroid', limit: 100 }), [neighbour], 'the old tag no longer finds it');
      t.strictSame(await store.plants.listPlants({ tag: 'big', limit: 100 }), [{ id, name: 'Monstera deliciosa', tag: 'big' }], 'the new tag does');

      const untagged = await store.plants.replacePlant(id, { name: 'Plain' });
      expectWrite(t, untagged, { outcome: 'done', plant: { id, name: 'Plain' } }, 'without a tag');
      t.strictSame((await store.plants.getPlant(id))?.plant, { id, name: 'Plain' }, 'replacing without a tag removes the tag');
      t.strictSame(await store.plants.listPlants({ tag: 'big', limit: 100 }), [], 'the removed tag finds nothing');
      t.equal((await store.plants.createPlant({ id, name: 'Plain' })).outcome, 'unchanged', 'createPlant sees the untagged plant');

      expectWrite(t, await store.plants.replacePlant(id, { name: 'Plain', tag: '' }), { outcome: 'done', plant: { id, name: 'Plain', tag: '' } }, 'an empty tag');
      t.strictSame((await store.plants.getPlant(id))?.plant, { id, name: 'Plain', tag: '' }, 'an empty tag is stored as an empty tag');

      expectWrite(t, await store.plants.replacePlant(id, { name: 'Plain', tag: '' }), { outcome: 'done', plant: { id, name: 'Plain', tag: '' } }, 'the same content again');
      t.strictSame(await store.plants.listPlants({ limit: 100 }), [neighbour, { id, name: 'Plain', tag: '' }], 'no plant created or lost');
    });

    t.test('replacePlant of an unknown id is missing and creates nothing', async (t) => {
      const store = await open(t);
      await seed(t, store, [{ id: 100n, name: 'Only' }]);
      for (const id of [99n, 101n, INT64_MIN, INT64_MAX, TWO_53 + 1n]) {
        const check = recording(true);
        expectWrite(t, await store.plants.replacePlant(id, { name: 'Ghost', tag: 'ghost' }, check.precondition), { outcome: 'missing' }, `${id}`);
        t.equal(check.received.length, 0, `${id}: no stored plant to hand to the precondition`);
        expectWrite(t, await store.plants.replacePlant(id, { name: 'Ghost' }), { outcome: 'missing' }, `${id} unconditionally`);
        t.equal(await store.plants.getPlant(id), undefined, `${id} was not created`);
      }
      t.strictSame(await store.plants.listPlants({ limit: 100 }), [{ id: 100n, name: 'Only' }], 'nothing created');
      t.strictSame(await store.plants.listPlants({ tag: 'ghost', limit: 100 }), [], 'not even under its tag');
    });

    t.test('replacePlant checks its precondition against the plant as currently stored', async (t) => {
      const store = await open(t);
      const id = INT64_MAX;
      await seed(t, store, [{ id, name: 'Original', tag: 'first' }]);
      expectWrite(t, await store.plants.replacePlant(id, { name: 'Current' }), { outcome: 'done', plant: { id, name: 'Current' } }, 'setup');
      const current: PlantRecord = { id, name: 'Current' };

      const refuse = recording(false);
      const refused = await store.plants.replacePlant(id, { name: 'Refused', tag: 'no' }, refuse.precondition);
      expectWrite(t, refused, { outcome: 'precondition-failed', current }, 'a false precondition');
      t.ok(refuse.received.length > 0, 'the precondition was asked');
      for (const received of refuse.received) t.strictSame(received, current, 'it received the plant as stored now, not as first created');
      t.strictSame((await store.plants.getPlant(id))?.plant, current, 'the stored plant is unchanged');
      t.strictSame(await store.plants.listPlants({ tag: 'no', limit: 100 }), [], 'the refused tag was not written');

      const allow = recording(true);
      const allowed = await store.plants.replacePlant(id, { name: 'Allowed', tag: 'yes' }, allow.precondition);
      expectWrite(t, allowed, { outcome: 'done', plant: { id, name: 'Allowed', tag: 'yes' } }, 'a true precondition');
      t.ok(allow.received.length > 0, 'the precondition was asked');
      for (const received of allow.received) t.strictSame(received, current, 'it received the plant before this write');
      t.strictSame((await store.plants.getPlant(id))?.plant, { id, name: 'Allowed', tag: 'yes' });

      const again = recording(false);
      expectWrite(
        t,
        await store.plants.replacePlant(id, { name: 'Late' }, again.precondition),
        { outcome: 'precondition-failed', current: { id, name: 'Allowed', tag: 'yes' } },
        'the next precondition sees the allowed write',
      );
      for (const received of again.received) t.strictSame(received, { id, name: 'Allowed', tag: 'yes' });
    });

    t.test('deletePlant deletes the plant and answers what was deleted', async (t) => {
      const store = await open(t);
      const plants = await seed(t, store, [
        { id: INT64_MIN, name: 'int64 min', tag: 'edge' },
        { id: TWO_53, name: '2^53' },
        { id: TWO_53 + 1n, name: '2^53 + 1', tag: 'aroid' },
        { id: INT64_MAX, name: 'int64 max' },
      ]);
      for (const [index, plant] of plants.entries()) {
        expectWrite(t, await store.plants.deletePlant(plant.id), { outcome: 'done', plant }, `delete ${plant.id}`);
        t.equal(await store.plants.getPlant(plant.id), undefined, `${plant.id} is gone`);
        t.strictSame(await store.plants.listPlants({ limit: 100 }), byId(plants.slice(index + 1)), 'the others remain');
        expectWrite(t, await store.plants.deletePlant(plant.id), { outcome: 'missing' }, `delete ${plant.id} again`);
        expectWrite(t, await store.plants.replacePlant(plant.id, { name: 'back' }), { outcome: 'missing' }, `replace ${plant.id} once deleted`);
      }
      t.strictSame(await store.plants.listPlants({ tag: 'aroid', limit: 100 }), [], 'the tag finds nothing');
      expectWrite(t, await store.plants.deletePlant(42n), { outcome: 'missing' }, 'an id never stored');
    });

    t.test('deletePlant with a precondition', async (t) => {
      const store = await open(t);
      const id = -(TWO_53 + 1n);
      const plant: PlantRecord = { id, name: 'Fern', tag: 'fern' };
      await seed(t, store, [plant]);

      const refuse = recording(false);
      expectWrite(t, await store.plants.deletePlant(id, refuse.precondition), { outcome: 'precondition-failed', current: plant }, 'a false precondition');
      t.ok(refuse.received.length > 0, 'the precondition was asked');
      for (const received of refuse.received) t.strictSame(received, plant, 'it received the stored plant');
      t.strictSame((await store.plants.getPlant(id))?.plant, plant, 'the plant is still there');

      const missing = recording(true);
      expectWrite(t, await store.plants.deletePlant(id + 1n, missing.precondition), { outcome: 'missing' }, 'an unknown id');
      t.equal(missing.received.length, 0, 'no stored plant to hand to the precondition');

      const allow = recording(true);
      expectWrite(t, await store.plants.deletePlant(id, allow.precondition), { outcome: 'done', plant }, 'a true precondition');
      for (const received of allow.received) t.strictSame(received, plant);
      t.equal(await store.plants.getPlant(id), undefined, 'deleted');
    });

    t.test('a deleted id is free again: createPlant with other content is created', async (t) => {
      const store = await open(t);
      const id = TWO_53 + 1n;
      await seed(t, store, [{ id, name: 'Monstera', tag: 'aroid' }]);
      expectWrite(t, await store.plants.deletePlant(id), { outcome: 'done', plant: { id, name: 'Monstera', tag: 'aroid' } }, 'delete');
      const recreated = await store.plants.createPlant({ id, name: 'Cactus' });
      t.equal(recreated.outcome, 'created', 'not a conflict with the deleted plant');
      t.strictSame(recreated.stored, { id, name: 'Cactus' });
      t.strictSame((await store.plants.getPlant(id))?.plant, { id, name: 'Cactus' }, 'the new plant, without the old tag');
      t.strictSame(await store.plants.listPlants({ tag: 'aroid', limit: 100 }), [], 'the old tag is gone');
    });

    t.test('a plant is versioned by its writes: a new version for every change, never one the id had before', async (t) => {
      const store = await open(t);
      const id = TWO_53 + 1n;
      const versionOf = async () => (await store.plants.getPlant(id))!.version;
      await seed(t, store, [{ id, name: 'Monstera', tag: 'aroid' }]);
      const created = await versionOf();
      t.equal((await store.plants.createPlant({ id, name: 'Monstera', tag: 'aroid' })).outcome, 'unchanged');
      t.equal(await versionOf(), created, 'an unchanged create keeps the version');

      const replaced = await store.plants.replacePlant(id, { name: 'Monstera deliciosa', tag: 'aroid' });
      const second = replaced.outcome === 'done' ? replaced.version : undefined;
      t.not(second, created, 'a replace that changes the plant gives a new version');
      t.equal(await versionOf(), second, 'the version the replace answered is the one stored');
      const same = await store.plants.replacePlant(id, { name: 'Monstera deliciosa', tag: 'aroid' });
      t.equal(same.outcome === 'done' && same.version, second, 'a replace with the same content keeps the version');

      const seen: bigint[] = [];
      const refusing: Precondition = (_current, version) => {
        seen.push(version);
        return false;
      };
      const refused = await store.plants.replacePlant(id, { name: 'Refused' }, refusing);
      t.equal(refused.outcome === 'precondition-failed' && refused.version, second, 'a refused write tells the current version');
      t.ok(seen.length > 0 && seen.every((version) => version === second), 'the precondition is handed the current version');

      const deleted = await store.plants.deletePlant(id);
      t.equal(deleted.outcome === 'done' && deleted.version, second, 'a delete answers the version it removed');
      await seed(t, store, [{ id, name: 'Monstera', tag: 'aroid' }]);
      const again = await versionOf();
      t.notOk([created, second].includes(again), 'the same content created again after a delete gets a version the id never had');
    });

    t.test('creates issued together each get a version of their own, never 0', async (t) => {
      const store = await open(t);
      const ids = Array.from({ length: 12 }, (_, index) => BigInt(index + 1));
      await Promise.all(ids.map((id) => store.plants.createPlant({ id, name: `plant ${id}` })));
      const versions = await Promise.all(ids.map(async (id) => (await store.plants.getPlant(id))!.version));
      t.equal(new Set(versions).size, ids.length, 'distinct versions');
      t.ok(versions.every((version) => version > 0n), 'each one handed out by the store');
    });

    t.test('replaces, deletes and creates issued together each get their own outcome', async (t) => {
      const store = await open(t);
      const original = (id: bigint): PlantRecord => ({ id, name: `plant ${id}`, ...(id % 3n === 0n ? { tag: 'three' } : {}) });
      const replacement = (id: bigint): PlantContent => (id % 4n === 1n ? { name: `renamed ${id}`, tag: 'odd' } : { name: `renamed ${id}` });
      const ids = Array.from({ length: 24 }, (_, index) => BigInt(index + 1));
      await seed(t, store, ids.map(original));

      const [refuse21, refuse22, allow23, allow24] = [recording(false), recording(false), recording(true), recording(true)];
      const odd = ids.filter((id) => id <= 20n && id % 2n === 1n);
      const even = ids.filter((id) => id <= 20n && id % 2n === 0n);
      // All issued in one tick, with no await in between: one group-commit batch for SQLite.
      const replaces = odd.map((id) => store.plants.replacePlant(id, replacement(id)));
      const deletes = even.map((id) => store.plants.deletePlant(id));
      const others = [
        store.plants.replacePlant(999n, { name: 'ghost' }),
        store.plants.deletePlant(998n),
        store.plants.replacePlant(21n, { name: 'refused' }, refuse21.precondition),
        store.plants.deletePlant(22n, refuse22.precondition),
        store.plants.replacePlant(23n, { name: 'renamed 23' }, allow23.precondition),
        store.plants.deletePlant(24n, allow24.precondition),
      ];
      const created = [store.plants.createPlant({ id: 25n, name: 'new 25' }), store.plants.createPlant({ id: 26n, name: 'new 26', tag: 'odd' })];
      const [replaced, deleted, otherResults, createResults] = await Promise.all([
        Promise.all(replaces),
        Promise.all(deletes),
        Promise.all(others),
        Promise.all(created),
      ]);

      replaced.forEach((result, index) =>
        expectWrite(t, result, { outcome: 'done', plant: { id: odd[index]!, ...replacement(odd[index]!) } }, `replace ${odd[index]}`),
      );
      deleted.forEach((result, index) => expectWrite(t, result, { outcome: 'done', plant: original(even[index]!) }, `delete ${even[index]}`));
      const [ghostReplace, ghostDelete, refused21, refused22, allowed23, allowed24] = otherResults;
      expectWrite(t, ghostReplace!, { outcome: 'missing' }, 'replace an unknown id');
      expectWrite(t, ghostDelete!, { outcome: 'missing' }, 'delete an unknown id');
      expectWrite(t, refused21!, { outcome: 'precondition-failed', current: original(21n) }, 'replace 21, refused');
      expectWrite(t, refused22!, { outcome: 'precondition-failed', current: original(22n) }, 'delete 22, refused');
      expectWrite(t, allowed23!, { outcome: 'done', plant: { id: 23n, name: 'renamed 23' } }, 'replace 23, allowed');
      expectWrite(t, allowed24!, { outcome: 'done', plant: original(24n) }, 'delete 24, allowed');
      for (const [check, id] of [[refuse21, 21n], [refuse22, 22n], [allow23, 23n], [allow24, 24n]] as const) {
        t.ok(check.received.length > 0, `${id}: the precondition was asked`);
        for (const received of check.received) t.strictSame(received, original(id), `${id}: the precondition saw its own plant`);
      }
      t.same(countOutcomes(createResults), { created: 2 }, 'the creates in the same batch');

      const expected = byId([
        ...odd.map((id) => ({ id, ...replacement(id) })),
        original(21n),
        original(22n),
        { id: 23n, name: 'renamed 23' },
        { id: 25n, name: 'new 25' },
        { id: 26n, name: 'new 26', tag: 'odd' },
      ]);
      t.strictSame(await store.plants.listPlants({ limit: 100 }), expected, 'listPlants reflects exactly those outcomes');
      t.strictSame(await store.plants.listPlants({ tag: 'odd', limit: 100 }), expected.filter((plant) => plant.tag === 'odd'), 'and so do tagged pages');
      t.strictSame(
        await store.plants.listPlants({ tag: 'three', limit: 100 }),
        [original(21n)],
        'every other plant tagged "three" was replaced without it or deleted',
      );
      t.equal(await store.plants.getPlant(999n), undefined, 'the missing replace created nothing');
    });

    t.test('a precondition that throws rejects only its own call', async (t) => {
      const store = await open(t);
      await seed(t, store, [
        { id: 1n, name: 'one', tag: 'keep' },
        { id: 3n, name: 'three' },
        { id: 4n, name: 'four' },
        { id: 5n, name: 'five', tag: 'keep' },
      ]);
      const boom = new Error('precondition exploded');
      const throwing = recording(true);
      const explode: Precondition = (current, version) => {
        throwing.precondition(current, version);
        throw boom;
      };
      const settled = await Promise.allSettled([
        store.plants.replacePlant(1n, { name: 'should not be written' }, explode),
        store.plants.createPlant({ id: 2n, name: 'two' }),
        store.plants.replacePlant(3n, { name: 'three renamed', tag: 'new' }),
        store.plants.deletePlant(4n),
        store.plants.deletePlant(5n, explode),
        store.plants.createPlant({ id: 6n, name: 'six' }),
      ]);
      t.strictSame(
        settled.map((result) => result.status),
        ['rejected', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
        'only the two calls with a throwing precondition reject',
      );
      t.equal(throwing.received.length, 2, 'the throwing precondition was reached for both');
      for (const index of [0, 4]) {
        const result = settled[index]!;
        t.equal(result.status === 'rejected' ? result.reason : undefined, boom, `call ${index} rejects with the thrown error`);
      }
      const value = <T>(index: number) => {
        const result = settled[index]!;
        if (result.status !== 'fulfilled') throw new Error(`call ${index} was rejected`);
        return result.value as T;
      };
      t.equal(value<CreateResult>(1).outcome, 'created', 'the create beside it');
      expectWrite(t, value<ConditionalWrite>(2), { outcome: 'done', plant: { id: 3n, name: 'three renamed', tag: 'new' } }, 'the replace beside it');
      expectWrite(t, value<ConditionalWrite>(3), { outcome: 'done', plant: { id: 4n, name: 'four' } }, 'the delete beside it');
      t.equal(value<CreateResult>(5).outcome, 'created', 'the create after it');
      t.strictSame(
        await store.plants.listPlants({ limit: 100 }),
        [
          { id: 1n, name: 'one', tag: 'keep' },
          { id: 2n, name: 'two' },
          { id: 3n, name: 'three renamed', tag: 'new' },
          { id: 5n, name: 'five', tag: 'keep' },
          { id: 6n, name: 'six' },
        ],
        'the rejected replace and delete changed nothing; every other write stuck',
      );
    });

    t.test('close settles creates, replaces and deletes already issued; afterwards they reject', async (t) => {
      const store = await open(t);
      await seed(t, store, [
        { id: 1n, name: 'one' },
        { id: 2n, name: 'two' },
      ]);
      const replace = store.plants.replacePlant(1n, { name: 'one renamed' });
      const remove = store.plants.deletePlant(2n);
      const creates = [3n, 4n, 5n].map((id) => store.plants.createPlant({ id, name: `new ${id}` }));
      await store.close();
      expectWrite(t, await replace, { outcome: 'done', plant: { id: 1n, name: 'one renamed' } }, 'a replace issued before close');
      expectWrite(t, await remove, { outcome: 'done', plant: { id: 2n, name: 'two' } }, 'a delete issued before close');
      t.same((await Promise.all(creates)).map((result) => result.outcome), ['created', 'created', 'created'], 'creates issued before close');
      await t.rejects(store.plants.replacePlant(1n, { name: 'too late' }), 'replacePlant rejects once closed');
      await t.rejects(store.plants.deletePlant(1n), 'deletePlant rejects once closed');
      await t.rejects(store.plants.createPlant({ id: 6n, name: 'too late' }), 'createPlant rejects once closed');
    });

    t.test('createFirstToken stores a token only into an empty token table', async (t) => {
      const store = await open(t);
      const first = generateToken();
      const second = generateToken();
      t.equal(await store.tokens.createFirstToken({ name: 'first-start', hash: hashToken(first), hint: tokenHint(first) }), true);
      t.equal(
        await store.tokens.createFirstToken({ name: 'another', hash: hashToken(second), hint: tokenHint(second) }),
        false,
        'a second token with another name and hash is refused',
      );
      t.equal(
        await store.tokens.createFirstToken({ name: 'first-start', hash: hashToken(first), hint: tokenHint(first) }),
        false,
        'the same token again is refused',
      );
      t.equal(await store.tokens.findTokenByHash(hashToken(second)), undefined, 'the refused token was not stored');
    });

    t.test('concurrent createFirstToken calls store exactly one token', async (t) => {
      const store = await open(t);
      const tokens = Array.from({ length: 10 }, () => generateToken());
      const answers = await Promise.all(
        tokens.map((token, index) => store.tokens.createFirstToken({ name: `racer ${index}`, hash: hashToken(token), hint: tokenHint(token) })),
      );
      t.equal(answers.filter(Boolean).length, 1, 'one true');
      const found = await Promise.all(tokens.map((token) => store.tokens.findTokenByHash(hashToken(token))));
      t.equal(found.filter(Boolean).length, 1, 'one token findable');
      t.equal(found.findIndex(Boolean), answers.indexOf(true), 'the stored one is the one answered true');
    });

    t.test('findTokenByHash finds a token by its hash and nothing else', async (t) => {
      const store = await open(t);
      const token = generateToken();
      const hash = hashToken(token);
      const hint = tokenHint(token);
      t.equal(await store.tokens.findTokenByHash(hash), undefined, 'nothing before it is stored');
      t.ok(await store.tokens.createFirstToken({ name: 'first-start', hash, hint }));
      const found = await store.tokens.findTokenByHash(hash);
      if (!found) throw new Error('the stored token was not found by its hash');
      t.equal(found.name, 'first-start');
      t.equal(found.hint, hint);
      t.equal(typeof found.id, 'number');
      t.equal(typeof found.createdAt, 'string');
      t.notOk(Number.isNaN(Date.parse(found.createdAt)), `createdAt ${found.createdAt} is a timestamp`);
      t.same(Object.keys(found).sort(), ['createdAt', 'hint', 'id', 'name', 'scopes'], 'the record carries no hash and no token');
      t.same(found.scopes, ['*'], 'the first token has every scope');
      t.notOk(JSON.stringify(found).includes(token.slice(-12)), 'the record does not reveal the token');

      t.equal(await store.tokens.findTokenByHash(hashToken(generateToken())), undefined, 'an unknown hash');
      t.equal(await store.tokens.findTokenByHash(token), undefined, 'the token itself is not a key: only its hash is');
      t.equal(await store.tokens.findTokenByHash(''), undefined, 'the empty string');
    });

    t.test('ping resolves on an open store', async (t) => {
      const store = await open(t);
      await t.resolves(store.ping());
    });

    t.test('close settles creates already issued, then ping and createPlant reject; close is idempotent', async (t) => {
      const store = await open(t);
      const issued = store.plants.createPlant({ id: 1n, name: 'issued before close' });
      await store.close();
      t.equal((await issued).outcome, 'created', 'a create issued before close is not left hanging');
      await t.rejects(store.ping(), 'ping rejects once closed');
      await t.rejects(store.plants.createPlant({ id: 2n, name: 'too late' }), 'createPlant rejects once closed');
      await t.resolves(store.close(), 'a second close resolves');
      await t.resolves(store.close(), 'and a third');
    });

    // The webhook outbox. "Now" is NOW, far in the future, so every delivery written during the
    // test is due; leases, retries and pruning are driven by instants derived from it.

    t.test('createSubscription answers the subscription; listSubscriptions lists every one in id order', async (t) => {
      const store = await open(t);
      t.strictSame(await store.webhooks.listSubscriptions({ limit: 1000 }), [], 'none at first');
      const before = Date.now();
      const first = await store.webhooks.createSubscription(newSubscription('first', ['plant.created', 'plant.deleted']), SUBSCRIPTIONS_MAX);
      const after = Date.now();
      t.equal(typeof first.id, 'bigint', 'the id is a bigint');
      t.equal(first.url, newSubscription('first', []).url, 'the url as given');
      t.strictSame(first.events, ['plant.created', 'plant.deleted'], 'the events as given');
      t.notOk(Number.isNaN(Date.parse(first.createdAt)), `createdAt ${first.createdAt} is a timestamp`);
      const createdAt = Date.parse(first.createdAt);
      t.ok(createdAt >= before - 5_000 && createdAt <= after + 5_000, 'createdAt is the time of creation');
      t.strictSame(Object.keys(first).sort(), ['createdAt', 'events', 'id', 'url'], 'no disabledAt, no disabledReason, never the secret');

      const second = await store.webhooks.createSubscription(newSubscription('second', ['plant.deleted', 'plant.replaced', 'plant.created']), SUBSCRIPTIONS_MAX);
      const third = await store.webhooks.createSubscription(newSubscription('third', ['plant.replaced']), SUBSCRIPTIONS_MAX);
      t.strictSame(second.events, ['plant.deleted', 'plant.replaced', 'plant.created'], 'events in the order given');
      t.ok(first.id < second.id && second.id < third.id, 'ids grow');
      t.strictSame(await store.webhooks.listSubscriptions({ limit: 1000 }), [first, second, third], 'listed exactly as answered, in id order');
    });

    t.test('listSubscriptions answers a page: up to limit, only ids greater than after', async (t) => {
      const store = await open(t);
      const made: Subscription[] = [];
      for (const label of ['a', 'b', 'c', 'd', 'e']) made.push(await store.webhooks.createSubscription(newSubscription(label, ['plant.created']), SUBSCRIPTIONS_MAX));
      t.strictSame(await store.webhooks.listSubscriptions({ limit: 2 }), made.slice(0, 2), 'the first two');
      t.strictSame(await store.webhooks.listSubscriptions({ after: made[1]!.id, limit: 2 }), made.slice(2, 4), 'the two after the second');
      t.strictSame(await store.webhooks.listSubscriptions({ after: made[3]!.id, limit: 2 }), made.slice(4), 'the last');
      t.strictSame(await store.webhooks.listSubscriptions({ after: made[4]!.id, limit: 2 }), [], 'none after the last');
      t.strictSame(await store.webhooks.listSubscriptions({ after: INT64_MIN, limit: 10 }), made, 'after the least int64: all');
      t.strictSame(await store.webhooks.listSubscriptions({ after: INT64_MAX, limit: 10 }), [], 'after the largest int64: none, no overflow');
    });

    t.test('createSubscription stores nothing once max are stored, deleted ones not counted', async (t) => {
      const store = await open(t);
      const first = await store.webhooks.createSubscription(newSubscription('first', ['plant.created']), 2);
      await store.webhooks.createSubscription(newSubscription('second', ['plant.created']), 2);
      await t.rejects(store.webhooks.createSubscription(newSubscription('third', ['plant.created']), 2), new SubscriptionLimitError(2), 'the third is refused');
      t.equal((await store.webhooks.listSubscriptions({ limit: 10 })).length, 2, 'and not stored');
      t.equal((await store.webhooks.createSubscription(newSubscription('third', ['plant.created']), 3)).url, newSubscription('third', []).url, 'a higher max admits it');
      await store.webhooks.deleteSubscription(first.id);
      await t.resolves(store.webhooks.createSubscription(newSubscription('fourth', ['plant.created']), 3), 'a deleted one frees its place');
      t.equal((await store.webhooks.listSubscriptions({ limit: 10 })).length, 3, 'three stored');
    });

    t.test('creates racing at the limit store exactly max', async (t) => {
      const store = await open(t);
      await store.webhooks.createSubscription(newSubscription('already', ['plant.created']), 5);
      const settled = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => store.webhooks.createSubscription(newSubscription(`racer ${i}`, ['plant.created']), 5)));
      t.equal(settled.filter((result) => result.status === 'fulfilled').length, 4, 'four more stored');
      t.ok(settled.every((result) => result.status === 'fulfilled' || result.reason instanceof SubscriptionLimitError), 'the rest refused for the limit');
      t.equal((await store.webhooks.listSubscriptions({ limit: 100 })).length, 5, 'five in the store');
    });

    t.test('deleteSubscription answers true once, then false; listDeliveries answers only for existing subscriptions', async (t) => {
      const store = await open(t);
      t.equal(await store.webhooks.listDeliveries(1n, 10), undefined, 'no subscription yet');
      const kept = await store.webhooks.createSubscription(newSubscription('kept', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX);
      const removed = await store.webhooks.createSubscription(newSubscription('removed', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX);
      t.strictSame(await store.webhooks.listDeliveries(kept.id, 10), [], 'a fresh subscription has no deliveries');
      t.strictSame(await store.webhooks.listDeliveries(removed.id, 10), [], 'nor does the other');
      t.equal(await store.webhooks.listDeliveries(removed.id + 1000n, 10), undefined, 'an unknown subscription');

      t.equal(await store.webhooks.deleteSubscription(removed.id), true, 'deleted');
      t.equal(await store.webhooks.deleteSubscription(removed.id), false, 'deleted again: there was none');
      t.equal(await store.webhooks.deleteSubscription(removed.id + 1000n), false, 'an unknown subscription');
      t.strictSame(await store.webhooks.listSubscriptions({ limit: 1000 }), [kept], 'only the other is listed');
      t.equal(await store.webhooks.listDeliveries(removed.id, 10), undefined, 'a deleted subscription is unknown');
      t.strictSame(await store.webhooks.listDeliveries(kept.id, 10), [], 'the other is untouched');
    });

    t.test('createPlant writes one pending delivery per enabled subscription to plant.created, and only when created', async (t) => {
      const store = await open(t);
      const every = await store.webhooks.createSubscription(newSubscription('every', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX);
      const created = await store.webhooks.createSubscription(newSubscription('created', ['plant.created']), SUBSCRIPTIONS_MAX);
      const deleted = await store.webhooks.createSubscription(newSubscription('deleted', ['plant.deleted']), SUBSCRIPTIONS_MAX);
      const plant: PlantRecord = { id: TWO_53 + 1n, name: 'Monstera', tag: 'aroid' };
      const before = Date.now();
      t.equal((await store.plants.createPlant(plant)).outcome, 'created');

      for (const subscription of [every, created]) {
        const deliveries = await deliveriesOf(store, subscription.id);
        t.equal(deliveries.length, 1, `${subscription.url}: exactly one delivery`);
        const delivery = deliveries[0]!;
        t.equal(delivery.event, 'plant.created');
        t.equal(delivery.status, 'pending');
        t.equal(delivery.attempts, 0, 'not attempted yet');
        t.equal(typeof delivery.messageId, 'string');
        t.ok(delivery.messageId.length > 0, 'a message id');
        t.ok(Date.parse(delivery.createdAt) >= before - 5_000, `createdAt ${delivery.createdAt} is the time of the write`);
        for (const key of ['lastAttemptAt', 'lastResponseStatus', 'lastError'] as const) t.notOk(key in delivery, `no ${key} before an attempt`);
      }
      t.strictSame(await store.webhooks.listDeliveries(deleted.id, 10), [], 'none for a subscription to plant.deleted only');

      const claimed = await claimAll(store);
      t.equal(claimed.length, 2, 'both are due');
      t.strictSame(claimed.map((delivery) => delivery.subscriptionId).sort(compareBigints), [every.id, created.id], 'one per subscription');
      for (const delivery of claimed) {
        t.equal(delivery.event, 'plant.created');
        t.equal(delivery.payload, eventPayload(plant), 'the payload is eventPayload(plant)');
        t.equal(delivery.payload, '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}', 'the id digit for digit');
        t.equal(delivery.messageId, (await deliveriesOf(store, delivery.subscriptionId))[0]!.messageId, 'the listed message id');
      }

      t.equal((await store.plants.createPlant({ ...plant })).outcome, 'unchanged');
      t.equal((await store.plants.createPlant({ ...plant, name: 'Intruder' })).outcome, 'conflict');
      t.equal((await store.plants.createPlant({ id: plant.id, name: 'Monstera' })).outcome, 'conflict');
      t.equal((await deliveriesOf(store, every.id)).length, 1, 'unchanged and conflict wrote no delivery');
      t.equal((await deliveriesOf(store, created.id)).length, 1, 'to either subscription');
      t.strictSame(await claimAll(store), [], 'nothing new is due');
    });

    t.test('replacePlant and deletePlant write plant.replaced and plant.deleted when done, nothing otherwise', async (t) => {
      const store = await open(t);
      const every = await store.webhooks.createSubscription(newSubscription('every', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX);
      const created = await store.webhooks.createSubscription(newSubscription('created', ['plant.created']), SUBSCRIPTIONS_MAX);
      const replaced = await store.webhooks.createSubscription(newSubscription('replaced', ['plant.replaced']), SUBSCRIPTIONS_MAX);
      const deleted = await store.webhooks.createSubscription(newSubscription('deleted', ['plant.deleted']), SUBSCRIPTIONS_MAX);
      const id = INT64_MIN;
      await seed(t, store, [{ id, name: 'Fern', tag: 'fern' }]);
      t.equal((await claimAll(store)).length, 2, 'the creation, to every and to created');

      expectWrite(t, await store.plants.replacePlant(id + 1n, { name: 'Ghost' }), { outcome: 'missing' }, 'replace an unknown id');
      expectWrite(t, await store.plants.deletePlant(INT64_MAX), { outcome: 'missing' }, 'delete an unknown id');
      const current: PlantRecord = { id, name: 'Fern', tag: 'fern' };
      expectWrite(t, await store.plants.replacePlant(id, { name: 'Refused' }, () => false), { outcome: 'precondition-failed', current }, 'replace, refused');
      expectWrite(t, await store.plants.deletePlant(id, () => false), { outcome: 'precondition-failed', current }, 'delete, refused');
      t.strictSame(await claimAll(store), [], 'missing and precondition-failed wrote no delivery');

      const plain: PlantRecord = { id, name: 'Plain' };
      expectWrite(t, await store.plants.replacePlant(id, { name: 'Plain' }, () => true), { outcome: 'done', plant: plain }, 'replace without a tag');
      const plainClaims = await claimAll(store);
      t.strictSame(plainClaims.map((delivery) => delivery.subscriptionId).sort(compareBigints), [every.id, replaced.id], 'to every and to replaced');
      for (const delivery of plainClaims) {
        t.equal(delivery.event, 'plant.replaced');
        t.equal(delivery.payload, eventPayload(plain), 'the payload is eventPayload of the new plant');
        t.equal(delivery.payload, '{"id":-9223372036854775808,"name":"Plain"}', 'no tag field, the id digit for digit');
      }

      const emptyTag: PlantRecord = { id, name: 'Fern renamed', tag: '' };
      expectWrite(t, await store.plants.replacePlant(id, { name: 'Fern renamed', tag: '' }), { outcome: 'done', plant: emptyTag }, 'replace with an empty tag');
      const emptyTagClaims = await claimAll(store);
      t.equal(emptyTagClaims.length, 2);
      t.ok(emptyTagClaims.every((delivery) => delivery.payload === '{"id":-9223372036854775808,"name":"Fern renamed","tag":""}'), 'an empty tag is written');

      expectWrite(t, await store.plants.deletePlant(id, () => true), { outcome: 'done', plant: emptyTag }, 'delete');
      const deleteClaims = await claimAll(store);
      t.strictSame(deleteClaims.map((delivery) => delivery.subscriptionId).sort(compareBigints), [every.id, deleted.id], 'to every and to deleted');
      for (const delivery of deleteClaims) {
        t.equal(delivery.event, 'plant.deleted');
        t.equal(delivery.payload, eventPayload(emptyTag), 'the payload is the plant that was deleted');
      }
      expectWrite(t, await store.plants.deletePlant(id), { outcome: 'missing' }, 'delete again');
      expectWrite(t, await store.plants.replacePlant(id, { name: 'back' }), { outcome: 'missing' }, 'replace once deleted');
      t.strictSame(await claimAll(store), [], 'neither wrote a delivery');

      const events = async (subscription: Subscription) => (await deliveriesOf(store, subscription.id)).map((delivery) => delivery.event);
      t.strictSame(await events(every), ['plant.deleted', 'plant.replaced', 'plant.replaced', 'plant.created'], 'every: each change, newest first');
      t.strictSame(await events(created), ['plant.created']);
      t.strictSame(await events(replaced), ['plant.replaced', 'plant.replaced']);
      t.strictSame(await events(deleted), ['plant.deleted']);
    });

    t.test('payloads are eventPayload(plant) exactly, int64 ids digit for digit', async (t) => {
      const store = await open(t);
      await store.webhooks.createSubscription(newSubscription('every', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX);
      const plants = await seed(t, store, [
        { id: INT64_MAX, name: 'int64 max "quoted" \\ ☘ ünïcode', tag: 'edge' },
        { id: -(TWO_53 + 1n), name: 'below -2^53' },
        { id: TWO_53 + 1n, name: '2^53 + 1', tag: '' },
        { id: INT64_MIN, name: 'int64 min', tag: 'edge' },
      ]);
      const claimed = await claimAll(store);
      t.strictSame(claimed.map((delivery) => delivery.payload), plants.map(eventPayload), 'each exactly eventPayload(plant), oldest first');
      t.strictSame(
        claimed.map((delivery) => delivery.payload),
        [
          '{"id":9223372036854775807,"name":"int64 max \\"quoted\\" \\\\ ☘ ünïcode","tag":"edge"}',
          '{"id":-9007199254740993,"name":"below -2^53"}',
          '{"id":9007199254740993,"name":"2^53 + 1","tag":""}',
          '{"id":-9223372036854775808,"name":"int64 min","tag":"edge"}',
        ],
        'written out by hand',
      );
      expectWrite(t, await store.plants.replacePlant(TWO_53 + 1n, { name: 'renamed' }), { outcome: 'done', plant: { id: TWO_53 + 1n, name: 'renamed' } }, 'replace');
      expectWrite(t, await store.plants.deletePlant(INT64_MAX), { outcome: 'done', plant: plants[0]! }, 'delete');
      t.strictSame(
        (await claimAll(store)).map((delivery) => [delivery.event, delivery.payload]),
        [
          ['plant.replaced', '{"id":9007199254740993,"name":"renamed"}'],
          ['plant.deleted', eventPayload(plants[0]!)],
        ],
      );
    });

    t.test('payloads of creates issued together are eventPayload(plant) exactly, whatever the characters', async (t) => {
      const store = await open(t);
      await store.webhooks.createSubscription(newSubscription('every', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX);
      const plants: PlantRecord[] = [
        { id: INT64_MIN, name: 'controls \b\f\n\r\t \u0001\u001f \u007f', tag: 'quote " backslash \\ slash /' },
        { id: -(TWO_53 + 1n), name: 'separators \u2028\u2029 ☘ ünïcode 𝔘' },
        { id: 0n, name: '', tag: '' },
        { id: INT64_MAX, name: '<script>&amp;</script>', tag: 'edge' },
      ];
      // Issued in one tick: one group-commit batch.
      const results = await Promise.all(plants.map((plant) => store.plants.createPlant(plant)));
      t.same(countOutcomes(results), { created: plants.length });
      const payloads = (await claimAll(store)).map((delivery) => delivery.payload);
      t.strictSame(payloads.toSorted(), plants.map(eventPayload).toSorted(), 'each exactly eventPayload(plant)');
      t.ok(payloads.includes('{"id":0,"name":"","tag":""}'), 'an empty name and tag are written');
    });

    t.test('message ids are unique per delivery, also for writes issued together', async (t) => {
      const store = await open(t);
      const subscriptions = [
        await store.webhooks.createSubscription(newSubscription('one', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX),
        await store.webhooks.createSubscription(newSubscription('two', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX),
        await store.webhooks.createSubscription(newSubscription('three', ['plant.created']), SUBSCRIPTIONS_MAX),
      ];
      const ids = Array.from({ length: 20 }, (_, index) => TWO_53 + BigInt(index));
      // Issued in one tick: one group-commit batch for SQLite.
      const results = await Promise.all(ids.map((id) => store.plants.createPlant({ id, name: `plant ${id}` })));
      t.same(countOutcomes(results), { created: 20 });
      await Promise.all([
        ...ids.slice(0, 10).map((id) => store.plants.replacePlant(id, { name: 'renamed' })),
        ...ids.slice(10).map((id) => store.plants.deletePlant(id)),
      ]);
      const listed = (await Promise.all(subscriptions.map((subscription) => deliveriesOf(store, subscription.id)))).flat();
      t.equal(listed.length, 20 * 3 + 20 * 2, 'three subscriptions to plant.created, two to the others');
      t.equal(new Set(listed.map((delivery) => delivery.messageId)).size, listed.length, 'every message id is distinct');
      const claimed = await claimAll(store);
      t.strictSame(
        claimed.map((delivery) => delivery.messageId).sort(),
        listed.map((delivery) => delivery.messageId).sort(),
        'the claims carry the same message ids',
      );
    });

    t.test('claimDueDeliveries leases due deliveries oldest first, up to the limit, with the url and secret of their subscription', async (t) => {
      const store = await open(t);
      const a = await store.webhooks.createSubscription(newSubscription('a', ['plant.created']), SUBSCRIPTIONS_MAX);
      const b = await store.webhooks.createSubscription(newSubscription('b', ['plant.created', 'plant.deleted']), SUBSCRIPTIONS_MAX);
      const secrets = new Map([
        [a.id, newSubscription('a', []).secret],
        [b.id, newSubscription('b', []).secret],
      ]);
      t.strictSame(await claimAll(store), [], 'nothing before any plant change');
      // Created out of id order: oldest means written first, not lowest plant id.
      const plants = await seed(t, store, [
        { id: 3n, name: 'three' },
        { id: 1n, name: 'one' },
        { id: 2n, name: 'two' },
      ]);
      t.strictSame(await store.webhooks.claimDueDeliveries(new Date('2000-01-01T00:00:00.000Z'), LEASE_MS, 100), [], 'nothing is due before it was written');

      const first = await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 2);
      const second = await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 3);
      const third = await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 10);
      t.strictSame([first.length, second.length, third.length], [2, 3, 1], 'each claim takes up to its limit');
      t.strictSame(await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 10), [], 'then nothing is left');
      const all = [...first, ...second, ...third];
      t.strictSame(
        all.map((delivery) => delivery.payload),
        [plants[0]!, plants[0]!, plants[1]!, plants[1]!, plants[2]!, plants[2]!].map(eventPayload),
        'oldest first',
      );
      t.ok(all.every((delivery, index) => index === 0 || all[index - 1]!.id < delivery.id), 'in ascending delivery id, each once');
      for (const [index, delivery] of all.entries()) {
        t.equal(typeof delivery.id, 'bigint', `${index}: the id is a bigint`);
        t.equal(typeof delivery.subscriptionId, 'bigint', `${index}: the subscription id is a bigint`);
        const subscription = delivery.subscriptionId === a.id ? a : b;
        t.equal(delivery.url, subscription.url, `${index}: the url of its subscription`);
        t.equal(delivery.secret, secrets.get(subscription.id), `${index}: the secret of its subscription`);
        t.equal(delivery.event, 'plant.created');
        t.equal(delivery.attempts, 0);
      }
      for (let plant = 0; plant < 3; plant += 1) {
        t.strictSame(all.slice(2 * plant, 2 * plant + 2).map((delivery) => delivery.subscriptionId).sort(compareBigints), [a.id, b.id], `plant ${plant}: one each`);
      }
      const ofA = all.filter((delivery) => delivery.subscriptionId === a.id);
      t.strictSame(
        (await deliveriesOf(store, a.id, 2)).map((delivery) => delivery.messageId),
        [ofA[2]!.messageId, ofA[1]!.messageId],
        'listDeliveries: newest first, up to its limit',
      );
      t.ok((await deliveriesOf(store, a.id)).every((delivery) => delivery.status === 'pending' && delivery.attempts === 0), 'a lease is not an attempt');
    });

    t.test('a leased delivery is not leased again until its lease ends', async (t) => {
      const store = await open(t);
      await store.webhooks.createSubscription(newSubscription('only', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX);
      await seed(t, store, [{ id: 1n, name: 'one' }]);
      const leased = await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 10);
      t.equal(leased.length, 1);
      t.strictSame(await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 10), [], 'not again at the same instant');
      t.strictSame(await store.webhooks.claimDueDeliveries(later(LEASE_MS - 1), LEASE_MS, 10), [], 'nor just before the lease ends');
      t.strictSame(await store.webhooks.claimDueDeliveries(later(LEASE_MS + 1), LEASE_MS, 10), leased, 'after it ends: leased again, the same delivery');
      t.strictSame(await store.webhooks.claimDueDeliveries(later(LEASE_MS + 1), LEASE_MS, 10), [], 'and the new lease holds in turn');
      t.strictSame(await store.webhooks.claimDueDeliveries(later(2 * LEASE_MS + 2), LEASE_MS, 10), leased, 'until it ends too');
    });

    t.test('claims issued together never lease the same delivery', async (t) => {
      const store = await open(t);
      await store.webhooks.createSubscription(newSubscription('only', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, [{ id: 0n, name: 'contested' }]);
      const pair = await Promise.all([store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 10), store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 10)]);
      t.strictSame(pair.map((claimed) => claimed.length).sort(), [0, 1], 'one delivery, two claims at the same time: one gets it');

      const results = await Promise.all(Array.from({ length: 40 }, (_, index) => store.plants.createPlant({ id: BigInt(index + 1), name: `plant ${index}` })));
      t.same(countOutcomes(results), { created: 40 });
      const claims = await Promise.all(Array.from({ length: 8 }, () => store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 7)));
      t.ok(claims.every((claimed) => claimed.length <= 7), 'each within its limit');
      const ids = claims.flat().map((delivery) => delivery.id);
      t.equal(new Set(ids).size, ids.length, `no delivery leased twice (${ids.length} leased by 8 claims)`);
      const rest = (await claimAll(store)).map((delivery) => delivery.id);
      t.notOk(rest.some((id) => ids.includes(id)), 'a later claim takes none of them');
      t.equal(ids.length + rest.length, 40, 'every delivery leased exactly once');
    });

    t.test('a claim takes every subscription in turn, each up to its share of leases, counting those it holds', async (t) => {
      const store = await open(t);
      // The busy subscription's deliveries are all older than the quiet one's: a claim by age alone would take only them.
      const busy = await store.webhooks.createSubscription(newSubscription('busy', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, Array.from({ length: 10 }, (_, i) => ({ id: BigInt(i + 1), name: `busy ${i}` })));
      const quiet = await store.webhooks.createSubscription(newSubscription('quiet', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, [
        { id: 100n, name: 'both' },
        { id: 101n, name: 'both again' },
      ]);
      const first = await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 3, 2);
      t.strictSame(first.map((delivery) => delivery.subscriptionId).sort(compareBigints), [busy.id, busy.id, quiet.id], 'the quiet one is in the first claim of 3');
      const second = await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 10, 2);
      t.strictSame(second.map((delivery) => delivery.subscriptionId), [quiet.id], 'the busy one holds its 2 leases: only the quiet one gets more');
      t.strictSame(await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 10, 2), [], 'then both hold their share');
      await store.webhooks.recordAttempt({ id: first.find((delivery) => delivery.subscriptionId === busy.id)!.id, at: iso(1), result: 'delivered', responseStatus: 204 });
      const freed = await store.webhooks.claimDueDeliveries(later(1), LEASE_MS, 10, 2);
      t.strictSame(freed.map((delivery) => [delivery.subscriptionId, delivery.payload]), [[busy.id, eventPayload({ id: 3n, name: 'busy 2' })]], 'an attempt recorded frees one lease: the next in due order');
      const afterLeases = await store.webhooks.claimDueDeliveries(later(LEASE_MS + 2), LEASE_MS, 10, 2);
      const busyAgain = afterLeases.filter((delivery) => delivery.subscriptionId === busy.id);
      t.equal(busyAgain.length, 2, 'leases that ran out (a crashed sender) no longer count: 2 again');
    });

    t.test('a subscription holding no lease gets its first due delivery even when the shared slots are all taken', async (t) => {
      const store = await open(t);
      const subscriptions = [];
      for (const label of ['first', 'second', 'third']) subscriptions.push(await store.webhooks.createSubscription(newSubscription(label, ['plant.created']), SUBSCRIPTIONS_MAX));
      await seed(t, store, Array.from({ length: 4 }, (_, i) => ({ id: BigInt(i + 1), name: `plant ${i}` })));
      const own = await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 0, 2);
      t.strictSame(own.map((delivery) => delivery.subscriptionId).sort(compareBigints), subscriptions.map(({ id }) => id), 'no shared slot: still one each');
      t.strictSame(own.map((delivery) => delivery.payload), Array(3).fill(eventPayload({ id: 1n, name: 'plant 0' })), 'each its oldest');
      t.strictSame(await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 0, 2), [], 'then none: each holds a lease');
      const shared = await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 1, 2);
      t.equal(shared.length, 1, 'a shared slot takes one more');
      const other = own.find((delivery) => delivery.subscriptionId !== shared[0]!.subscriptionId)!;
      await store.webhooks.recordAttempt({ id: other.id, at: iso(1), result: 'delivered', responseStatus: 204 });
      const freed = await store.webhooks.claimDueDeliveries(later(1), LEASE_MS, 0, 2);
      t.strictSame(freed.map((delivery) => delivery.subscriptionId), [other.subscriptionId], 'its attempt recorded, a subscription left without a lease gets its own slot again');
    });

    t.test('until its receiver answers, a subscription gets only its unanswered share', async (t) => {
      const store = await open(t);
      await store.webhooks.createSubscription(newSubscription('new', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, Array.from({ length: 8 }, (_, i) => ({ id: BigInt(i + 1), name: `plant ${i}` })));
      const [first, ...more] = await store.webhooks.claimDueDeliveries(NOW, LEASE_MS, 10, 3, 1);
      t.equal(more.length, 0, 'never attempted: one lease');
      await store.webhooks.recordAttempt({ id: first!.id, at: iso(1), result: 'retry', nextAttemptAt: iso(LEASE_MS * 10), error: 'could not deliver: timeout' });
      const [second, ...none] = await store.webhooks.claimDueDeliveries(later(2), LEASE_MS, 10, 3, 1);
      t.equal(none.length, 0, 'no answer: still one');
      await store.webhooks.recordAttempt({ id: second!.id, at: iso(3), result: 'retry', nextAttemptAt: iso(LEASE_MS * 10), responseStatus: 503, error: '503' });
      const answered = await store.webhooks.claimDueDeliveries(later(4), LEASE_MS, 10, 3, 1);
      t.equal(answered.length, 3, 'answered (even 503): its full share');
      await store.webhooks.recordAttempt({ id: answered[0]!.id, at: iso(5), result: 'retry', nextAttemptAt: iso(LEASE_MS * 10), error: 'could not deliver: timeout' });
      t.strictSame(await store.webhooks.claimDueDeliveries(later(6), LEASE_MS, 10, 3, 1), [], 'no answer again: one lease, and it holds two');
      t.equal((await store.webhooks.claimDueDeliveries(later(6), LEASE_MS, 10, 3)).length, 1, 'the same without a share for unanswered receivers: up to 3');
    });

    t.test('a rotated secret signs with the previous one until the overlap ends; a disabled subscription is enabled again', async (t) => {
      const store = await open(t);
      const subscription = await store.webhooks.createSubscription(newSubscription('rotating', ['plant.created']), SUBSCRIPTIONS_MAX);
      const old = newSubscription('rotating', []).secret;
      const rotated = await store.webhooks.rotateSubscriptionSecret(subscription.id, 'whsec_bmV3', later(1_000));
      t.strictSame(rotated, { ...subscription, previousSecretExpiresAt: iso(1_000) }, 'the subscription, with the end of the overlap');
      t.strictSame(await store.webhooks.listSubscriptions({ limit: 1000 }), [rotated], 'listed so');
      await seed(t, store, [{ id: 1n, name: 'one' }]);
      const [during] = await claimAll(store);
      t.match(during, { secret: 'whsec_bmV3', previousSecret: old }, 'during the overlap: both secrets');
      const [after] = await claimAll(store, later(LEASE_MS + 1_000));
      t.equal(after!.secret, 'whsec_bmV3', 'after it: the new secret');
      t.notOk('previousSecret' in after!, 'alone');
      await store.webhooks.rotateSubscriptionSecret(subscription.id, 'whsec_bmV3lcg==', later(LEASE_MS * 10));
      const [again] = await claimAll(store, later(2 * LEASE_MS + 2_000));
      t.match(again, { secret: 'whsec_bmV3lcg==', previousSecret: 'whsec_bmV3' }, 'rotating again: the one it replaced signs alongside, the oldest no more');
      t.equal(await store.webhooks.rotateSubscriptionSecret(987654321n, 'whsec_AAAA', NOW), undefined, 'an unknown subscription: undefined');

      await store.webhooks.recordAttempt({ id: again!.id, at: iso(1), result: 'failed', responseStatus: 410, error: '410', disableSubscription: 'the receiver answered 410 Gone' });
      t.match((await store.webhooks.listSubscriptions({ limit: 1000 }))[0], { disabledReason: 'the receiver answered 410 Gone' }, 'disabled');
      const enabled = await store.webhooks.enableSubscription(subscription.id);
      t.notOk(enabled?.disabledAt ?? enabled?.disabledReason, 'enabled: no disabledAt nor disabledReason');
      t.strictSame(await store.webhooks.listSubscriptions({ limit: 1000 }), [enabled], 'listed enabled');
      t.strictSame(await claimAll(store, later(100 * LEASE_MS)), [], 'the failed delivery stays failed');
      await seed(t, store, [{ id: 2n, name: 'two' }]);
      t.equal((await claimAll(store, later(100 * LEASE_MS))).length, 1, 'a later event is delivered');
      t.equal(await store.webhooks.enableSubscription(987654321n), undefined, 'an unknown subscription: undefined');
    });

    t.test('recordAttempt delivered: delivered, never leased again', async (t) => {
      const store = await open(t);
      const subscription = await store.webhooks.createSubscription(newSubscription('only', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, [
        { id: 1n, name: 'one' },
        { id: 2n, name: 'two' },
      ]);
      const [one, two] = await claimAll(store);
      const [listedTwo, listedOne] = await deliveriesOf(store, subscription.id);
      await store.webhooks.recordAttempt({ id: one!.id, at: iso(1_000), result: 'delivered', responseStatus: 204 });
      // The second is retried first, then delivered: the error of the failed attempt goes.
      await store.webhooks.recordAttempt({ id: two!.id, at: iso(1_000), result: 'retry', nextAttemptAt: iso(2_000), responseStatus: 503, error: '503' });
      t.equal((await store.webhooks.claimDueDeliveries(later(2_000), LEASE_MS, 10)).length, 1, 'the retry is due');
      await store.webhooks.recordAttempt({ id: two!.id, at: iso(3_000), result: 'delivered', responseStatus: 200 });
      t.strictSame(
        await deliveriesOf(store, subscription.id),
        [
          { ...identity(listedTwo!), status: 'delivered', attempts: 2, lastAttemptAt: iso(3_000), lastResponseStatus: 200 },
          { ...identity(listedOne!), status: 'delivered', attempts: 1, lastAttemptAt: iso(1_000), lastResponseStatus: 204 },
        ],
        'delivered, attempts counted, the last status; no nextAttemptAt and no lastError',
      );
      t.strictSame(await store.webhooks.claimDueDeliveries(later(100 * LEASE_MS), LEASE_MS, 10), [], 'a delivered delivery is never leased again');
    });

    t.test('recordAttempt retry: pending again, due from nextAttemptAt on; failed: failed for good', async (t) => {
      const store = await open(t);
      const subscription = await store.webhooks.createSubscription(newSubscription('only', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, [{ id: TWO_53 + 1n, name: 'retried' }]);
      const [claimed] = await claimAll(store);
      const base = identity((await deliveriesOf(store, subscription.id))[0]!);

      // Due within the first lease: recording an attempt ends the lease.
      const error = 'the receiver answered 503';
      await store.webhooks.recordAttempt({ id: claimed!.id, at: iso(1_000), result: 'retry', nextAttemptAt: iso(10_000), responseStatus: 503, error });
      t.strictSame(
        await deliveriesOf(store, subscription.id),
        [{ ...base, status: 'pending', attempts: 1, lastAttemptAt: iso(1_000), lastResponseStatus: 503, lastError: error, nextAttemptAt: iso(10_000) }],
        'pending, one attempt, with its status, error and next attempt',
      );
      t.strictSame(await store.webhooks.claimDueDeliveries(later(9_999), LEASE_MS, 10), [], 'not due before nextAttemptAt');
      const [again] = await store.webhooks.claimDueDeliveries(later(10_000), LEASE_MS, 10);
      t.equal(again?.id, claimed!.id, 'due at nextAttemptAt');
      t.equal(again?.messageId, claimed!.messageId, 'under the same message id');
      t.equal(again?.attempts, 1, 'carrying the attempts so far');
      t.equal(again?.payload, claimed!.payload);

      await store.webhooks.recordAttempt({ id: claimed!.id, at: iso(11_000), result: 'retry', nextAttemptAt: iso(100_000), error: 'could not deliver: connection refused' });
      t.strictSame(
        await deliveriesOf(store, subscription.id),
        [{ ...base, status: 'pending', attempts: 2, lastAttemptAt: iso(11_000), lastError: 'could not deliver: connection refused', nextAttemptAt: iso(100_000) }],
        'a retry without a status: no lastResponseStatus',
      );
      t.strictSame(await store.webhooks.claimDueDeliveries(later(99_999), LEASE_MS, 10), [], 'not due before the new nextAttemptAt');
      t.equal((await store.webhooks.claimDueDeliveries(later(100_000), LEASE_MS, 10))[0]?.attempts, 2, 'due at it');

      await store.webhooks.recordAttempt({ id: claimed!.id, at: iso(101_000), result: 'failed', responseStatus: 500, error: 'the receiver answered 500' });
      t.strictSame(
        await deliveriesOf(store, subscription.id),
        [{ ...base, status: 'failed', attempts: 3, lastAttemptAt: iso(101_000), lastResponseStatus: 500, lastError: 'the receiver answered 500' }],
        'failed, no nextAttemptAt',
      );
      t.strictSame(await store.webhooks.claimDueDeliveries(later(100 * LEASE_MS), LEASE_MS, 10), [], 'a failed delivery is never leased again');
      t.strictSame(await store.webhooks.listSubscriptions({ limit: 1000 }), [subscription], 'failing without disableSubscription leaves the subscription enabled');
    });

    t.test('recordAttempt failed with disableSubscription disables the subscription and fails its pending deliveries', async (t) => {
      const store = await open(t);
      const gone = await store.webhooks.createSubscription(newSubscription('gone', ['plant.created', 'plant.replaced']), SUBSCRIPTIONS_MAX);
      const other = await store.webhooks.createSubscription(newSubscription('other', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, [
        { id: 1n, name: 'one' },
        { id: 2n, name: 'two' },
        { id: 3n, name: 'three' },
      ]);
      const claimed = await claimAll(store);
      const first = claimed.find((delivery) => delivery.subscriptionId === gone.id)!;
      await store.webhooks.recordAttempt({
        id: first.id,
        at: iso(1_000),
        result: 'failed',
        responseStatus: 410,
        error: 'the receiver answered 410',
        disableSubscription: 'the receiver answered 410 Gone',
      });

      t.strictSame(
        await store.webhooks.listSubscriptions({ limit: 1000 }),
        [{ ...gone, disabledAt: iso(1_000), disabledReason: 'the receiver answered 410 Gone' }, other],
        'that subscription shows when and why it was disabled; the other is untouched',
      );
      const ofGone = await deliveriesOf(store, gone.id);
      t.equal(ofGone.length, 3);
      t.ok(ofGone.every((delivery) => delivery.status === 'failed'), 'every delivery of it failed');
      t.ok(ofGone.every((delivery) => !('nextAttemptAt' in delivery)), 'none has a next attempt');
      const attempted = ofGone.find((delivery) => delivery.messageId === first.messageId)!;
      t.equal(attempted.attempts, 1);
      t.equal(attempted.lastResponseStatus, 410);
      t.equal(attempted.lastAttemptAt, iso(1_000));
      for (const delivery of ofGone.filter((delivery) => delivery !== attempted)) {
        t.equal(delivery.attempts, 0, 'the others were never attempted');
        t.equal(typeof delivery.lastError, 'string', `with a reason: ${delivery.lastError}`);
      }
      t.ok((await deliveriesOf(store, other.id)).every((delivery) => delivery.status === 'pending'), "the other subscription's deliveries stay pending");

      const afterLeases = await store.webhooks.claimDueDeliveries(later(LEASE_MS + 1), LEASE_MS, 100);
      t.equal(afterLeases.length, 3, 'once the leases end, three are due again');
      t.ok(afterLeases.every((delivery) => delivery.subscriptionId === other.id), 'all of the other subscription');

      t.equal((await store.plants.createPlant({ id: 4n, name: 'four' })).outcome, 'created');
      expectWrite(t, await store.plants.replacePlant(1n, { name: 'one renamed' }), { outcome: 'done', plant: { id: 1n, name: 'one renamed' } }, 'replace');
      t.equal((await deliveriesOf(store, gone.id)).length, 3, 'a disabled subscription gets no new delivery');
      t.equal((await deliveriesOf(store, other.id)).length, 4, 'the other gets the creation');
      t.strictSame((await claimAll(store)).map((delivery) => delivery.subscriptionId), [other.id], 'only that one is due');
      t.equal(await store.webhooks.deleteSubscription(gone.id), true, 'a disabled subscription can be deleted');
    });

    t.test('an attempt recorded after its subscription was disabled never makes a delivery due again', async (t) => {
      // The dispatcher sends a batch in parallel: one delivery of a subscription may get 410 while
      // another of the same subscription, already in flight, gets 503 and is recorded afterwards.
      const store = await open(t);
      const gone = await store.webhooks.createSubscription(newSubscription('gone', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, [
        { id: 1n, name: 'one' },
        { id: 2n, name: 'two' },
      ]);
      const [first, second] = await claimAll(store);
      await store.webhooks.recordAttempt({ id: first!.id, at: iso(1_000), result: 'failed', responseStatus: 410, disableSubscription: 'the receiver answered 410 Gone' });
      await store.webhooks.recordAttempt({ id: second!.id, at: iso(1_001), result: 'retry', nextAttemptAt: iso(2_000), responseStatus: 503 });
      t.strictSame(await store.webhooks.claimDueDeliveries(later(100 * LEASE_MS), LEASE_MS, 10), [], 'nothing of a disabled subscription is leased');
      t.ok((await deliveriesOf(store, gone.id)).every((delivery) => delivery.status !== 'pending'), 'no delivery of it is pending');
    });

    t.test('recordAttempt for a delivery whose subscription was deleted meanwhile resolves and changes nothing', async (t) => {
      const store = await open(t);
      const removed = await store.webhooks.createSubscription(newSubscription('removed', ['plant.created']), SUBSCRIPTIONS_MAX);
      const kept = await store.webhooks.createSubscription(newSubscription('kept', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, [
        { id: 1n, name: 'one' },
        { id: 2n, name: 'two' },
        { id: 3n, name: 'three' },
        { id: 4n, name: 'four' },
      ]);
      const claimed = await claimAll(store);
      const [delivered, retried, failed, gone] = claimed.filter((delivery) => delivery.subscriptionId === removed.id);
      t.equal(await store.webhooks.deleteSubscription(removed.id), true, 'deleted while its deliveries are in flight');
      await t.resolves(store.webhooks.recordAttempt({ id: delivered!.id, at: iso(1_000), result: 'delivered', responseStatus: 200 }), 'delivered');
      await t.resolves(store.webhooks.recordAttempt({ id: retried!.id, at: iso(1_000), result: 'retry', nextAttemptAt: iso(2_000), responseStatus: 503 }), 'retry');
      await t.resolves(store.webhooks.recordAttempt({ id: failed!.id, at: iso(1_000), result: 'failed', error: 'gave up' }), 'failed');
      await t.resolves(
        store.webhooks.recordAttempt({ id: gone!.id, at: iso(1_000), result: 'failed', responseStatus: 410, disableSubscription: 'the receiver answered 410 Gone' }),
        'failed with disableSubscription',
      );
      t.strictSame(await store.webhooks.listSubscriptions({ limit: 1000 }), [kept], 'the other subscription is not disabled');
      t.equal(await store.webhooks.listDeliveries(removed.id, 10), undefined, 'nothing brought the deleted subscription back');
      t.ok(
        (await deliveriesOf(store, kept.id)).every((delivery) => delivery.status === 'pending' && delivery.attempts === 0),
        "the other's deliveries are untouched",
      );
      const due = await store.webhooks.claimDueDeliveries(later(LEASE_MS + 1), LEASE_MS, 100);
      t.strictSame(due.map((delivery) => delivery.subscriptionId), [kept.id, kept.id, kept.id, kept.id], 'only the four of the other are due');
    });

    t.test('pruneDeliveries removes delivered and failed deliveries attempted before their cut-offs, keeps pending ones', async (t) => {
      const store = await open(t);
      const subscription = await store.webhooks.createSubscription(newSubscription('one', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX);
      const another = await store.webhooks.createSubscription(newSubscription('another', ['plant.created']), SUBSCRIPTIONS_MAX);
      const DAY = 86_400_000;
      const deliveredBefore = later(5 * DAY);
      const failedBefore = later(10 * DAY);
      await seed(
        t,
        store,
        Array.from({ length: 8 }, (_, index) => ({ id: BigInt(index), name: `plant ${index}` })),
      );
      const claimed = await claimAll(store);
      const ofSubscription = claimed.filter((delivery) => delivery.subscriptionId === subscription.id);
      const ofAnother = claimed.filter((delivery) => delivery.subscriptionId === another.id);
      const outcomes: [AttemptOutcome, boolean][] = [
        [{ id: ofSubscription[0]!.id, at: iso(DAY), result: 'delivered', responseStatus: 200 }, true],
        [{ id: ofSubscription[1]!.id, at: iso(5 * DAY - 1), result: 'delivered', responseStatus: 200 }, true],
        [{ id: ofSubscription[2]!.id, at: iso(5 * DAY), result: 'delivered', responseStatus: 200 }, false], // not before the cut-off
        [{ id: ofSubscription[3]!.id, at: iso(7 * DAY), result: 'delivered', responseStatus: 200 }, false], // before the failed cut-off only
        [{ id: ofSubscription[4]!.id, at: iso(DAY), result: 'failed', responseStatus: 500 }, true],
        [{ id: ofSubscription[5]!.id, at: iso(7 * DAY), result: 'failed', error: 'gave up' }, true], // after the delivered cut-off
        [{ id: ofSubscription[6]!.id, at: iso(10 * DAY), result: 'failed', responseStatus: 500 }, false],
        [{ id: ofSubscription[7]!.id, at: iso(DAY), result: 'retry', nextAttemptAt: iso(20 * DAY), responseStatus: 503 }, false], // pending
        [{ id: ofAnother[0]!.id, at: iso(DAY), result: 'delivered', responseStatus: 204 }, true],
        [{ id: ofAnother[1]!.id, at: iso(DAY), result: 'retry', nextAttemptAt: iso(2 * DAY) }, false], // pending, overdue
      ];
      for (const [outcome] of outcomes) await store.webhooks.recordAttempt(outcome);
      // ofAnother[2..7] were never attempted: pending, kept.
      const messageIds = (deliveries: ClaimedDelivery[]) => deliveries.map((delivery) => delivery.messageId);
      const pruned = new Set(messageIds(claimed.filter((delivery) => outcomes.some(([outcome, prune]) => prune && outcome.id === delivery.id))));
      t.equal(pruned.size, 5, 'the expectation itself');

      t.equal(await store.webhooks.pruneDeliveries(deliveredBefore, failedBefore), 5, 'answers how many were removed');
      const remaining = [...(await deliveriesOf(store, subscription.id)), ...(await deliveriesOf(store, another.id))];
      t.strictSame(
        remaining.map((delivery) => delivery.messageId).sort(),
        messageIds(claimed).filter((messageId) => !pruned.has(messageId)).sort(),
        'exactly those are gone; the rest are kept',
      );
      t.equal(remaining.filter((delivery) => delivery.status === 'pending').length, 8, 'every pending delivery is kept');
      t.equal(await store.webhooks.pruneDeliveries(deliveredBefore, failedBefore), 0, 'pruning again removes nothing');
    });

    t.test('pruneDeliveries also removes the deliveries failed when their subscription was disabled', async (t) => {
      const store = await open(t);
      const gone = await store.webhooks.createSubscription(newSubscription('gone', ['plant.created']), SUBSCRIPTIONS_MAX);
      await seed(t, store, [
        { id: 1n, name: 'one' },
        { id: 2n, name: 'two' },
        { id: 3n, name: 'three' },
      ]);
      const [first] = await claimAll(store);
      await store.webhooks.recordAttempt({ id: first!.id, at: iso(1_000), result: 'failed', responseStatus: 410, disableSubscription: 'the receiver answered 410 Gone' });
      t.equal((await deliveriesOf(store, gone.id)).filter((delivery) => delivery.status === 'failed').length, 3, 'all three failed');
      t.equal(await store.webhooks.pruneDeliveries(later(100_000), later(100_000)), 3, 'all three are pruned once past the failed cut-off');
      t.strictSame(await store.webhooks.listDeliveries(gone.id, 10), [], 'none is left');
    });

    t.test('deleteSubscription removes its deliveries too, whatever their status', async (t) => {
      const store = await open(t);
      const removed = await store.webhooks.createSubscription(newSubscription('removed', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX);
      const kept = await store.webhooks.createSubscription(newSubscription('kept', WEBHOOK_EVENTS), SUBSCRIPTIONS_MAX);
      await seed(t, store, [
        { id: 1n, name: 'one' },
        { id: 2n, name: 'two' },
        { id: 3n, name: 'three' },
        { id: 4n, name: 'four' },
      ]);
      const claimed = await claimAll(store);
      const ofRemoved = claimed.filter((delivery) => delivery.subscriptionId === removed.id);
      const ofKept = claimed.filter((delivery) => delivery.subscriptionId === kept.id);
      await store.webhooks.recordAttempt({ id: ofRemoved[0]!.id, at: iso(1_000), result: 'delivered', responseStatus: 200 });
      await store.webhooks.recordAttempt({ id: ofRemoved[1]!.id, at: iso(1_000), result: 'failed', error: 'gave up' });
      await store.webhooks.recordAttempt({ id: ofRemoved[2]!.id, at: iso(1_000), result: 'retry', nextAttemptAt: iso(2_000) });
      await store.webhooks.recordAttempt({ id: ofKept[0]!.id, at: iso(1_000), result: 'delivered', responseStatus: 200 });
      const keptBefore = await deliveriesOf(store, kept.id);

      t.equal(await store.webhooks.deleteSubscription(removed.id), true);
      t.equal(await store.webhooks.listDeliveries(removed.id, 10), undefined, 'its deliveries are no longer listed');
      t.strictSame(await deliveriesOf(store, kept.id), keptBefore, "the other subscription's deliveries are untouched");
      const due = await store.webhooks.claimDueDeliveries(later(100 * LEASE_MS), LEASE_MS, 100);
      t.strictSame(due.map((delivery) => delivery.messageId), ofKept.slice(1).map((delivery) => delivery.messageId), "only the other's pending deliveries are due");
      t.equal(
        await store.webhooks.pruneDeliveries(later(100_000), later(100_000)),
        1,
        "its delivered and failed rows went too: only the other's delivered row is left to prune",
      );

      t.equal((await store.plants.createPlant({ id: 5n, name: 'five' })).outcome, 'created');
      t.strictSame((await claimAll(store, later(100 * LEASE_MS))).map((delivery) => delivery.subscriptionId), [kept.id], 'new changes go to the other only');
    });
  });
}

function expectPlant(t: Test, actual: PlantRecord, expected: PlantRecord): void {
  t.equal(actual.id, expected.id, 'stored id');
  t.equal(actual.name, expected.name, 'stored name');
  t.equal(actual.tag, expected.tag, 'stored tag');
}

/** Creates the plants one by one, each asserted created; answers them as given. */
async function seed(t: Test, store: PlantStore, plants: PlantRecord[]): Promise<PlantRecord[]> {
  for (const plant of plants) t.equal((await store.plants.createPlant(plant)).outcome, 'created', `seed ${plant.id}`);
  return plants;
}

function byId(plants: readonly PlantRecord[]): PlantRecord[] {
  return [...plants].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** A write's expected outcome: its version is the store's to give (the tests of versions check it apart). */
type ExpectedWrite = { outcome: 'done'; plant: PlantRecord } | { outcome: 'missing' } | { outcome: 'precondition-failed'; current: PlantRecord };

/** The outcome, and the plant it carries exactly (strictSame: bigint ids, a tag field only when expected). */
function expectWrite(t: Test, actual: ConditionalWrite, expected: ExpectedWrite, message: string): void {
  t.equal(actual.outcome, expected.outcome, `${message}: ${expected.outcome}`);
  if (expected.outcome === 'done') t.strictSame(actual.outcome === 'done' && actual.plant, expected.plant, `${message}: the plant`);
  if (expected.outcome === 'precondition-failed') {
    t.strictSame(actual.outcome === 'precondition-failed' && actual.current, expected.current, `${message}: the current plant`);
  }
}

/** A precondition answering `answer` that keeps what it was handed. */
function recording(answer: boolean): { precondition: Precondition; received: PlantRecord[] } {
  const received: PlantRecord[] = [];
  return {
    received,
    precondition: (current) => {
      received.push(structuredClone(current));
      return answer;
    },
  };
}

function samePlantRecord(a: PlantRecord, b: PlantRecord): boolean {
  return a.id === b.id && a.name === b.name && a.tag === b.tag;
}

function countOutcomes(results: readonly CreateResult[]): Partial<Record<CreateResult['outcome'], number>> {
  const counts: Partial<Record<CreateResult['outcome'], number>> = {};
  for (const { outcome } of results) counts[outcome] = (counts[outcome] ?? 0) + 1;
  return counts;
}

/** The instant `ms` after NOW. */
function later(ms: number): Date {
  return new Date(NOW.getTime() + ms);
}

/** The instant `ms` after NOW, as the dispatcher writes it. */
function iso(ms: number): string {
  return later(ms).toISOString();
}

/** A subscription named by `label`, with its own url and secret. */
function newSubscription(label: string, events: readonly WebhookEvent[]): NewSubscription {
  return { url: `https://hooks.example.com/${label}`, events, secret: `whsec_${Buffer.from(`the secret of ${label}`).toString('base64')}` };
}

/** Leases everything due at `now` (NOW by default). */
function claimAll(store: PlantStore, now: Date = NOW): Promise<ClaimedDelivery[]> {
  return store.webhooks.claimDueDeliveries(now, LEASE_MS, 1000);
}

/** The deliveries of a subscription that must exist, newest first. */
async function deliveriesOf(store: PlantStore, subscriptionId: bigint, limit = 1000): Promise<Delivery[]> {
  const deliveries = await store.webhooks.listDeliveries(subscriptionId, limit);
  if (!deliveries) throw new Error(`subscription ${subscriptionId} does not exist`);
  return deliveries;
}

/** What never changes about a delivery: its message id, event and creation. */
function identity({ messageId, event, createdAt }: Delivery): Pick<Delivery, 'messageId' | 'event' | 'createdAt'> {
  return { messageId, event, createdAt };
}

function compareBigints(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
