// A field added to Plant in openapi.yaml reaches the compiler: after `npm run generate`, the type check
// fails at each file that must store the field, naming it, instead of the field being dropped in silence;
// and the client package's build, which the tests import, has the field too.
// Shown in a scratch copy of the repository (its node_modules linked, not copied).
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { parse, parseDocument } from 'yaml';
import { copyRepository, generateTypes, typeCheck } from '../harness/scratch.ts';
import { docBlock } from '../harness/readme-blocks.ts';
import type { PlantRecord } from '../../src/store/types.ts';

// Two generations (each building the client package) and two type checks of the whole project, 10 to
// 40 s each on two busy cores.
t.setTimeout(240_000);
const COPIED = ['openapi.yaml', 'package.json', 'tsconfig.json', 'src', 'scripts', 'test', 'contract', 'packages/client'];
/** The files that list a plant's fields one by one: the store's columns and their migrations. */
const MUST_CHANGE = ['src/store/plant-fields.ts', 'src/store/migrations.ts'];

async function scratchCopy(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'spec-edit-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return copyRepository(dir, COPIED);
}

/** `npm run generate` then `npm run typecheck`, in the copy, with the repository's pinned Node. */
async function generateAndTypecheck(dir: string): Promise<{ ok: boolean; output: string }> {
  await generateTypes(dir);
  const output = await typeCheck(dir);
  return { ok: output === '', output };
}

/** Step 1 of docs/development.md "Adding a field, end to end": `price` and `stock` added to Plant, which NewPlant and StoredPlant include. */
async function addPriceAndStock(dir: string): Promise<void> {
  const file = join(dir, 'openapi.yaml');
  const spec = parseDocument(await readFile(file, 'utf8'));
  const added = parse(docBlock('docs/development.md', '1. **Spec.**', 'yaml')) as Record<string, unknown>;
  for (const [field, schema] of Object.entries(added)) spec.setIn(['components', 'schemas', 'Plant', 'properties', field], schema);
  await writeFile(file, spec.toString());
}

t.test('the unchanged repository generates and type-checks in a scratch copy', async (t) => {
  const result = await generateAndTypecheck(await scratchCopy(t));
  t.ok(result.ok, result.output);
});

t.test('adding price and stock to Plant fails the type check at every file that must store them', async (t) => {
  const dir = await scratchCopy(t);
  await addPriceAndStock(dir);
  const result = await generateAndTypecheck(dir);
  t.notOk(result.ok, 'the type check fails');
  const generated = await readFile(join(dir, 'src/generated/openapi.ts'), 'utf8');
  t.match(generated, /price\?: number/, 'the generated types carry the new fields');
  t.match(generated, /stock\?: number/);
  const client = await readFile(join(dir, 'packages/client/dist/openapi.d.ts'), 'utf8');
  t.match(client, /price\?: number/, "npm run generate rebuilt the client package's dist/, which the tests import: no stale client");
  // One diagnostic per block: `file(line,col): error …` and its indented explanation lines.
  const diagnostics = result.output.split(/\n(?=\S)/).filter((block) => /^\S+\(\d+,\d+\): error/.test(block));
  for (const file of MUST_CHANGE) {
    const errors = diagnostics.filter((block) => block.startsWith(`${file}(`));
    // What docs/development.md quotes: `… is missing the following properties from type …: price, stock`.
    t.ok(errors.some((block) => /is missing the following properties from type '[^']+': price, stock/.test(block)), `${file} is named, with the fields:\n${errors.join('\n') || result.output}`);
  }
  const elsewhere = diagnostics.filter((block) => !MUST_CHANGE.some((file) => block.startsWith(`${file}(`)));
  t.same(elsewhere, [], 'the representation, handlers and store helpers need no change: the field flows through them');
});

// (Answers are the records themselves, written by the response schemas generated from openapi.yaml.)
// samePlant decides whether a replace changes the plant, and so whether it gets a new version, the source of its ETag.
t.test('a field the drivers store flows through events and comparisons (so through the ETag), an int64 one too', async (t) => {
  const { eventPayload, plantWith, samePlant } = await import('../../src/store/types.ts');
  // What a driver returns once it stores `price`: the type does not know the field yet, the code must not care.
  const priced = (price: number, order: 'name first' | 'price first' = 'name first') =>
    (order === 'name first' ? { id: 1n, name: 'Monstera', tag: 'aroid', price } : { price, id: 1n, tag: 'aroid', name: 'Monstera' }) as PlantRecord;
  t.same(plantWith(1n, { name: 'Monstera', tag: undefined, price: 1200 } as never), { id: 1n, name: 'Monstera', price: 1200 });
  t.equal(eventPayload(priced(1200, 'price first')), '{"id":1,"name":"Monstera","tag":"aroid","price":1200}');
  t.notOk(samePlant(priced(1200), priced(1300)), 'another price is another plant, so a replace gives it a new ETag');
  t.ok(samePlant(priced(1200), priced(1200, 'price first')), 'the order fields arrived in does not matter');
  // An int64 field (a BigInt from the parser and the column) is written and compared with every digit.
  const seeded = (seeds: bigint) => ({ id: 1n, name: 'Poppy', seeds }) as PlantRecord;
  t.equal(eventPayload(seeded(2n ** 63n - 1n)), '{"id":1,"name":"Poppy","seeds":9223372036854775807}');
  t.notOk(samePlant(seeded(2n ** 63n - 1n), seeded(2n ** 63n - 2n)), 'another int64 value is another plant');
});
