// The one PlantStore contract every driver must pass. A driver's test calls
// storeContract(t, 'sqlite', open) where open(t) returns a fresh, empty store on its own
// database and registers whatever cleanup it needs on t (close() is idempotent).
import type { Test } from 'tap';
import type { CreateResult, PlantRecord, PlantStore } from '../src/store/types.ts';
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
      t.same(Object.keys(found).sort(), ['createdAt', 'hint', 'id', 'name'], 'the record carries no hash and no token');
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

function samePlantRecord(a: PlantRecord, b: PlantRecord): boolean {
  return a.id === b.id && a.name === b.name && a.tag === b.tag;
}

function countOutcomes(results: readonly CreateResult[]): Partial<Record<CreateResult['outcome'], number>> {
  const counts: Partial<Record<CreateResult['outcome'], number>> = {};
  for (const { outcome } of results) counts[outcome] = (counts[outcome] ?? 0) + 1;
  return counts;
}
