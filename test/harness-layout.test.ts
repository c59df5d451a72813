// The rules of test/harness/: scripts/ import the harness, never the other way; each harness helper
// is defined once; npm run test:quick picks the in-process test files.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from './harness/paths.ts';
import { importsOf, processStartersReached, quickTestFiles, SLOW, testFiles } from './harness/quick.ts';

/** Every .ts file below `folder` (from the repository root), as paths from the root. */
function sources(folder: string): string[] {
  return readdirSync(join(REPO_ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join(folder, name))
    .sort();
}

/** The files of the repository that `file` imports, as paths from the root (packages left out). */
function localImports(file: string): string[] {
  return importsOf(join(REPO_ROOT, file))
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) => relative(REPO_ROOT, resolve(dirname(join(REPO_ROOT, file)), specifier)));
}

t.test('test/ never imports scripts/', async (t) => {
  const found = sources('test').flatMap((file) => localImports(file).filter((target) => target.startsWith('scripts/')).map((target) => `${file} imports ${target}`));
  t.same(found, []);
});

t.test('scripts/ take from test/ only the harness; contract/ takes from neither', async (t) => {
  const fromScripts = sources('scripts').flatMap((file) =>
    localImports(file).filter((target) => target.startsWith('test/') && !target.startsWith('test/harness/')).map((target) => `${file} imports ${target}`),
  );
  t.same(fromScripts, [], 'scripts/');
  const fromContract = sources('contract').flatMap((file) =>
    localImports(file).filter((target) => /^(test|scripts)\//.test(target)).map((target) => `${file} imports ${target}`),
  );
  t.same(fromContract, [], 'contract/');
});

t.test('each harness helper is defined once, in test/harness/', async (t) => {
  const helpers = ['REPO_ROOT', 'freePort', 'spawnServer', 'startServer', 'runToExit', 'runScript', 'openRaw', 'takeResponse', 'rawExchange', 'rawResponses', 'tryConnect', 'integerSetting', 'startPostgresCluster', 'startRedisServer', 'Cleanup'];
  const files = [...sources('test'), ...sources('scripts'), ...sources('contract')];
  const texts = new Map(files.map((file) => [file, readFileSync(join(REPO_ROOT, file), 'utf8')]));
  for (const name of helpers) {
    const definition = new RegExp(`^(?:export )?(?:async )?(?:function\\*? |const |let |class )${name}\\b`, 'm');
    const places = files.filter((file) => definition.test(texts.get(file)!));
    t.equal(places.length, 1, `${name}: ${places.join(', ') || 'nowhere'}`);
    t.ok(places.every((file) => file.startsWith('test/harness/')), `${name} is in test/harness/`);
  }
});

t.test('npm run test:quick runs the test files that start no process, npm test all of them', async (t) => {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; tap: { include: string[] } };
  t.equal(pkg.scripts['test:quick'], 'node scripts/test-quick.ts');
  t.match(pkg.scripts.test!, /&& tap$/, 'npm test ends with a plain tap: every file of its include');
  t.same(pkg.tap.include, ['test/**/*.test.ts']);
  t.same(testFiles(), sources('test').filter((file) => file.endsWith('.test.ts')), 'test:quick chooses among every test file npm test runs');
  const quick = quickTestFiles();
  t.ok(quick.includes('test/security/auth.test.ts'), 'an in-process test is quick');
  t.notOk(quick.includes('test/system/chaos-postgres.test.ts'), 'a test reaching a process starter through the harness is not');
  t.match(processStartersReached(join(REPO_ROOT, 'test/system/chaos-postgres.test.ts')), ['test/harness/process.ts imports node:child_process']);
  t.ok(quick.length > 0 && quick.length < testFiles().length);
  for (const file of Object.keys(SLOW)) t.ok(testFiles().includes(file), `${file}, listed as slow, exists`);
});

t.test('test/ mirrors src/: a test sits in the folder of the src/ concern it tests; system tests, which start processes, in test/system/', async (t) => {
  const concerns = new Set([...readdirSync(join(REPO_ROOT, 'src'), { withFileTypes: true }).filter((entry) => entry.isDirectory()).map((entry) => entry.name), 'client']);
  const quick = new Set(quickTestFiles());
  for (const file of testFiles()) {
    const folder = dirname(file).slice('test/'.length);
    if (folder === 'system') t.ok(!quick.has(file) && !(file in SLOW), `${file} starts a process`);
    else t.ok(quick.has(file) || file in SLOW, `${file} starts no process (else it belongs in test/system/)`);
    t.ok(folder === 'system' || folder === '' || concerns.has(folder), `${file}: test/${folder}/ names a folder of src/ (or packages/client)`);
  }
});
