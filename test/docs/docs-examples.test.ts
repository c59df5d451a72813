// Every example the service serves is the one openapi.yaml writes, digit for digit: an int64 example
// above 2^53 (9007199254740993) must not reach Swagger UI, or a reader, as 9007199254740992.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { SPEC_PATH } from '../../src/spec-path.ts';
import { build } from '../harness/helper.ts';

type Examples = Map<string, unknown>;

// Both sides read every integer as a bigint, so a rounded digit cannot compare equal.
const source = examplesIn(parseYaml(readFileSync(SPEC_PATH, 'utf8'), { intAsBigInt: true }));

function exactJson(text: string): unknown {
  return JSON.parse(text, (_key, value: unknown, context?: { source?: string }) =>
    typeof value === 'number' && context?.source !== undefined && /^-?\d+$/.test(context.source) ? BigInt(context.source) : value);
}

/** Each `example` and `examples` value, by its JSON pointer. */
function examplesIn(value: unknown, pointer = '', found: Examples = new Map()): Examples {
  if (typeof value !== 'object' || value === null) return found;
  for (const [key, item] of Object.entries(value)) {
    const at = `${pointer}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    if ((key === 'example' || key === 'examples') && !Array.isArray(value)) found.set(at, item);
    examplesIn(item, at, found);
  }
  return found;
}

t.test('the source has the example that matters', async (t) => {
  t.ok([...source.values()].some((value) => Array.isArray(value) && value.includes(9007199254740993n)));
});

t.test('/openapi.json and /openapi.yaml carry every example exactly', async (t) => {
  const { app } = await build(t);
  const json = await app.inject({ method: 'GET', url: '/openapi.json' });
  t.same(examplesIn(exactJson(json.body)), source);
  t.match(json.body, /\b9007199254740993\b/);
  const yaml = await app.inject({ method: 'GET', url: '/openapi.yaml' });
  t.same(examplesIn(parseYaml(yaml.body, { intAsBigInt: true })), source);
});

// Swagger UI's copy merges allOf (documentForUi in src/docs/plugin.ts), so an example may also appear where
// the merge put it; wherever it is, it is one of the contract's own.
for (const [url, parse] of [
  ['/docs/json', exactJson],
  ['/docs/yaml', (text: string) => parseYaml(text, { intAsBigInt: true })],
] as const) {
  t.test(`${url}, what Swagger UI renders, carries every example exactly`, async (t) => {
    const { app } = await build(t);
    const response = await app.inject({ method: 'GET', url });
    t.equal(response.statusCode, 200);
    t.notOk(response.body.includes('9007199254740992'), 'no rounded id');
    const served = examplesIn(parse(response.body));
    const sourceValues = [...source.values()];
    for (const [pointer, value] of served) {
      if (source.has(pointer)) t.same(value, source.get(pointer), pointer);
      else t.ok(sourceValues.some((example) => deepEqual(example, value)), `${pointer} is one of the contract's examples`);
    }
    const missing = [...source.keys()].filter((pointer) => !pointer.includes('/allOf/') && !served.has(pointer));
    t.same(missing, [], 'every example outside an allOf is where the contract put it');
  });
}

function deepEqual(a: unknown, b: unknown): boolean {
  return stable(a) === stable(b);
}

function stable(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => (typeof item === 'bigint' ? `${item}n` : item));
}
