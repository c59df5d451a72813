// docs/development.md "Adding a field, end to end", followed as written: its snippets, read from the page,
// are applied in a scratch copy of the repository, which must then type-check, and a real server process
// of the copy, on SQLite and on PostgreSQL, must carry the new `number` and `integer` fields through
// create, read, replay, replace, list and webhook deliveries to a real receiver.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { parse, parseDocument } from 'yaml';
import { replaceDeclaration, snippetsOf } from '../harness/doc-steps.ts';
import { serverEnv, startServer, type RunningServer } from '../harness/process.ts';
import { copyRepository, generateTypes, NO_COVERAGE, typeCheck } from '../harness/scratch.ts';
import { freshSchemaUrl, postgresTestOptions } from '../harness/postgres.ts';
import { markdownFile } from '../harness/readme-blocks.ts';

const DOC = 'docs/development.md';
const TOKEN = 'add-field-test-token-0123456789';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

/** The snippet of a step of the page: the first block of `lang` after the line that starts with `marker`. */
const snippet = snippetsOf(DOC);

/** Steps 1, 2, 4 and 5 of the page, as a reader does them; then the type check of step 3 must pass. */
async function followThePage(t: Test, dir: string): Promise<void> {
  const specPath = join(dir, 'openapi.yaml');
  const spec = parseDocument(readFileSync(specPath, 'utf8'));
  const added = parse(snippet('1. **Spec.**', 'yaml')) as Record<string, unknown>;
  t.same(Object.keys(added), ['price', 'stock'], 'the page adds price and stock');
  for (const [field, schema] of Object.entries(added)) spec.setIn(['components', 'schemas', 'Plant', 'properties', field], schema);
  writeFileSync(specPath, spec.toString());
  await generateTypes(dir);

  replaceDeclaration(t, join(dir, 'src/store/plant-fields.ts'), snippet('4. **Columns.**', 'ts'));
  const migrationsPath = join(dir, 'src/store/migrations.ts');
  const migrations = readFileSync(migrationsPath, 'utf8');
  const end = migrations.lastIndexOf('\n];');
  writeFileSync(migrationsPath, `${migrations.slice(0, end)}\n  ${snippet('5. **Migration.**', 'ts')}${migrations.slice(end)}`);
  replaceDeclaration(t, migrationsPath, snippet('Then point `PLANT_FIELD_MIGRATIONS` at it', 'ts'));

  const edited = (await import(migrationsPath)) as typeof import('../../src/store/migrations.ts');
  const versions = edited.migrations.map((migration) => migration.version);
  t.same(versions, versions.map((_, at) => at + 1), 'the page\'s migration is the version after the last');
  t.same(edited.PLANT_FIELD_MIGRATIONS, { name: 1, tag: 1, price: versions.at(-1), stock: versions.at(-1) }, 'and the fields point at it');

  t.equal(await typeCheck(dir), '', 'the copy type-checks once the page is followed');
}

interface Receiver {
  url: string;
  /** Resolves with the body of the first delivery of `event`. */
  delivery: (event: string) => Promise<Record<string, unknown>>;
}

/** A webhook receiver on 127.0.0.1 that keeps each delivery's event and body, and answers 204. */
async function startReceiver(t: Test): Promise<Receiver> {
  const received: { event: string; body: Record<string, unknown> }[] = [];
  const waiters = new Set<() => void>();
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      received.push({ event: String(request.headers['webhook-event']), body: JSON.parse(body) as Record<string, unknown> });
      response.writeHead(204).end();
      for (const waiter of [...waiters]) waiter();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    delivery: (event) =>
      new Promise((resolve) => {
        const check = () => {
          const found = received.find((delivery) => delivery.event === event);
          if (found) {
            waiters.delete(check);
            resolve(found.body);
          }
        };
        waiters.add(check);
        check();
      }),
  };
}

/** A request with `body` as JSON, or as the text given (for numbers a JavaScript literal would round). */
async function call(server: RunningServer, method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  const text = body === undefined || typeof body === 'string' ? body : JSON.stringify(body);
  const response = await fetch(`${server.url}${path}`, { method, headers, body: text });
  return { status: response.status, body: await response.json() };
}

/** Every way a plant reaches and leaves the store, with both new fields. */
async function carriesTheFields(t: Test, server: RunningServer): Promise<void> {
  const receiver = await startReceiver(t);
  t.equal((await call(server, 'POST', '/webhooks', { url: receiver.url })).status, 201, 'subscribed');

  const fern = { id: 7, name: 'Fern', price: 12.5, stock: 3 };
  t.same(await call(server, 'POST', '/plants', fern), { status: 200, body: { name: 'Fern', price: 12.5, stock: 3 } }, 'created');
  t.same(await call(server, 'GET', '/plants/7'), { status: 200, body: fern }, 'read back');
  t.same(await call(server, 'POST', '/plants', fern), { status: 200, body: { name: 'Fern', price: 12.5, stock: 3 } }, 'the same create again is a replay');
  t.equal((await call(server, 'POST', '/plants', { ...fern, stock: 4 })).status, 409, 'another stock at the same id is a conflict');
  t.same(await call(server, 'POST', '/plants', { id: 8, name: 'Moss' }), { status: 200, body: { name: 'Moss' } }, 'both fields are optional');

  const replaced = { name: 'Fern', price: 1250, stock: 0 };
  t.same(await call(server, 'PUT', '/plants/7', replaced), { status: 200, body: { id: 7, ...replaced } }, 'replaced');
  t.same(await call(server, 'GET', '/plants/7'), { status: 200, body: { id: 7, ...replaced } }, 'read back after the replace');
  t.same(await call(server, 'GET', '/plants'), { status: 200, body: [{ id: 7, ...replaced }, { id: 8, name: 'Moss' }] }, 'listed');

  const exact = await call(server, 'POST', '/plants', '{"id":9,"name":"Ivy","price":9007199254740993}');
  t.equal(exact.status, 400, 'a price a double cannot hold exactly is refused');
  t.match(exact.body, { message: /"price"/ }, 'naming the field');

  t.same(await receiver.delivery('plant.created'), fern, 'the created event carries the fields');
  t.same(await receiver.delivery('plant.replaced'), { id: 7, ...replaced }, 'the replaced event too');
}

t.test('the page quotes no line numbers, which would go stale', async (t) => {
  const page = markdownFile(DOC);
  const section = page.slice(page.indexOf('## Adding a field, end to end'), page.indexOf('\n## ', page.indexOf('## Adding a field, end to end') + 1));
  t.notMatch(section, /\.(ts|yaml)(:\d+|\(\d+,\d+\))|\blines? \d+/, 'no file:line, file(line,col) or "line N"');
});

const scratch = copyRepository(t.testdir(), ['openapi.yaml', 'package.json', 'tsconfig.json', 'src', 'scripts', 'contract', 'test', 'packages/client']);

t.test('the page, followed in a scratch copy, gives a copy that type-checks', (t) => followThePage(t, scratch));

const env = { API_TOKENS: TOKEN, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', ...NO_COVERAGE };
const command = [process.execPath, join(scratch, 'src/entry.js')];

t.test('on SQLite, a server of the copy carries both fields everywhere', async (t) => {
  const server = await startServer(t, serverEnv(t.testdir(), env), { command });
  await carriesTheFields(t, server);
  t.same(await server.stop(), { code: 0, signal: null });
});

t.test('on PostgreSQL, a server of the copy carries both fields everywhere', await postgresTestOptions(), async (t) => {
  const server = await startServer(t, serverEnv(t.testdir(), { ...env, DATABASE_URL: await freshSchemaUrl() }), { command });
  await carriesTheFields(t, server);
  t.same(await server.stop(), { code: 0, signal: null });
});
