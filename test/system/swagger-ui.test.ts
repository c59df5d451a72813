// Swagger UI at /docs as a person uses it: a real server on a temp SQLite store, driven in headless
// Chromium (Debian's `chromium`). Without Chromium the browser tests skip visibly; with CI=true
// they run and fail.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Locator, type Page } from 'playwright-core';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { SPEC_PATH } from '../../src/spec-path.ts';
import { REPO_ROOT } from '../harness/paths.ts';
import { serverEnv, startServer } from '../harness/process.ts';

const CHROMIUM = '/usr/bin/chromium';
const TOKEN = 'token-swagger-ui-test-0001';
const BIG = ['9007199254740993', '9007199254740995', '9007199254740997'] as const;

const chromiumSkip =
  existsSync(CHROMIUM) || process.env.CI === 'true' ? false : `${CHROMIUM} is missing (apt-get install chromium); Swagger UI browser tests skipped`;

const base64 = (path: string) => readFileSync(path).toString('base64');
const FASTIFY_LOGO = base64(`${REPO_ROOT}node_modules/@fastify/swagger-ui/static/logo.svg`);
const OUR_LOGO = base64(`${REPO_ROOT}src/docs/docs-ui/logo.svg`);

t.test('Swagger UI in headless Chromium', { skip: chromiumSkip }, async (t) => {
  const server = await startServer(t, serverEnv(t.testdir(), { API_TOKENS: TOKEN }));
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  t.teardown(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // Everything the page's Content-Security-Policy blocks: reported as events and on the console.
  const violations: string[] = [];
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
  });
  await page.exposeFunction('reportViolation', (text: string) => violations.push(text));
  await page.addInitScript(() => {
    interface Violation {
      violatedDirective: string;
      blockedURI: string;
    }
    const scope = globalThis as unknown as { reportViolation: (text: string) => void; addEventListener: (type: string, listener: (event: Violation) => void) => void };
    scope.addEventListener('securitypolicyviolation', (event) => scope.reportViolation(`${event.violatedDirective}: ${event.blockedURI}`));
  });
  const open = async () => {
    await page.goto(`${server.url}/docs`);
    await page.locator('.opblock').first().waitFor();
  };
  await open();

  t.test('the page is Plant Store: title, top bar, logo; no explore box', async (t) => {
    t.equal(await page.title(), 'Plant Store');
    const topbar = page.locator('.topbar');
    t.match(await topbar.innerText(), /Plant Store/, 'the top bar names the service');
    t.equal(await page.locator(`img[src$="${FASTIFY_LOGO}"]`).count(), 0, 'no Fastify logo');
    t.equal(await topbar.locator(`img[src$="${OUR_LOGO}"]`).count(), 1, 'our logo instead');
    const visibleInputs = await topbar.locator('input:visible').count();
    t.equal(visibleInputs, 0, 'no explore box in the top bar');
    const urls = await page.locator('input:visible').evaluateAll((inputs) => inputs.map((input) => (input as unknown as { value: string }).value));
    t.notOk(urls.some((value) => value.includes('/docs/json')), 'no box shows the undocumented /docs/json');
    t.equal(await page.locator('a[href*="docs/json"]').count(), 0, 'no link to /docs/json either');
    t.same(await topbar.locator('a[href$=".json"], a[href$=".yaml"]').evaluateAll((links) => links.map((link) => new URL((link as unknown as { href: string }).href).pathname)), ['/openapi.yaml', '/openapi.json'], 'the top bar links the published contract');
    await page.screenshot({ path: join(t.testdir(), 'swagger-ui.png') });
  });

  t.test('schemas are shown by their names', async (t) => {
    // The Schemas section: each schema's name, and the type shown beside it.
    const listed = await page.locator('.models article.json-schema-2020-12[data-json-schema-level="0"]').evaluateAll((articles) =>
      articles.map((article) => [
        article.querySelector('.json-schema-2020-12__title')?.textContent,
        article.querySelector(':scope > .json-schema-2020-12-head > .json-schema-2020-12__attribute--primary')?.textContent,
      ]),
    );
    const types = Object.fromEntries(listed);
    for (const name of ['NewPlant', 'Plant', 'StoredPlant']) t.equal(types[name], 'object', `${name} is listed by name as an object`);
    const create = await expand(page, 'createPlant');
    await create.locator('.opblock-section-request-body').getByRole('tab', { name: 'Schema' }).click();
    t.equal(await title(create.locator('.opblock-section-request-body')), 'NewPlant', 'the createPlant body is NewPlant');
    const created = create.locator('tr.response[data-code="200"]');
    await created.getByRole('tab', { name: 'Schema' }).click();
    t.equal(await title(created), 'Plant', 'createPlant answers a Plant');
    const get = await expand(page, 'getPlant');
    const got = get.locator('tr.response[data-code="200"]');
    await got.getByRole('tab', { name: 'Schema' }).click();
    t.equal(await title(got), 'StoredPlant', 'getPlant answers a StoredPlant');
  });

  t.test('authorize: the token is used, and kept nowhere in the browser (DOCS_PERSIST_AUTHORIZATION off)', async (t) => {
    await authorize(page);
    t.match(await page.locator('.auth-wrapper .authorize').getAttribute('class'), /\blocked\b/, 'shown as authorized');
    t.notMatch(await page.evaluate(() => JSON.stringify({ ...localStorage })), TOKEN, 'the token is not in localStorage');
    await open();
    t.notMatch(await page.locator('.auth-wrapper .authorize').getAttribute('class'), /\blocked\b/, 'forgotten after a reload');
    await authorize(page); // for the tests below
  });

  t.test('big ids: created, got and listed through "Try it out", shown digit for digit', async (t) => {
    const create = await expand(page, 'createPlant');
    await create.locator('button.try-out__btn').click();
    for (const id of BIG) {
      await create.locator('textarea.body-param__text').fill(`{"id": ${id}, "name": "Plant ${id}"}`);
      const answer = await execute(page, create);
      t.equal(answer.status, 200, `plant ${id} created with the stored token`);
      t.equal(answer.authorization, `Bearer ${TOKEN}`);
    }

    const get = await expand(page, 'getPlant');
    await get.locator('button.try-out__btn').click();
    await get.locator('tr[data-param-name="id"] input').fill(BIG[0]);
    const got = await execute(page, get);
    t.equal(got.status, 200);
    t.same(ids(got.shown), [BIG[0]], 'GET shows the id as stored');
    t.match(got.shown, `"name": "Plant ${BIG[0]}"`);

    const list = await expand(page, 'listPlants');
    await list.locator('button.try-out__btn').click();
    const listed = await execute(page, list);
    t.equal(listed.status, 200);
    t.same(ids(listed.shown), [...BIG], 'the list shows three different ids, each as stored');
  });

  t.test('the Content-Security-Policy blocked nothing the page needs', async (t) => {
    const answer = await page.goto(`${server.url}/docs`);
    t.match(answer?.headers()['content-security-policy'], /frame-ancestors 'none'/, 'the page may not be framed');
    await page.locator('.opblock').first().waitFor();
    t.same(violations, [], 'no violation reported');
  });
});

t.test('DOCS_PERSIST_AUTHORIZATION=true: the token survives a reload', { skip: chromiumSkip }, async (t) => {
  const server = await startServer(t, serverEnv(t.testdir(), { API_TOKENS: TOKEN, DOCS_PERSIST_AUTHORIZATION: 'true' }));
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu'] });
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  const open = async () => {
    await page.goto(`${server.url}/docs`);
    await page.locator('.opblock').first().waitFor();
  };
  await open();
  await authorize(page);
  await open();
  t.match(await page.locator('.auth-wrapper .authorize').getAttribute('class'), /\blocked\b/, 'shown as authorized after the reload');
});

/** Gives the token to Swagger UI's Authorize dialog. */
async function authorize(page: Page): Promise<void> {
  await page.locator('.auth-wrapper .authorize').click();
  await page.locator('.auth-container input').fill(TOKEN);
  await page.locator('.auth-btn-wrapper .authorize').click();
  await page.locator('.auth-btn-wrapper .btn-done').click();
}

t.test('every operation has an example for each request body and each response body', async (t) => {
  interface Body {
    $ref?: string;
    content?: Record<string, object>;
  }
  interface Operation {
    operationId?: unknown;
    requestBody?: Body;
    responses?: Record<string, Body>;
  }
  type PathItems = Record<string, Record<string, Operation | undefined>>;
  const document = parseYaml(readFileSync(SPEC_PATH, 'utf8')) as { paths: PathItems; webhooks?: PathItems };
  const deref = (value: Body | undefined): Body | undefined => {
    if (typeof value?.$ref !== 'string') return value;
    return value.$ref.split('/').slice(1).reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], document) as Body;
  };
  const missing: string[] = [];
  for (const group of [document.paths, document.webhooks ?? {}]) {
    for (const item of Object.values(group)) {
      for (const operation of Object.values(item)) {
        if (typeof operation?.operationId !== 'string') continue;
        const bodies: [string, Body | undefined][] = [['request body', deref(operation.requestBody)]];
        for (const [status, response] of Object.entries(operation.responses ?? {})) bodies.push([status, deref(response)]);
        for (const [where, body] of bodies) {
          for (const [type, media] of Object.entries(body?.content ?? {})) {
            if (!('example' in media) && !('examples' in media)) missing.push(`${operation.operationId} ${where} ${type}`);
          }
        }
      }
    }
  }
  t.same(missing, [], 'no body without an example');
});

/** Opens an operation's block (once) and returns it. */
async function expand(page: Page, operationId: string): Promise<Locator> {
  const block = page.locator(`.opblock[id$="-${operationId}"]`);
  if (!(await block.getAttribute('class'))?.includes('is-open')) await block.locator('.opblock-summary').click();
  await block.locator('.opblock-body').waitFor();
  return block;
}

/** Clicks Execute; waits for the answer and for the page to show it (its x-request-id); returns what the page shows. */
async function execute(page: Page, block: Locator): Promise<{ status: number; authorization?: string; shown: string }> {
  const [response] = await Promise.all([page.waitForResponse((r) => new URL(r.url()).pathname.startsWith('/plants')), block.locator('button.execute').click()]);
  const requestId = (await response.allHeaders())['x-request-id']!;
  const live = block.locator('.live-responses-table', { hasText: requestId });
  await live.waitFor();
  const shown = await live.locator('.response-col_description .highlight-code').first().innerText();
  return { status: response.status(), authorization: (await response.request().allHeaders()).authorization, shown };
}

/** The name Swagger UI shows for the schema drawn in `section` (empty when it shows none). */
async function title(section: Locator): Promise<string> {
  const schema = section.locator('article.json-schema-2020-12[data-json-schema-level="0"]');
  await schema.waitFor();
  const name = schema.locator(':scope > .json-schema-2020-12-head .json-schema-2020-12__title');
  return (await name.count()) === 0 ? '' : await name.innerText();
}

function ids(shown: string): string[] {
  return [...shown.matchAll(/"id": (-?\d+)/g)].map((match) => match[1]!);
}
