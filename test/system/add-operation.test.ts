// docs/development.md "Adding an operation, end to end", followed as written: its snippets, read from
// the page, are put where it says in a scratch copy of the repository, which then generates and
// type-checks. The page's own test runs there on both databases, and the copy's app serves GET /tags
// on SQLite and on PostgreSQL, every answer checked against the copy's openapi.yaml.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import t, { type Test } from 'tap';
import { parse, parseDocument } from 'yaml';
import type { PlantStore } from '../../src/store/types.ts';
import { placeSnippet, snippetsOf } from '../harness/doc-steps.ts';
import { failedStartLine, serverEnv } from '../harness/process.ts';
import { copyRepository, generateTypes, PINNED_NODE, typeCheck, withoutCoverage } from '../harness/scratch.ts';
import { freshSchemaUrl, postgresTestOptions } from '../harness/postgres.ts';
import { markdownFile } from '../harness/readme-blocks.ts';

// It type-checks the copy twice and lints, generates, starts and tests it: minutes, not seconds, on a busy machine.
t.setTimeout(300_000);

const run = promisify(execFile);
const DOC = 'docs/development.md';
const SECTION = '## Adding an operation, end to end';
const snippet = snippetsOf(DOC, SECTION);

/** Step 1: the operation under `paths:` and the schema of its items under `components: schemas:`. */
function addToSpec(t: Test, dir: string): void {
  const path = join(dir, 'openapi.yaml');
  const spec = parseDocument(readFileSync(path, 'utf8'));
  const operation = parse(snippet('1. **Spec.**', 'yaml')) as Record<string, unknown>;
  const schema = parse(snippet('and the shape of its items', 'yaml')) as Record<string, unknown>;
  t.same(Object.keys(operation), ['/tags'], 'the page adds the path /tags');
  t.same(Object.keys(schema), ['TagCount'], 'and the schema TagCount');
  spec.setIn(['paths', '/tags'], operation['/tags']);
  spec.setIn(['components', 'schemas', 'TagCount'], schema.TagCount);
  writeFileSync(path, spec.toString());
}

/** Steps 4 to 6: the handler, the store's query and the test, each where the page puts it. */
function addTheCode(t: Test, dir: string): void {
  writeFileSync(join(dir, 'src/plants/tags.ts'), `${snippet('4. **Handler.**', 'ts')}\n`);
  const app = join(dir, 'src/app.ts');
  placeSnippet(t, app, /^import \{ createPlantHandlers \}/, 'after the line', snippet('In `src/app.ts`, import it', 'ts'));
  placeSnippet(t, app, /^\s+\.\.\.createPlantHandlers\(/, 'after the line', snippet('and add its handlers to those', 'ts'));
  placeSnippet(t, join(dir, 'src/store/plants.ts'), /^ {2}listPlants\(/, 'after its block', snippet('5. **Store query.**', 'ts'));
  placeSnippet(t, join(dir, 'test/store/store-contract.ts'), /PlantStore contract`, async \(t\) => \{$/, 'inside its block', snippet('6. **Test.**', 'ts'));
}

/** The diagnostics of a tsc run, one per `file(line,col): error …` block. */
function diagnosticsOf(output: string): string[] {
  return output.split(/\n(?=\S)/).filter((block) => /^\S+\(\d+,\d+\): error/.test(block));
}

const scratch = copyRepository(t.testdir(), ['openapi.yaml', 'package.json', 'tsconfig.json', 'eslint.config.js', 'redocly.yaml', 'src', 'scripts', 'contract', 'test', 'packages/client']);
/** The files the page changes by hand (besides the generated types). */
const CHANGED = ['openapi.yaml', 'src/plants/tags.ts', 'src/app.ts', 'src/store/plants.ts', 'test/store/store-contract.ts'];

t.test('the page names the files it changes, and quotes no line numbers', async (t) => {
  const page = markdownFile(DOC);
  const start = page.indexOf(SECTION);
  const section = page.slice(start, page.indexOf('\n## ', start + 1));
  t.ok(start >= 0, 'the section exists');
  t.notMatch(section, /\.(ts|yaml)(:\d+|\(\d+,\d+\))|\blines? \d+/, 'no file:line, file(line,col) or "line N"');
  for (const file of CHANGED) t.match(section, `\`${file}\``, `names ${file}`);
});

t.test('the page, followed in a scratch copy, gives a copy that type-checks', async (t) => {
  addToSpec(t, scratch);
  await generateTypes(scratch);
  t.match(readFileSync(join(scratch, 'src/generated/openapi.ts'), 'utf8'), /\n {4}listTags: \{/, 'the generated operations include listTags');

  // Step 3 as the page tells it: the compiler, and a server started now, name the missing handler.
  const diagnostics = diagnosticsOf(await typeCheck(scratch));
  t.equal(diagnostics.length, 1, `one diagnostic:\n${diagnostics.join('\n')}`);
  t.match(diagnostics[0], /^src\/app\.ts\(\d+,\d+\): error TS2741: Property 'listTags' is missing in type '.*' but required in type 'ServiceHandlers'/s, 'in src/app.ts, as the page says');
  const quoted = /A server started now stops at once, with one line:\s+`([^`]+)`/.exec(markdownFile(DOC))?.[1];
  const line = await failedStartLine(t, scratch, serverEnv(t.testdir()));
  t.ok(quoted && line === `plant-store failed to start: ${quoted}`, `the page quotes the line the start prints:\n${line}\n${quoted}`);

  addTheCode(t, scratch);
  t.equal(await typeCheck(scratch), '', 'the copy type-checks once the page is followed');
});

t.test('GET /tags gets from its contract what the page says: a token with plants:read, compression, page-read turns', async (t) => {
  const { deriveOperationFacts } = (await import(join(scratch, 'src/contract/operation-facts.ts'))) as typeof import('../../src/contract/operation-facts.ts');
  const { parseSpecification } = (await import(join(scratch, 'src/spec-path.ts'))) as typeof import('../../src/spec-path.ts');
  const facts = deriveOperationFacts(parseSpecification(readFileSync(join(scratch, 'openapi.yaml'), 'utf8'))).get('listTags');
  t.same(facts, {
    operationId: 'listTags',
    security: [{ bearerAuth: ['plants:read'] }],
    compressed: true,
    pageRead: true,
    answeredUnderPressure: false,
    requestMediaTypes: [],
    responseMediaTypes: ['application/json'],
  });
});

t.test('the copy passes what npm test checks besides the tests: lint of openapi.yaml and of the changed code', async (t) => {
  const bin = (name: string) => join(scratch, 'node_modules', '.bin', name);
  const lint = (command: string, args: string[]) =>
    run(bin(command), args, { cwd: scratch, env: withoutCoverage(), maxBuffer: 16 << 20 }).then(
      () => '',
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ''}${error.stderr ?? ''}`,
    );
  t.equal(await lint('redocly', ['lint', '--format', 'stylish', 'openapi.yaml']), '', 'redocly lint openapi.yaml');
  t.equal(await lint('eslint', CHANGED.filter((file) => file.endsWith('.ts'))), '', 'eslint');
});

/** Runs the copy's `file` alone, only its tests whose names match `grep` (one pattern per level); answers its TAP output. */
async function runPageTest(t: Test, file: string, grep: string[]): Promise<string> {
  const env = { ...withoutCoverage(), TAP_GREP: grep.join('\n') };
  const { stdout } = await run(PINNED_NODE, [file], { cwd: scratch, env, maxBuffer: 16 << 20 }).catch((error: { stdout?: string; stderr?: string }) => {
    t.fail(`${file} failed:\n${error.stdout}\n${error.stderr}`);
    return { stdout: '' };
  });
  return stdout;
}

const PAGE_TEST = 'tags are counted, the most carried first, at most the limit';

t.test("the page's test passes on SQLite", async (t) => {
  const output = await runPageTest(t, 'test/store/store.test.ts', ['PlantStore contract', PAGE_TEST]);
  t.match(output, new RegExp(`^\\s*ok \\d+ - ${PAGE_TEST}\\b(?!.*# SKIP)`, 'm'), 'the case ran and passed');
});

t.test("the copy's checks of openapi.yaml against the code pass: the types are fresh, the list is bounded, the route is served", async (t) => {
  const output = await runPageTest(t, 'test/contract/spec.test.ts', ['^(src/generated/openapi.ts matches|every page answer declares maxItems|every operation in openapi.yaml is routed)']);
  t.equal(output.match(/^ok \d+ - (?!.*# SKIP)/gm)?.length, 3, `the three ran and passed:\n${output}`);
});

t.test("the page's test passes on PostgreSQL", await postgresTestOptions(), async (t) => {
  const output = await runPageTest(t, 'test/store/store-postgres.test.ts', ['^postgres$', 'PlantStore contract', PAGE_TEST]);
  t.match(output, new RegExp(`^\\s*ok \\d+ - ${PAGE_TEST}\\b(?!.*# SKIP)`, 'm'), 'the case ran and passed');
});

const ORIGIN = 'https://plants.example';
const TAGS = ['fern', 'aroid', 'fern', undefined, 'cactus', 'fern', 'aroid'];

/**
 * GET /tags served by the copy's app, on the store `open` gives (the copy's SQLite file by default), with
 * CORS and a rate limit on so that their headers are on every answer; each answer is checked against the
 * copy's openapi.yaml, decoded first where it is compressed.
 */
async function servesTags(t: Test, open?: () => Promise<PlantStore>): Promise<void> {
  const helper = (await import(join(scratch, 'test/harness/helper.ts'))) as typeof import('../harness/helper.ts');
  const { contractProblems } = (await import(join(scratch, 'test/harness/contract.ts'))) as typeof import('../harness/contract.ts');
  const tokens = (await import(join(scratch, 'src/tokens/format.ts'))) as typeof import('../../src/tokens/format.ts');
  const { app, store } = await helper.build(t, { CORS_ORIGINS: [ORIGIN], RATE_LIMIT_PER_MINUTE: 10_000 }, open ? { store: await open() } : {});
  const headers = { ...helper.AUTH, origin: ORIGIN };
  const get = (url: string, sent: Record<string, string> = headers) => helper.api(t, app, { method: 'GET', url, headers: sent });
  const body = (answer: { body: string }) => JSON.parse(answer.body) as unknown;

  t.same(body(await get('/tags')), [], 'no plants, no tags');
  for (const [at, tag] of TAGS.entries()) {
    t.equal((await helper.createPlant(t, app, JSON.stringify({ id: at + 1, name: `plant ${at + 1}`, tag }), headers)).statusCode, 200);
  }
  const counted = [{ tag: 'fern', plants: 3 }, { tag: 'aroid', plants: 2 }, { tag: 'cactus', plants: 1 }];
  const all = await get('/tags');
  t.equal(all.statusCode, 200);
  t.same(body(all), counted, 'each tag with how many plants carry it, the most carried first');
  t.same(body(await get('/tags?limit=2')), counted.slice(0, 2), 'at most `limit`');

  const refused = await get('/tags?limit=1001');
  t.equal(refused.statusCode, 400, 'a limit over 1000 is refused');
  t.match(body(refused), { message: /limit/ }, 'naming the parameter');
  t.equal((await get('/tags', { origin: ORIGIN })).statusCode, 401, 'no token, 401');
  const writer = tokens.generateToken();
  await store.tokens.createToken({ name: 'writer', hash: tokens.hashToken(writer), hint: tokens.tokenHint(writer), scopes: ['plants:write'] });
  t.equal((await get('/tags', { authorization: `Bearer ${writer}`, origin: ORIGIN })).statusCode, 403, 'a token without plants:read, 403');

  // Enough tags for an answer over 1 KiB, which the contract lets the service compress.
  for (let id = 100; id < 160; id++) await store.plants.createPlant({ id: BigInt(id), name: 'filler', tag: `a tag long enough to count, number ${id}` });
  const response = await app.inject({ method: 'GET', url: '/tags?limit=1000', headers: { ...headers, 'accept-encoding': 'gzip' } });
  t.equal(response.headers['content-encoding'], 'gzip', 'compressed, as its answer declares Content-Encoding');
  const plain = response.headers['content-encoding'] === 'gzip' ? gunzipSync(response.rawPayload) : response.rawPayload;
  const decoded = { statusCode: response.statusCode, headers: response.headers, body: plain.toString() };
  t.same(contractProblems('GET', '/tags?limit=1000', decoded), [], 'GET /tags?limit=1000 200 (gzip) matches openapi.yaml');
  t.equal((JSON.parse(decoded.body) as unknown[]).length, 63, 'every tag');
}

t.test('on SQLite, the copy serves GET /tags as its openapi.yaml says', (t) => servesTags(t));

t.test('on PostgreSQL, the copy serves GET /tags as its openapi.yaml says', await postgresTestOptions(), async (t) => {
  const { openStore } = (await import(join(scratch, 'src/store/factory.ts'))) as typeof import('../../src/store/factory.ts');
  await servesTags(t, async () => openStore(await freshSchemaUrl(), { poolSize: 2 }));
});
