// The one PlantStore contract every driver must pass. A driver's test calls
// storeContract(t, 'sqlite', open) where open(t) returns a fresh, empty store on its own
// database and registers whatever cleanup it needs on t (close() is idempotent).
import type { Test } from 'tap';
import type { ConditionalWrite, CreateResult, PlantContent, PlantRecord, PlantStore, Precondition } from '../src/store/types.ts';
import { generateToken, hashToken, tokenHint } from '../src/tokens/format.ts';

export type OpenStore = (t: Test) => Promise<PlantStore>;

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const TWO_53 = 2n ** 53n;

export async function storeContract(t: Test, name: string, open: OpenStore): Promise<void> {
  await t.test(`${name}: PlantStore contract`, async (t) => {
    t.test('a new id is created and answered with the plant', async (t) => {
      const store = await open(t);
      const withTag = await store.createPlant({ id: 1n, name: 'Monstera', tag: 'aroid' });
      t.equal(withTag.outcome, 'created');
      expectPlant(t, withTag.stored, { id: 1n, name: 'Monstera', tag: 'aroid' });
      const withoutTag = await store.createPlant({ id: 2n, name: 'Fern' });
      t.equal(withoutTag.outcome, 'created', 'another id is another plant');
      expectPlant(t, withoutTag.stored, { id: 2n, name: 'Fern' });
    });

    t.test('an identical replay is unchanged; tag undefined and an absent tag are the same plant', async (t) => {
      const store = await open(t);
      t.equal((await store.createPlant({ id: 10n, name: 'Monstera', tag: 'aroid' })).outcome, 'created');
      const replay = await store.createPlant({ id: 10n, name: 'Monstera', tag: 'aroid' });
      t.equal(replay.outcome, 'unchanged', 'identical replay with a tag');
      expectPlant(t, replay.stored, { id: 10n, name: 'Monstera', tag: 'aroid' });

      t.equal((await store.createPlant({ id: 11n, name: 'Fern' })).outcome, 'created');
      const explicitUndefined = await store.createPlant({ id: 11n, name: 'Fern', tag: undefined });
      t.equal(explicitUndefined.outcome, 'unchanged', 'absent tag, then tag: undefined');
      expectPlant(t, explicitUndefined.stored, { id: 11n, name: 'Fern' });

      t.equal((await store.createPlant({ id: 12n, name: 'Ivy', tag: undefined })).outcome, 'created');
      const absent = await store.createPlant({ id: 12n, name: 'Ivy' });
      t.equal(absent.outcome, 'unchanged', 'tag: undefined, then absent tag');
      expectPlant(t, absent.stored, { id: 12n, name: 'Ivy' });
    });

    t.test('a different plant at a used id is a conflict; the stored plant is answered and untouched', async (t) => {
      const store = await open(t);
      const original: PlantRecord = { id: 20n, name: 'Monstera', tag: 'aroid' };
      t.equal((await store.createPlant({ ...original })).outcome, 'created');
      const others: PlantRecord[] = [
        { id: 20n, name: 'Cactus', tag: 'aroid' },
        { id: 20n, name: 'monstera', tag: 'aroid' },
        { id: 20n, name: 'Monstera', tag: 'other' },
        { id: 20n, name: 'Monstera' },
        { id: 20n, name: 'Monstera', tag: '' },
      ];
      for (const other of others) {
        const result = await store.createPlant(other);
        t.equal(result.outcome, 'conflict', `${other.name} / ${String(other.tag)} conflicts`);
        expectPlant(t, result.stored, original);
      }
      const replay = await store.createPlant({ ...original });
      t.equal(replay.outcome, 'unchanged', 'the original still replays: nothing was overwritten');
      expectPlant(t, replay.stored, original);

      t.equal((await store.createPlant({ id: 21n, name: 'Fern' })).outcome, 'created');
      for (const tag of ['fern', '']) {
        const tagged = await store.createPlant({ id: 21n, name: 'Fern', tag });
        t.equal(tagged.outcome, 'conflict', `tag ${JSON.stringify(tag)} is not the absent tag`);
        expectPlant(t, tagged.stored, { id: 21n, name: 'Fern' });
      }

      t.equal((await store.createPlant({ id: 22n, name: 'Moss', tag: '' })).outcome, 'created');
      const emptyTag = await store.createPlant({ id: 22n, name: 'Moss', tag: '' });
      t.equal(emptyTag.outcome, 'unchanged', 'an empty tag is stored as an empty tag');
      expectPlant(t, emptyTag.stored, { id: 22n, name: 'Moss', tag: '' });
    });

    t.test('int64 extremes and ids above 2^53 are stored and answered exactly, as bigint', async (t) => {
      const store = await open(t);
      const ids = [
        INT64_MIN,
        INT64_MIN + 1n,
        -(TWO_53 + 1n),
        -1n,
        0n,
        TWO_53 - 1n,
        TWO_53,
        TWO_53 + 1n,
        TWO_53 + 2n,
        INT64_MAX - 1n,
        INT64_MAX,
      ];
      for (const id of ids) {
        t.equal((await store.createPlant({ id, name: `plant ${id}` })).outcome, 'created', `${id} is its own plant`);
      }
      for (const id of ids) {
        // A conflict answers the row as read back from the database, not the plant passed in.
        const conflict = await store.createPlant({ id, name: 'intruder' });
        t.equal(conflict.outcome, 'conflict', `${id} is taken`);
        t.equal(typeof conflict.stored.id, 'bigint', `${id} reads back as bigint`);
        t.equal(conflict.stored.id, id, `${id} reads back exactly`);
        t.equal(conflict.stored.name, `plant ${id}`, `${id} holds its own plant`);
        const replay = await store.createPlant({ id, name: `plant ${id}` });
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
      const results = await Promise.all(plants.map((plant) => store.createPlant(plant)));
      t.same(countOutcomes(results), { created: 200 }, 'every one created');
      t.ok(results.every((result, index) => samePlantRecord(result.stored, plants[index]!)), 'each answered with its own plant');
      const replays = await Promise.all(plants.map((plant) => store.createPlant({ ...plant })));
      t.same(countOutcomes(replays), { unchanged: 200 }, 'every one was stored');
    });

    t.test('creates issued together keep their own outcomes: created, unchanged and conflict side by side', async (t) => {
      const store = await open(t);
      t.equal((await store.createPlant({ id: 1000n, name: 'A' })).outcome, 'created');
      const results = await Promise.all([
        store.createPlant({ id: 1001n, name: 'new 1' }),
        store.createPlant({ id: 1000n, name: 'B' }),
        store.createPlant({ id: 1002n, name: 'new 2' }),
        store.createPlant({ id: 1000n, name: 'A' }),
        store.createPlant({ id: 1003n, name: 'new 3' }),
      ]);
      t.same(
        results.map((result) => result.outcome),
        ['created', 'conflict', 'created', 'unchanged', 'created'],
      );
      expectPlant(t, results[1]!.stored, { id: 1000n, name: 'A' });
      const replays = await Promise.all([1001n, 1002n, 1003n].map((id, index) => store.createPlant({ id, name: `new ${index + 1}` })));
      t.same(countOutcomes(replays), { unchanged: 3 }, 'the conflict did not undo its neighbours');
    });

    t.test('concurrent creates of one id with different names: exactly one created, the rest conflict', async (t) => {
      const store = await open(t);
      const contenders: PlantRecord[] = Array.from({ length: 60 }, (_, index) => ({ id: 77n, name: `contender ${index}` }));
      const results = await Promise.all(contenders.map((plant) => store.createPlant(plant)));
      t.same(countOutcomes(results), { created: 1, conflict: 59 });
      const winner = contenders[results.findIndex((result) => result.outcome === 'created')]!;
      t.ok(results.every((result) => samePlantRecord(result.stored, winner)), 'every conflict answers the winner');
      t.equal((await store.createPlant({ ...winner })).outcome, 'unchanged', 'the winner is what is stored');
    });

    t.test('concurrent identical creates: one created, the rest unchanged', async (t) => {
      const store = await open(t);
      const results = await Promise.all(Array.from({ length: 30 }, () => store.createPlant({ id: 5n, name: 'same', tag: 't' })));
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

      const all = await store.listPlants({ limit: 100 });
      t.ok(all.every((plant) => typeof plant.id === 'bigint'), 'every id is a bigint');
      t.strictSame(all.map((plant) => plant.id), sorted.map((plant) => plant.id), 'ascending ids, exactly');
      // strictSame tells an absent tag from tag: undefined: a tag is answered only when set.
      t.strictSame(all, sorted, 'every plant exactly, a tag only when it has one');
      t.notOk('tag' in all.find((plant) => plant.id === 0n)!, 'an untagged plant carries no tag field');
      t.equal(all.find((plant) => plant.id === -1n)!.tag, '', 'an empty tag is answered as an empty tag');

      for (const limit of [1, 3, sorted.length - 1, sorted.length, sorted.length + 5]) {
        t.strictSame(await store.listPlants({ limit }), sorted.slice(0, limit), `limit ${limit}`);
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
        t.strictSame(await store.listPlants({ after: plant.id, limit: 100 }), sorted.slice(index + 1), `after ${plant.id}, a stored id`);
      }
      t.strictSame(await store.listPlants({ after: INT64_MAX, limit: 100 }), [], 'after 2^63 - 1: nothing');
      t.strictSame(
        (await store.listPlants({ after: INT64_MIN, limit: 100 })).map((plant) => plant.id),
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
        const page = await store.listPlants({ after, limit: 100 });
        t.strictSame(page, sorted.filter((plant) => plant.id > after), `after ${after}, an id not stored`);
        t.equal(page[0]?.id, first, `after ${after} starts at ${first}`);
      }
      t.strictSame(await store.listPlants({ after: -1n, limit: 2 }), sorted.filter((plant) => plant.id > -1n).slice(0, 2), 'after and limit together');
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

      t.strictSame(await store.listPlants({ tag: 'aroid', limit: 100 }), aroid, 'exactly "aroid", in id order');
      t.strictSame(await store.listPlants({ tag: 'Aroid', limit: 100 }), tagged('Aroid'), 'tags are case-sensitive');
      t.strictSame(await store.listPlants({ tag: 'aroid ', limit: 100 }), tagged('aroid '), 'a trailing space is another tag');
      t.strictSame(await store.listPlants({ tag: 'fern', limit: 100 }), tagged('fern'));
      t.strictSame(await store.listPlants({ tag: '', limit: 100 }), tagged(''), 'the empty tag matches only the empty tag, not an absent one');
      t.strictSame(await store.listPlants({ tag: 'aroi', limit: 100 }), [], 'no prefix match');
      t.strictSame(await store.listPlants({ tag: 'cactus', limit: 100 }), [], 'an unused tag');

      t.strictSame(await store.listPlants({ tag: 'aroid', limit: 2 }), aroid.slice(0, 2), 'tag and limit');
      t.strictSame(await store.listPlants({ tag: 'aroid', after: INT64_MIN, limit: 100 }), aroid.slice(1), 'tag and after -2^63');
      t.strictSame(await store.listPlants({ tag: 'aroid', after: -1n, limit: 100 }), aroid.slice(2), 'tag and after a tagged id');
      t.strictSame(await store.listPlants({ tag: 'aroid', after: 5n, limit: 100 }), aroid.slice(3), 'tag and after an id with another tag');
      t.strictSame(await store.listPlants({ tag: 'aroid', after: -1n, limit: 2 }), aroid.slice(2, 4), 'tag, after and limit');
      t.strictSame(await store.listPlants({ tag: 'aroid', after: INT64_MAX, limit: 100 }), [], 'tag and after 2^63 - 1');
      t.strictSame(await store.listPlants({ tag: 'Aroid', after: 5n, limit: 100 }), [], 'after the only plant with the tag');
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
            const page = await store.listPlants({ after, tag, limit });
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
        const found = await store.getPlant(plant.id);
        t.strictSame(found, plant, `${plant.id} exactly`);
        t.equal(typeof found?.id, 'bigint', `${plant.id} as bigint`);
      }
      t.notOk('tag' in (await store.getPlant(-1n))!, 'an untagged plant carries no tag field');
      for (const id of [INT64_MIN + 1n, -2n, 1n, TWO_53 - 1n, TWO_53 + 2n, INT64_MAX - 1n]) {
        t.equal(await store.getPlant(id), undefined, `${id} is not stored`);
      }
    });

    t.test('replacePlant replaces name and tag and answers the new plant', async (t) => {
      const store = await open(t);
      const id = TWO_53 + 1n;
      const neighbour: PlantRecord = { id: TWO_53, name: 'Neighbour', tag: 'aroid' };
      await seed(t, store, [{ id, name: 'Monstera', tag: 'aroid' }, neighbour]);

      const replaced = await store.replacePlant(id, { name: 'Monstera deliciosa', tag: 'big' });
      expectWrite(t, replaced, { outcome: 'done', plant: { id, name: 'Monstera deliciosa', tag: 'big' } }, 'name and tag');
      t.strictSame(await store.getPlant(id), { id, name: 'Monstera deliciosa', tag: 'big' }, 'getPlant shows the new plant');
      t.strictSame(await store.getPlant(TWO_53), neighbour, 'the neighbour below is untouched');
      t.strictSame(await store.listPlants({ tag: 'aroid', limit: 100 }), [neighbour], 'the old tag no longer finds it');
      t.strictSame(await store.listPlants({ tag: 'big', limit: 100 }), [{ id, name: 'Monstera deliciosa', tag: 'big' }], 'the new tag does');

      const untagged = await store.replacePlant(id, { name: 'Plain' });
      expectWrite(t, untagged, { outcome: 'done', plant: { id, name: 'Plain' } }, 'without a tag');
      t.strictSame(await store.getPlant(id), { id, name: 'Plain' }, 'replacing without a tag removes the tag');
      t.strictSame(await store.listPlants({ tag: 'big', limit: 100 }), [], 'the removed tag finds nothing');
      t.equal((await store.createPlant({ id, name: 'Plain' })).outcome, 'unchanged', 'createPlant sees the untagged plant');

      expectWrite(t, await store.replacePlant(id, { name: 'Plain', tag: '' }), { outcome: 'done', plant: { id, name: 'Plain', tag: '' } }, 'an empty tag');
      t.strictSame(await store.getPlant(id), { id, name: 'Plain', tag: '' }, 'an empty tag is stored as an empty tag');

      expectWrite(t, await store.replacePlant(id, { name: 'Plain', tag: '' }), { outcome: 'done', plant: { id, name: 'Plain', tag: '' } }, 'the same content again');
      t.strictSame(await store.listPlants({ limit: 100 }), [neighbour, { id, name: 'Plain', tag: '' }], 'no plant created or lost');
    });

    t.test('replacePlant of an unknown id is missing and creates nothing', async (t) => {
      const store = await open(t);
      await seed(t, store, [{ id: 100n, name: 'Only' }]);
      for (const id of [99n, 101n, INT64_MIN, INT64_MAX, TWO_53 + 1n]) {
        const check = recording(true);
        expectWrite(t, await store.replacePlant(id, { name: 'Ghost', tag: 'ghost' }, check.precondition), { outcome: 'missing' }, `${id}`);
        t.equal(check.received.length, 0, `${id}: no stored plant to hand to the precondition`);
        expectWrite(t, await store.replacePlant(id, { name: 'Ghost' }), { outcome: 'missing' }, `${id} unconditionally`);
        t.equal(await store.getPlant(id), undefined, `${id} was not created`);
      }
      t.strictSame(await store.listPlants({ limit: 100 }), [{ id: 100n, name: 'Only' }], 'nothing created');
      t.strictSame(await store.listPlants({ tag: 'ghost', limit: 100 }), [], 'not even under its tag');
    });

    t.test('replacePlant checks its precondition against the plant as currently stored', async (t) => {
      const store = await open(t);
      const id = INT64_MAX;
      await seed(t, store, [{ id, name: 'Original', tag: 'first' }]);
      expectWrite(t, await store.replacePlant(id, { name: 'Current' }), { outcome: 'done', plant: { id, name: 'Current' } }, 'setup');
      const current: PlantRecord = { id, name: 'Current' };

      const refuse = recording(false);
      const refused = await store.replacePlant(id, { name: 'Refused', tag: 'no' }, refuse.precondition);
      expectWrite(t, refused, { outcome: 'precondition-failed', current }, 'a false precondition');
      t.ok(refuse.received.length > 0, 'the precondition was asked');
      for (const received of refuse.received) t.strictSame(received, current, 'it received the plant as stored now, not as first created');
      t.strictSame(await store.getPlant(id), current, 'the stored plant is unchanged');
      t.strictSame(await store.listPlants({ tag: 'no', limit: 100 }), [], 'the refused tag was not written');

      const allow = recording(true);
      const allowed = await store.replacePlant(id, { name: 'Allowed', tag: 'yes' }, allow.precondition);
      expectWrite(t, allowed, { outcome: 'done', plant: { id, name: 'Allowed', tag: 'yes' } }, 'a true precondition');
      t.ok(allow.received.length > 0, 'the precondition was asked');
      for (const received of allow.received) t.strictSame(received, current, 'it received the plant before this write');
      t.strictSame(await store.getPlant(id), { id, name: 'Allowed', tag: 'yes' });

      const again = recording(false);
      expectWrite(
        t,
        await store.replacePlant(id, { name: 'Late' }, again.precondition),
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
        expectWrite(t, await store.deletePlant(plant.id), { outcome: 'done', plant }, `delete ${plant.id}`);
        t.equal(await store.getPlant(plant.id), undefined, `${plant.id} is gone`);
        t.strictSame(await store.listPlants({ limit: 100 }), byId(plants.slice(index + 1)), 'the others remain');
        expectWrite(t, await store.deletePlant(plant.id), { outcome: 'missing' }, `delete ${plant.id} again`);
        expectWrite(t, await store.replacePlant(plant.id, { name: 'back' }), { outcome: 'missing' }, `replace ${plant.id} once deleted`);
      }
      t.strictSame(await store.listPlants({ tag: 'aroid', limit: 100 }), [], 'the tag finds nothing');
      expectWrite(t, await store.deletePlant(42n), { outcome: 'missing' }, 'an id never stored');
    });

    t.test('deletePlant with a precondition', async (t) => {
      const store = await open(t);
      const id = -(TWO_53 + 1n);
      const plant: PlantRecord = { id, name: 'Fern', tag: 'fern' };
      await seed(t, store, [plant]);

      const refuse = recording(false);
      expectWrite(t, await store.deletePlant(id, refuse.precondition), { outcome: 'precondition-failed', current: plant }, 'a false precondition');
      t.ok(refuse.received.length > 0, 'the precondition was asked');
      for (const received of refuse.received) t.strictSame(received, plant, 'it received the stored plant');
      t.strictSame(await store.getPlant(id), plant, 'the plant is still there');

      const missing = recording(true);
      expectWrite(t, await store.deletePlant(id + 1n, missing.precondition), { outcome: 'missing' }, 'an unknown id');
      t.equal(missing.received.length, 0, 'no stored plant to hand to the precondition');

      const allow = recording(true);
      expectWrite(t, await store.deletePlant(id, allow.precondition), { outcome: 'done', plant }, 'a true precondition');
      for (const received of allow.received) t.strictSame(received, plant);
      t.equal(await store.getPlant(id), undefined, 'deleted');
    });

    t.test('a deleted id is free again: createPlant with other content is created', async (t) => {
      const store = await open(t);
      const id = TWO_53 + 1n;
      await seed(t, store, [{ id, name: 'Monstera', tag: 'aroid' }]);
      expectWrite(t, await store.deletePlant(id), { outcome: 'done', plant: { id, name: 'Monstera', tag: 'aroid' } }, 'delete');
      const recreated = await store.createPlant({ id, name: 'Cactus' });
      t.equal(recreated.outcome, 'created', 'not a conflict with the deleted plant');
      t.strictSame(recreated.stored, { id, name: 'Cactus' });
      t.strictSame(await store.getPlant(id), { id, name: 'Cactus' }, 'the new plant, without the old tag');
      t.strictSame(await store.listPlants({ tag: 'aroid', limit: 100 }), [], 'the old tag is gone');
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
      const replaces = odd.map((id) => store.replacePlant(id, replacement(id)));
      const deletes = even.map((id) => store.deletePlant(id));
      const others = [
        store.replacePlant(999n, { name: 'ghost' }),
        store.deletePlant(998n),
        store.replacePlant(21n, { name: 'refused' }, refuse21.precondition),
        store.deletePlant(22n, refuse22.precondition),
        store.replacePlant(23n, { name: 'renamed 23' }, allow23.precondition),
        store.deletePlant(24n, allow24.precondition),
      ];
      const created = [store.createPlant({ id: 25n, name: 'new 25' }), store.createPlant({ id: 26n, name: 'new 26', tag: 'odd' })];
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
      t.strictSame(await store.listPlants({ limit: 100 }), expected, 'listPlants reflects exactly those outcomes');
      t.strictSame(await store.listPlants({ tag: 'odd', limit: 100 }), expected.filter((plant) => plant.tag === 'odd'), 'and so do tagged pages');
      t.strictSame(
        await store.listPlants({ tag: 'three', limit: 100 }),
        [original(21n)],
        'every other plant tagged "three" was replaced without it or deleted',
      );
      t.equal(await store.getPlant(999n), undefined, 'the missing replace created nothing');
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
      const explode: Precondition = (current) => {
        throwing.precondition(current);
        throw boom;
      };
      const settled = await Promise.allSettled([
        store.replacePlant(1n, { name: 'should not be written' }, explode),
        store.createPlant({ id: 2n, name: 'two' }),
        store.replacePlant(3n, { name: 'three renamed', tag: 'new' }),
        store.deletePlant(4n),
        store.deletePlant(5n, explode),
        store.createPlant({ id: 6n, name: 'six' }),
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
        await store.listPlants({ limit: 100 }),
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

    t.test('close settles replaces and deletes already issued; afterwards they reject', async (t) => {
      const store = await open(t);
      await seed(t, store, [
        { id: 1n, name: 'one' },
        { id: 2n, name: 'two' },
      ]);
      const replace = store.replacePlant(1n, { name: 'one renamed' });
      const remove = store.deletePlant(2n);
      await store.close();
      expectWrite(t, await replace, { outcome: 'done', plant: { id: 1n, name: 'one renamed' } }, 'a replace issued before close');
      expectWrite(t, await remove, { outcome: 'done', plant: { id: 2n, name: 'two' } }, 'a delete issued before close');
      await t.rejects(store.replacePlant(1n, { name: 'too late' }), 'replacePlant rejects once closed');
      await t.rejects(store.deletePlant(1n), 'deletePlant rejects once closed');
    });

    t.test('createFirstToken stores a token only into an empty token table', async (t) => {
      const store = await open(t);
      const first = generateToken();
      const second = generateToken();
      t.equal(await store.createFirstToken({ name: 'first-start', hash: hashToken(first), hint: tokenHint(first) }), true);
      t.equal(
        await store.createFirstToken({ name: 'another', hash: hashToken(second), hint: tokenHint(second) }),
        false,
        'a second token with another name and hash is refused',
      );
      t.equal(
        await store.createFirstToken({ name: 'first-start', hash: hashToken(first), hint: tokenHint(first) }),
        false,
        'the same token again is refused',
      );
      t.equal(await store.findTokenByHash(hashToken(second)), undefined, 'the refused token was not stored');
    });

    t.test('concurrent createFirstToken calls store exactly one token', async (t) => {
      const store = await open(t);
      const tokens = Array.from({ length: 10 }, () => generateToken());
      const answers = await Promise.all(
        tokens.map((token, index) => store.createFirstToken({ name: `racer ${index}`, hash: hashToken(token), hint: tokenHint(token) })),
      );
      t.equal(answers.filter(Boolean).length, 1, 'one true');
      const found = await Promise.all(tokens.map((token) => store.findTokenByHash(hashToken(token))));
      t.equal(found.filter(Boolean).length, 1, 'one token findable');
      t.equal(found.findIndex(Boolean), answers.indexOf(true), 'the stored one is the one answered true');
    });

    t.test('findTokenByHash finds a token by its hash and nothing else', async (t) => {
      const store = await open(t);
      const token = generateToken();
      const hash = hashToken(token);
      const hint = tokenHint(token);
      t.equal(await store.findTokenByHash(hash), undefined, 'nothing before it is stored');
      t.ok(await store.createFirstToken({ name: 'first-start', hash, hint }));
      const found = await store.findTokenByHash(hash);
      if (!found) throw new Error('the stored token was not found by its hash');
      t.equal(found.name, 'first-start');
      t.equal(found.hint, hint);
      t.equal(typeof found.id, 'number');
      t.equal(typeof found.createdAt, 'string');
      t.notOk(Number.isNaN(Date.parse(found.createdAt)), `createdAt ${found.createdAt} is a timestamp`);
      t.same(Object.keys(found).sort(), ['createdAt', 'hint', 'id', 'name', 'scopes'], 'the record carries no hash and no token');
      t.same(found.scopes, ['*'], 'the first token has every scope');
      t.notOk(JSON.stringify(found).includes(token.slice(-12)), 'the record does not reveal the token');

      t.equal(await store.findTokenByHash(hashToken(generateToken())), undefined, 'an unknown hash');
      t.equal(await store.findTokenByHash(token), undefined, 'the token itself is not a key: only its hash is');
      t.equal(await store.findTokenByHash(''), undefined, 'the empty string');
    });

    t.test('ping resolves on an open store', async (t) => {
      const store = await open(t);
      await t.resolves(store.ping());
    });

    t.test('close settles creates already issued, then ping and createPlant reject; close is idempotent', async (t) => {
      const store = await open(t);
      const issued = store.createPlant({ id: 1n, name: 'issued before close' });
      await store.close();
      t.equal((await issued).outcome, 'created', 'a create issued before close is not left hanging');
      await t.rejects(store.ping(), 'ping rejects once closed');
      await t.rejects(store.createPlant({ id: 2n, name: 'too late' }), 'createPlant rejects once closed');
      await t.resolves(store.close(), 'a second close resolves');
      await t.resolves(store.close(), 'and a third');
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
  for (const plant of plants) t.equal((await store.createPlant(plant)).outcome, 'created', `seed ${plant.id}`);
  return plants;
}

function byId(plants: readonly PlantRecord[]): PlantRecord[] {
  return [...plants].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** The outcome, and the plant it carries exactly (strictSame: bigint ids, a tag field only when expected). */
function expectWrite(t: Test, actual: ConditionalWrite, expected: ConditionalWrite, message: string): void {
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
