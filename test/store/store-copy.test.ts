// `npm run store -- copy` between SQLite and PostgreSQL, both ways and PostgreSQL to PostgreSQL: every record read
// through the store's own repositories is the same after the copy (int64 ids, text, versions and so ETags, tokens,
// subscriptions, the outbox), new writes get new versions and ids, the source is read in one snapshot, the target
// fills in one transaction that commits only when the verification matches (test/system/store-cli.test.ts: refusals).
import t, { type Test } from 'tap';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { loadConfig, storeOptions } from '../../src/config.ts';
import { INT64_MAX, INT64_MIN } from '../../src/int64.ts';
import { runStoreCommand } from '../../src/store/cli.ts';
import { copyStore } from '../../src/store/copy.ts';
import { openStore } from '../../src/store/factory.ts';
import type { PlantStore } from '../../src/store/types.ts';
import { databaseUrl, freshDatabase, postgresTestOptions, withClient } from '../harness/postgres.ts';

const options = await postgresTestOptions();
const HOUR_MS = 3_600_000;

async function open(t: Test, url: string): Promise<PlantStore> {
  const store = await openStore(url, { ...storeOptions(loadConfig({})), poolSize: 2 });
  t.teardown(() => store.close().catch(() => undefined));
  return store;
}

/** The first value of the first row `text` answers in the PostgreSQL database at `url`. */
async function scalar(url: string, text: string): Promise<unknown> {
  return withClient(url, async (client) => (await client.query({ text, rowMode: 'array' })).rows[0]![0]);
}

/** 12,000 plants, created together (one group commit). */
async function manyPlants(store: PlantStore): Promise<void> {
  await Promise.all(Array.from({ length: 12_000 }, (_, at) => store.plants.createPlant({ id: BigInt(at + 1), name: `p${at + 1}` })));
}

async function newDatabase(t: Test): Promise<string> {
  return databaseUrl(await freshDatabase(t, 'store_copy'));
}

/** A shop with something of every kind: extreme ids, awkward text, a version gap, tokens in each state, subscriptions rotated, disabled and deleted, deliveries pending, delivered and failed. */
async function seedShop(store: PlantStore): Promise<void> {
  const webhooks = store.webhooks;
  const subscriptions = [];
  for (const [at, secret] of ['whsec_a', 'whsec_b', 'whsec_c', 'whsec_d'].entries()) {
    subscriptions.push(await webhooks.createSubscription({ url: `https://hooks.example/${at}`, events: ['plant.created', 'plant.replaced'], secret }, 10));
  }
  await webhooks.rotateSubscriptionSecret(subscriptions[1]!.id, 'whsec_b2', new Date(Date.now() + HOUR_MS));
  // The last subscription and the last plant go: the counters stay past them.
  await webhooks.deleteSubscription(subscriptions[3]!.id);
  const plants = [
    { id: INT64_MIN, name: '0012', tag: '' },
    { id: -1n, name: ' spaced  ' },
    { id: 2n ** 53n + 1n, name: 'Monstera 🌿 deliciosa', tag: 'tropical' },
    { id: INT64_MAX, name: 'line\nbreak "quoted" \\ back', tag: 'NULL' },
    { id: 42n, name: 'gone' },
  ];
  for (const plant of plants) await store.plants.createPlant(plant);
  await store.plants.replacePlant(-1n, { name: 'replaced', tag: '1e3' });
  await store.plants.replacePlant(42n, { name: 'going' });
  await store.plants.deletePlant(42n);
  const tokens = [];
  for (const name of ['reader', 'writer', 'old']) {
    tokens.push(await store.tokens.createToken({ name, hash: `${name}`.padEnd(64, '0'), hint: `pst_…${name}`, scopes: ['plants:read', 'plants:write'], expiresAt: '2099-01-01T00:00:00.000Z' }));
  }
  await store.tokens.revokeToken('old');
  await store.tokens.recordTokenUse(new Map([[tokens[0]!.id, '2026-01-02T03:04:05.678Z']]));
  // Deliveries: one delivered, one to retry, one failing its subscription (and its other pending ones), the rest pending.
  const claimed = await webhooks.claimDueDeliveries(new Date(Date.now() + 1_000), 60_000, 3, 1);
  const at = new Date().toISOString();
  await webhooks.recordAttempt({ id: claimed[0]!.id, at, result: 'delivered', responseStatus: 204 });
  await webhooks.recordAttempt({ id: claimed[1]!.id, at, result: 'retry', nextAttemptAt: new Date(Date.now() + 1_000).toISOString(), responseStatus: 503, error: 'busy' });
  await webhooks.recordAttempt({ id: claimed[2]!.id, at, result: 'failed', responseStatus: 410, error: 'gone', disableSubscription: 'the receiver answered 410' });
}

/** Everything the service reads of a store, through its repositories. */
async function contentOf(store: PlantStore) {
  const plants = await store.plants.listPlants({ limit: 100 });
  const versions = await Promise.all(plants.map(async (plant) => (await store.plants.getPlant(plant.id))!.version));
  const subscriptions = await store.webhooks.listSubscriptions({ limit: 100 });
  const deliveries = await Promise.all(subscriptions.map((subscription) => store.webhooks.listDeliveries(subscription.id, 100)));
  return { plants, versions, tokens: await store.tokens.listTokens(), subscriptions, deliveries, pending: await store.webhooks.countPendingDeliveries() };
}

async function copied(t: Test, from: string, to: string): Promise<void> {
  const checks = await copyStore(from, to, () => undefined);
  t.ok(checks.length >= 5 && checks.every((check) => check.rows[0] === check.rows[1] && check.sha256[0] === check.sha256[1]), `${from.split(':')[0]} to ${to.split(':')[0]}: every table matches`);
}

/** New writes on a copy take versions and ids past every one the source handed out. */
async function writesContinue(t: Test, store: PlantStore, before: Awaited<ReturnType<typeof contentOf>>, what: string): Promise<void> {
  const highest = before.versions.reduce((a, b) => (a > b ? a : b));
  // The deleted plant had the highest version: the counter is one past the highest version copied.
  const created = await store.plants.createPlant({ id: 7n, name: 'new' });
  t.equal(created.outcome, 'created');
  const version = (await store.plants.getPlant(7n))!.version;
  t.ok(version > highest + 1n, `${what}: a new plant's version (${version}) is past every version handed out before the copy (${highest + 1n})`);
  const replaced = await store.plants.replacePlant(2n ** 53n + 1n, { name: 'changed' });
  t.ok(replaced.outcome === 'done' && replaced.version > version, `${what}: a replace takes a newer version still`);
  const subscription = await store.webhooks.createSubscription({ url: 'https://hooks.example/new', events: ['plant.deleted'], secret: 'whsec_new' }, 10);
  t.ok(subscription.id > before.subscriptions.at(-1)!.id + 1n, `${what}: a new subscription's id (${subscription.id}) is past the deleted one's`);
  const token = await store.tokens.createToken({ name: 'after', hash: 'f'.repeat(64), hint: 'pst_…after' });
  t.ok(token.id > before.tokens.at(-1)!.id, `${what}: a new token's id is past the copied ones`);
}

t.test('copy', options, async (t) => {
  t.test('SQLite to PostgreSQL to PostgreSQL to SQLite: the store reads the same, and writes continue', async (t) => {
    const dir = t.testdir();
    const urls = [`sqlite:${join(dir, 'shop.db')}`, await newDatabase(t), await newDatabase(t), `sqlite:${join(dir, 'moved', 'back.db')}`];
    const source = await open(t, urls[0]!);
    await seedShop(source);
    const before = await contentOf(source);
    await source.close();
    for (let at = 1; at < urls.length; at++) await copied(t, urls[at - 1]!, urls[at]!);
    for (const url of urls) t.same(await contentOf(await open(t, url)), before, `${url.split(':')[0]} ${url.slice(-8)}: the same plants, versions, tokens, subscriptions and deliveries`);
    t.equal(statSync(join(dir, 'moved', 'back.db')).mode & 0o777, 0o600, 'a new SQLite target is made 0600');
    t.equal(statSync(join(dir, 'moved')).mode & 0o777, 0o700, 'in a directory made 0700');
    await writesContinue(t, await open(t, urls[1]!), before, 'PostgreSQL, copied from SQLite');
    await writesContinue(t, await open(t, urls[3]!), before, 'SQLite, copied from PostgreSQL');
    const version = await scalar(urls[2]!, 'SELECT max(version) FROM schema_migrations');
    t.equal(version, 8, 'the schema version came along');
  });

  t.test('a source read in one snapshot while a writer moves its plants', async (t) => {
    // The writer deletes the lowest plant and adds one past the highest, in one transaction: every committed state holds 12,000.
    const dir = t.testdir();
    const file = join(dir, 'busy.db');
    const seeded = await open(t, `sqlite:${file}`);
    await manyPlants(seeded);
    await seeded.close();
    const writer = new DatabaseSync(file);
    t.teardown(() => writer.close());
    let next = 12_001;
    // After each page the copy writes, moves are committed on the source while the copy's snapshot is open.
    const move = (): void => {
      writer.exec(`BEGIN IMMEDIATE; DELETE FROM plants WHERE id = ${next - 12_000}; INSERT INTO plants (id, name, version) VALUES (${next}, 'p${next}', ${next}); COMMIT`);
      next++;
    };
    const target = await newDatabase(t);
    await copyStore(`sqlite:${file}`, target, ({ phase }) => {
      if (phase === 'copy') for (let moves = 0; moves < 50; moves++) move();
    });
    t.ok(next > 12_100, `the writer moved plants during the copy (${next - 12_001})`);
    const count = await scalar(target, 'SELECT count(*)::int FROM plants');
    t.equal(count, 12_000, 'SQLite source: the copy holds one committed state');
    // And from PostgreSQL, with the same writer on the copy.
    const back = `sqlite:${join(dir, 'back.db')}`;
    const busy = { moving: true };
    const pgMoves = withClient(target, async (client) => {
      for (let id = 12_001 + 12_000; busy.moving; id++) {
        await client.query(`BEGIN; DELETE FROM plants WHERE id = (SELECT min(id) FROM plants); INSERT INTO plants (id, name, version) VALUES (${id}, 'q', ${id}); COMMIT`);
      }
    });
    await copyStore(target, back, () => undefined);
    busy.moving = false;
    await pgMoves;
    t.equal(Number(new DatabaseSync(back.slice(7), { readOnly: true }).prepare('SELECT count(*) AS n FROM plants').get()!.n), 12_000, 'PostgreSQL source: one committed state');
  });

  t.test('the target commits only when every table matches: a difference exits 1 and leaves it empty', async (t) => {
    const dir = t.testdir();
    const from = `sqlite:${join(dir, 'shop.db')}`;
    await seedShop(await open(t, from));
    const target = await newDatabase(t);
    await (await open(t, target)).close();
    // An empty store at the source's version is accepted; this one changes what it is given.
    await withClient(target, (client) => client.query(`CREATE FUNCTION shout() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.name := upper(NEW.name); RETURN NEW; END $$;
      CREATE TRIGGER shout BEFORE INSERT ON plants FOR EACH ROW EXECUTE FUNCTION shout()`));
    const lines: string[] = [];
    const errors: string[] = [];
    const code = await runStoreCommand(['copy', from, target], { databaseUrl: from, out: (line) => lines.push(line), err: (line) => errors.push(line) });
    t.equal(code, 1, 'exits 1');
    t.match(lines.find((line) => line.startsWith('plants ')), /DIFFERS$/, 'the table shows the plants differ');
    t.ok(lines.some((line) => /^api_tokens .* ok$/.test(line)), 'and the tokens match');
    t.same(errors, ['The target differs from the source (tables: plants); nothing was committed.'], 'one line says so');
    const held = await scalar(target, 'SELECT array[(SELECT count(*)::int FROM plants), (SELECT count(*)::int FROM schema_migrations)]');
    t.same(held, [0, 8], 'the target holds what it held before');
  });

  t.test('a copy failing half-way leaves no half-filled target', async (t) => {
    const dir = t.testdir();
    const from = `sqlite:${join(dir, 'shop.db')}`;
    const store = await open(t, from);
    await manyPlants(store);
    const target = await newDatabase(t);
    await (await open(t, target)).close();
    await withClient(target, (client) => client.query(`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk on fire'; END $$;
      CREATE TRIGGER refuse BEFORE INSERT ON plants FOR EACH ROW WHEN (NEW.id = 11000) EXECUTE FUNCTION refuse()`));
    const errors: string[] = [];
    const code = await runStoreCommand(['copy', from, target], { databaseUrl: from, out: () => undefined, err: (line) => errors.push(line) });
    t.same([code, errors], [1, ['copy failed: disk on fire']], 'exits 1, saying why in one line');
    const plants = await scalar(target, 'SELECT count(*)::int FROM plants');
    t.equal(plants, 0, 'after 10,000 plants were written, none is left');
  });

  t.test('progress: a bar with rows, rate and time left on a terminal; plain lines in a log', async (t) => {
    const dir = t.testdir();
    const from = `sqlite:${join(dir, 'shop.db')}`;
    const store = await open(t, from);
    await manyPlants(store);
    const statuses: string[] = [];
    const lines: string[] = [];
    t.equal(await runStoreCommand(['copy', from, `sqlite:${join(dir, 'a.db')}`], { databaseUrl: from, out: (line) => lines.push(line), err: () => undefined, status: (text) => statuses.push(text) }), 0);
    t.ok(statuses.length >= 6, `the status line is rewritten at every batch (${statuses.length})`);
    t.match(statuses[0], /^\[#{12}-{18}\] copying {3}5000\/12008 rows, \d+ rows\/s, \d+ s left$/, `a bar, rows, rate and time left: ${statuses[0]}`);
    t.match(statuses.at(-2), /^\[#{30}\] verifying 12008\/12008 rows/, 'the verification too');
    t.equal(statuses.at(-1), '', 'and the line is cleared before the table');
    t.notOk(lines.some((line) => line.includes('rows/s')), 'no progress lines when there is a status line');
    const logged: string[] = [];
    t.equal(await runStoreCommand(['copy', from, `sqlite:${join(dir, 'b.db')}`], { databaseUrl: from, out: (line) => logged.push(line), err: () => undefined }), 0);
    t.match(logged.slice(0, 2), [/^copying {3}12008\/12008 rows, \d+ rows\/s, 0 s left$/, /^verifying 12008\/12008 rows/], 'in a log: a line at each phase\'s end (and every 5 s)');
  });
});
