// The client as its users get it: packages/client packed with `npm pack`, installed from the tarball
// into a fresh project outside the repository, and used against one real server process: README's
// examples followed in order on Node 20 and Node 24, a TypeScript consumer under `tsc --strict`
// (node16 and bundler resolution), and a bundled page in headless Chromium calling the API via CORS.
// Without Node 20 or Chromium those parts skip visibly; with CI=true they fail.
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import t from 'tap';
import { REPO_ROOT } from '../harness/paths.ts';
import { serverEnv, startServer, type Teardown } from '../harness/process.ts';
import { docBlock, example, readmeBlock } from '../harness/readme-blocks.ts';
import { withoutCoverage } from '../harness/scratch.ts';

const CHROMIUM = '/usr/bin/chromium';
const CI = process.env.CI === 'true';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end, outside the coverage report (a copy, the consumer); never throws, so a failure shows its output in the assertion. */
function run(command: string, args: readonly string[], cwd: string, env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: { ...withoutCoverage(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const output = { stdout: '', stderr: '' };
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output.stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output.stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, ...output }));
  });
}

/** The machine's Node 20 (a `node` on PATH or in /usr/bin), or undefined. */
function findNode20(): string | undefined {
  const candidates = [...(process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'node')), '/usr/bin/node', '/usr/local/bin/node'];
  return candidates.find((file) => {
    if (!existsSync(file)) return false;
    try {
      return execFileSync(file, ['--version'], { encoding: 'utf8' }).startsWith('v20.');
    } catch {
      return false;
    }
  });
}

const NODE20 = findNode20();
const node20Skip = NODE20 || CI ? false : 'no Node 20 on this machine (PATH, /usr/bin/node); the Node 20 run is skipped';
const chromiumSkip = existsSync(CHROMIUM) || CI ? false : `${CHROMIUM} is missing (apt-get install chromium); the browser run is skipped`;

// One scratch project, outside the repository as a user's would be, shared by every subtest.
const consumer = mkdtempSync(join(tmpdir(), 'plant-store-consumer-'));
t.teardown(() => rmSync(consumer, { recursive: true, force: true }));

// Packed from a copy (inside the repository, so its build finds TypeScript and lossless-json), so the
// build that npm pack runs never rewrites packages/client/dist while other test files import it.
const source = t.testdir();
for (const entry of ['package.json', 'tsconfig.json', 'README.md', 'src']) cpSync(join(REPO_ROOT, 'packages/client', entry), join(source, entry), { recursive: true });
const pack = await run('npm', ['pack', source, '--pack-destination', consumer, '--json'], REPO_ROOT);
const packed = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as [{ filename: string; files: { path: string }[] }];
const tarball = join(consumer, packed[0].filename);
writeFileSync(join(consumer, 'package.json'), `${JSON.stringify({ name: 'client-consumer', private: true, type: 'module' }, null, 2)}\n`);
// @types/node for the TypeScript consumer, at the version the repository installed (so it is in npm's cache).
const typesNode = (JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules/@types/node/package.json'), 'utf8')) as { version: string }).version;
const install = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball, `@types/node@${typesNode}`], consumer);
// The examples as a reader saves them in their project: README's plants.mjs, the package README's client.ts.
copyFileSync(join(REPO_ROOT, 'test/examples/readme-client.mjs'), join(consumer, 'plants.mjs'));
copyFileSync(join(REPO_ROOT, 'test/examples/client.ts'), join(consumer, 'client.ts'));

t.test('npm pack builds a tarball of ESM, .d.ts and README that installs without the server', async (t) => {
  t.equal(pack.code, 0, pack.code === 0 ? 'npm pack exits 0' : pack.stderr);
  t.equal(packed[0].filename, 'plant-store-client-1.0.0.tgz', 'named for the API and its version');
  const files = packed[0].files.map(({ path }) => path);
  t.same(['README.md', 'dist/index.d.ts', 'dist/index.js', 'dist/json.js', 'package.json'].filter((file) => !files.includes(file)), []);
  t.equal(install.code, 0, install.code === 0 ? 'npm install <tarball> exits 0' : install.stderr);
  t.notMatch(install.stderr, /install script/, 'the package runs nothing when installed');
  const installed = readdirSync(join(consumer, 'node_modules')).filter((name) => !name.startsWith('.'));
  t.same(installed.sort(), ['@plant-store', '@types', 'lossless-json', 'undici-types'], 'the client brings lossless-json and nothing of the server');
});

t.test('against one real server', async (t) => {
  const page = await startPageServer(t);
  const server = await startServer(t, serverEnv(t.testdir(), { CORS_ORIGINS: page.origin }));
  // The token the first start prints, as README says.
  const [token] = await server.waitFor('stderr', /pst_[0-9A-Za-z]{49}/);
  const env = { PLANT_STORE_URL: server.url, PLANT_STORE_TOKEN: token };

  t.test("README's curl example, then its client example: the output README shows", async (t) => {
    const body = /-d '([^']*)'/.exec(readmeBlock('On the first start with no token configured', 'sh'))![1]!;
    const created = await fetch(`${server.url}/plants`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
    t.equal(created.status, 200, 'the curl example creates its plant');
    t.equal(readmeBlock('With the server of [the two commands]', 'js'), example('readme-client.mjs'), 'README shows test/examples/readme-client.mjs verbatim');
    const printed = readmeBlock('`PLANT_STORE_TOKEN=pst_… node plants.mjs` prints', 'text');

    await t.test('on Node 20', { skip: node20Skip }, async (t) => {
      t.same(await run(NODE20 ?? 'node20', ['plants.mjs'], consumer, env), { code: 0, stdout: printed, stderr: '' });
    });
    await t.test(`on Node ${process.versions.node}`, async (t) => {
      t.same(await run(process.execPath, ['plants.mjs'], consumer, env), { code: 0, stdout: printed, stderr: '' });
    });
    const stored = await fetch(`${server.url}/plants/9007199254740993`, { headers: { authorization: `Bearer ${token}` } });
    t.equal(await stored.text(), '{"id":9007199254740993,"name":"Monstera","tag":"araceae"}', 'the server holds the id digit for digit');
  });

  t.test("then the package README's example: the output it shows", async (t) => {
    const printed = docBlock('packages/client/README.md', 'It prints', 'text');
    t.same(await run(process.execPath, ['client.ts'], consumer, env), { code: 0, stdout: printed, stderr: '' });
  });

  t.test('a TypeScript consumer compiles under tsc --strict', async (t) => {
    writeFileSync(join(consumer, 'types.ts'), TYPED_USE);
    const tsc = join(REPO_ROOT, 'node_modules/typescript/bin/tsc');
    for (const [name, options] of Object.entries(RESOLUTIONS)) {
      const config = `tsconfig.${name}.json`;
      const compilerOptions = { ...options, strict: true, target: 'es2022', lib: ['es2022', 'dom'], types: ['node'], noEmit: true, skipLibCheck: false };
      writeFileSync(join(consumer, config), JSON.stringify({ compilerOptions, files: ['client.ts', 'types.ts'] }));
      t.same(await run(process.execPath, [tsc, '-p', config], consumer), { code: 0, stdout: '', stderr: '' }, `moduleResolution ${name}`);
    }
  });

  t.test('a bundled page in headless Chromium creates and reads back 9007199254740997 via CORS', { skip: chromiumSkip }, async (t) => {
    writeFileSync(join(consumer, 'page.js'), PAGE_SCRIPT);
    const bundle = await build({ absWorkingDir: consumer, entryPoints: ['page.js'], bundle: true, format: 'esm', platform: 'browser', target: 'es2022', write: false, logLevel: 'silent' });
    page.serve(bundle.outputFiles[0]!.text);
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
    t.teardown(() => browser.close());
    const tab = await browser.newPage();
    const errors: string[] = [];
    tab.on('pageerror', (error) => errors.push(error.message));
    await tab.goto(`${page.origin}/?${new URLSearchParams({ api: server.url, token })}`);
    t.equal(await tab.evaluate('window.result'), 'bigint 9007199254740997 Calathea', 'the page read its id back exact, as a bigint');
    t.same(errors, [], 'no error on the page');
    const stored = await fetch(`${server.url}/plants/9007199254740997`, { headers: { authorization: `Bearer ${token}` } });
    t.equal(await stored.text(), '{"id":9007199254740997,"name":"Calathea","tag":"browser"}', 'the server holds the id the page sent, digit for digit');
  });
});

const RESOLUTIONS: Record<string, { module: string; moduleResolution: string }> = {
  node16: { module: 'node16', moduleResolution: 'node16' },
  bundler: { module: 'esnext', moduleResolution: 'bundler' },
};

/** Uses the types do not allow, so a package typed `any` fails the compile. */
const TYPED_USE = `import { createPlantStoreClient, type StoredPlant } from '@plant-store/client';

const store = createPlantStoreClient({ baseUrl: 'http://127.0.0.1:3000' });
export async function read(): Promise<StoredPlant> {
  const { plant } = await store.plants.get(9007199254740993n);
  const id: bigint = plant.id;
  // @ts-expect-error ids are bigints: a number would not stay exact above 2^53
  await store.plants.get(1);
  // @ts-expect-error a plant needs a name
  await store.plants.create({ id });
  return plant;
}
`;

/** The page's script: a plain ESM consumer of the package, bundled for the browser. */
const PAGE_SCRIPT = `import { createPlantStoreClient } from '@plant-store/client';

const query = new URLSearchParams(location.search);
const store = createPlantStoreClient({ baseUrl: query.get('api'), token: query.get('token') });
window.result = (async () => {
  await store.plants.create({ id: 9007199254740997n, name: 'Calathea', tag: 'browser' });
  const { plant } = await store.plants.get(9007199254740997n);
  return \`\${typeof plant.id} \${plant.id} \${plant.name}\`;
})();
`;

/** A static server for the test page, on an origin of its own (another port) so its calls are cross-origin. */
async function startPageServer(t: Teardown) {
  let script = '';
  const html = '<!doctype html><title>client</title><script type="module" src="/page.js"></script>';
  const server = createServer((request, response) => {
    if (request.url === '/page.js') response.writeHead(200, { 'content-type': 'text/javascript' }).end(script);
    else response.writeHead(200, { 'content-type': 'text/html' }).end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    serve: (text: string) => (script = text),
  };
}
