import t from 'tap';
import type { PlantStore } from '../../src/store/types.ts';
import { build, createPlant } from '../harness/helper.ts';

/** Every stored id, ascending, as decimal text: what the store really holds, whatever the driver. */
async function storedIds(store: PlantStore): Promise<string[]> {
  return (await store.plants.listPlants({ limit: 10_000 })).map((plant) => String(plant.id));
}

t.test('a valid NewPlant answers 200 with the published Plant shape', async (t) => {
  const { app } = await build(t);
  const withTag = await createPlant(t, app, '{"id":1,"name":"Monstera","tag":"aroid"}');
  t.equal(withTag.statusCode, 200);
  t.equal(withTag.body, '{"name":"Monstera","tag":"aroid"}', 'name and tag, no id');
  const withoutTag = await createPlant(t, app, '{"id":2,"name":"Fern"}');
  t.equal(withoutTag.body, '{"name":"Fern"}', 'no tag when none was given');
});

t.test('every int64 is accepted and stored exactly, including neighbours above 2^53', async (t) => {
  const { app, store } = await build(t);
  const ids = [
    '-9223372036854775808',
    '-9223372036854775807',
    '-9007199254740993',
    '-1',
    '0',
    '9007199254740991',
    '9007199254740992',
    '9007199254740993',
    '9007199254740994',
    '9223372036854775806',
    '9223372036854775807',
  ];
  for (const id of ids) {
    const response = await createPlant(t, app, `{"id":${id},"name":"plant ${id}"}`);
    t.equal(response.statusCode, 200, `id ${id} accepted`);
  }
  t.same(await storedIds(store), ids, 'each id is its own row, stored digit for digit');
});

t.test('ids outside int64, fractions and exponent forms are 400 naming "id"', async (t) => {
  const { app, store } = await build(t);
  const cases: Record<string, RegExp> = {
    '9223372036854775808': /"id" must be <= 9223372036854775807/,
    '-9223372036854775809': /"id" must be >= -9223372036854775808/,
    '99999999999999999999999': /"id" must be <= /,
    '1.5': /"id" must be an integer written without fraction or exponent/,
    '1.0': /"id" must be an integer written without fraction or exponent/,
    '1e3': /"id" must be an integer written without fraction or exponent/,
    '1E+2': /"id" must be an integer written without fraction or exponent/,
  };
  for (const [id, message] of Object.entries(cases)) {
    const response = await createPlant(t, app, `{"id":${id},"name":"x"}`);
    t.equal(response.statusCode, 400, `id ${id} refused`);
    t.match(response.json(), { error: 400n, message }, `id ${id} message`);
  }
  t.same(await storedIds(store), [], 'nothing stored');
});

t.test('no type coercion: each field keeps its JSON type or the request is 400', async (t) => {
  const { app, store } = await build(t);
  const cases: [string, RegExp][] = [
    ['{"id":"12","name":"x"}', /field "id" must be an integer\./],
    ['{"id":true,"name":"x"}', /field "id" must be an integer\./],
    ['{"id":null,"name":"x"}', /field "id" must be an integer\./],
    ['{"id":[1],"name":"x"}', /field "id" must be an integer\./],
    ['{"id":1,"name":5}', /field "name" must be string/],
    ['{"id":1,"name":null}', /field "name" must be string/],
    ['{"id":1,"name":["x"]}', /field "name" must be string/],
    ['{"id":1,"name":"x","tag":5}', /field "tag" must be string/],
    ['{"id":1,"name":"x","tag":false}', /field "tag" must be string/],
    ['{"id":1,"name":"x","tag":null}', /field "tag" must be string/],
  ];
  for (const [body, message] of cases) {
    const response = await createPlant(t, app, body);
    t.equal(response.statusCode, 400, body);
    t.match(response.json(), { error: 400n, message }, `${body} names the field`);
  }
  t.same(await storedIds(store), [], 'nothing stored');
});

t.test('shape rules: required fields, unknown fields, empty and long names', async (t) => {
  const { app } = await build(t);
  const cases: [string, RegExp][] = [
    ['{"name":"x"}', /missing the required field "id"/],
    ['{"id":1}', /missing the required field "name"/],
    ['{"id":1,"name":"x","color":"green"}', /unknown field "color"/],
    ['{"id":1,"name":"x","ID":2}', /unknown field "ID"/],
    ['{"id":1,"name":""}', /field "name" must NOT have fewer than 1 characters/],
    [`{"id":1,"name":"${'x'.repeat(257)}"}`, /field "name" must NOT have more than 256 characters/],
    [`{"id":1,"name":"x","tag":"${'t'.repeat(257)}"}`, /field "tag" must NOT have more than 256 characters/],
    ['[]', /request body must be object/],
    ['"plant"', /request body must be object/],
    ['42', /request body must be object/],
  ];
  for (const [body, message] of cases) {
    const response = await createPlant(t, app, body);
    t.equal(response.statusCode, 400, body.slice(0, 40));
    t.match(response.json(), { error: 400n, message }, `${body.slice(0, 40)}: ${message}`);
  }
  const longest = await createPlant(t, app, `{"id":1,"name":"${'x'.repeat(256)}","tag":"${'t'.repeat(256)}"}`);
  t.equal(longest.statusCode, 200, '256 characters are allowed');
});

t.test('name and tag lengths count code points: 256 astral characters (512 UTF-16 units) pass, 257 do not', async (t) => {
  const { app } = await build(t);
  const cactus = '\u{1F335}';
  const longest = await createPlant(t, app, `{"id":1,"name":"${cactus.repeat(256)}","tag":"${cactus.repeat(256)}"}`);
  t.equal(longest.statusCode, 200, '256 code points are allowed, whatever their UTF-16 length');
  t.equal((await createPlant(t, app, `{"id":2,"name":"${cactus}"}`)).statusCode, 200, 'one astral character is not empty');
  for (const field of ['name', 'tag']) {
    const body = field === 'name' ? `{"id":3,"name":"${cactus.repeat(257)}"}` : `{"id":3,"name":"x","tag":"x${cactus.repeat(256)}"}`;
    const response = await createPlant(t, app, body);
    t.equal(response.statusCode, 400, `${field}: 257 code points`);
    t.match(response.json(), { message: new RegExp(`field "${field}" must NOT have more than 256 characters`) }, field);
  }
});

t.test('an identical create is idempotent; reusing an id for another plant is 409 and changes nothing', async (t) => {
  const { app, store } = await build(t);
  const original = '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}';
  t.equal((await createPlant(t, app, original)).statusCode, 200);
  const replay = await createPlant(t, app, original);
  t.equal(replay.statusCode, 200, 'identical replay is 200');
  t.equal(replay.body, '{"name":"Monstera","tag":"aroid"}');
  const reordered = await createPlant(t, app, '{"tag":"aroid","name":"Monstera","id":9007199254740993}');
  t.equal(reordered.statusCode, 200, 'key order does not matter');

  for (const body of [
    '{"id":9007199254740993,"name":"Cactus","tag":"aroid"}',
    '{"id":9007199254740993,"name":"Monstera"}',
    '{"id":9007199254740993,"name":"Monstera","tag":"other"}',
  ]) {
    const conflict = await createPlant(t, app, body);
    t.equal(conflict.statusCode, 409, body);
    t.match(conflict.json(), { error: 409n, message: /plant with id 9007199254740993 already exists/ });
  }
  t.equal((await createPlant(t, app, '{"id":9007199254740992,"name":"Cactus"}')).statusCode, 200, 'the neighbouring id is a different plant');
  t.equal((await createPlant(t, app, original)).statusCode, 200, 'the stored plant is untouched: the original still replays');
  t.same((await store.plants.getPlant(9007199254740993n))?.plant, { id: 9007199254740993n, name: 'Monstera', tag: 'aroid' });
});

t.test('many concurrent creates of one id with different content give exactly one winner', async (t) => {
  const { app, store } = await build(t);
  const bodies = Array.from({ length: 60 }, (_, index) => `{"id":77,"name":"contender ${index}"}`);
  const responses = await Promise.all(bodies.map((body) => createPlant(t, app, body)));
  const winners = responses.flatMap((response, index) => (response.statusCode === 200 ? [index] : []));
  t.equal(winners.length, 1, 'one 200');
  t.equal(responses.filter((response) => response.statusCode === 409).length, 59, 'every other one 409');
  t.same(await store.plants.listPlants({ limit: 10 }), [{ id: 77n, name: `contender ${winners[0]}` }], 'the winner is what is stored');
});

t.test('concurrent identical creates all answer 200 and store one plant', async (t) => {
  const { app, store } = await build(t);
  const responses = await Promise.all(Array.from({ length: 30 }, () => createPlant(t, app, '{"id":5,"name":"same"}')));
  t.same(new Set(responses.map((response) => response.statusCode)), new Set([200]));
  t.equal((await storedIds(store)).length, 1);
});

t.test('text that is not valid Unicode (a lone surrogate) is 400, never stored altered', async (t) => {
  const { app, store } = await build(t);
  for (const body of ['{"id":1,"name":"\\ud800"}', '{"id":1,"name":"x","tag":"a\\udfffb"}', '{"id":1,"name":"x","\\ud800":1}']) {
    const response = await createPlant(t, app, body);
    t.equal(response.statusCode, 400, body);
    t.match(response.json(), { error: 400n, message: /lone surrogate/ });
  }
  t.equal((await createPlant(t, app, '{"id":1,"name":"\\ud83c\\udf35 cactus"}')).statusCode, 200, 'a surrogate pair is fine');
  t.equal((await createPlant(t, app, '{"id":1,"name":"🌵 cactus"}')).statusCode, 200, 'and replays identically');
  t.same(await storedIds(store), ['1']);
});
