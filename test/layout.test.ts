// The folder rules of docs/architecture.md, checked on the imports of every file under src/.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from './harness/paths.ts';

const SRC = join(REPO_ROOT, 'src');
const DRIVERS = ['pg', 'node:sqlite', 'ioredis', 'src/store/sqlite.ts', 'src/store/postgres.ts', 'src/store/factory.ts', 'src/store/rows.ts', 'src/store/migrations.ts'];
const FASTIFY = /^(fastify|@fastify\/|fastify-)/;
/** Small leaf modules any folder may use. */
const LEAVES = ['src/int64.ts', 'src/duration.ts', 'src/spec-path.ts'];

interface Rule {
  /** The files under src/ it may import besides its own folder's and the leaves: a folder ends with '/'. */
  may: string[];
  /** Packages it must never import. */
  never?: (name: string) => boolean;
}

/** What each folder of src/ may import. */
const RULES: Record<string, Rule> = {
  generated: { may: [], never: () => true },
  // The cross-cutting folders know nothing of plants: no plants/, webhooks/ or store/.
  contract: { may: ['src/generated/'] },
  security: { may: ['src/contract/', 'src/tokens/verifier.ts'] },
  observability: { may: ['src/contract/', 'src/config.ts'] },
  transport: { may: ['src/contract/', 'src/config.ts'] },
  docs: { may: ['src/contract/', 'src/transport/compression-stored.ts'] },
  // Plants and webhooks see storage only through its interface, never a driver.
  plants: { may: ['src/contract/', 'src/store/types.ts', 'src/generated/'], never: (name) => DRIVERS.includes(name) },
  webhooks: { may: ['src/contract/', 'src/store/types.ts', 'src/generated/'], never: (name) => DRIVERS.includes(name) },
  store: { may: ['src/generated/', 'src/config.ts'], never: (name) => FASTIFY.test(name) },
  tokens: { may: ['src/store/types.ts'], never: (name) => FASTIFY.test(name) },
};

/** The modules a source file imports (static, dynamic and type-only): packages by name, files from the repository root. */
function importsOf(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const specifiers = [...source.matchAll(/(?:from\s+|import\s*\(\s*|^import\s+)'([^']+)'/gm)].map((match) => match[1]!);
  return specifiers.map((specifier) => (specifier.startsWith('.') ? relative(REPO_ROOT, resolve(dirname(file), specifier)) : specifier));
}

/** Whether `folder` may import `target` under RULES. */
function allowed(folder: string, target: string): boolean {
  const rule = RULES[folder]!;
  if (!target.startsWith('src/')) return !rule.never?.(target);
  if (rule.never?.(target)) return false;
  const may = [`src/${folder}/`, ...LEAVES, ...rule.may];
  return may.some((entry) => (entry.endsWith('/') ? target.startsWith(entry) : target === entry));
}

t.test('every folder of src/ has a rule', async (t) => {
  const folders = readdirSync(SRC, { withFileTypes: true }).filter((entry) => entry.isDirectory() && entry.name !== 'types').map((entry) => entry.name);
  t.same(folders.filter((folder) => !(folder in RULES)), [], 'a new folder says what it may import here and in docs/architecture.md');
});

t.test('each folder of src/ imports only what docs/architecture.md allows it', async (t) => {
  for (const folder of Object.keys(RULES)) {
    const files = readdirSync(join(SRC, folder)).filter((name) => name.endsWith('.ts'));
    t.ok(files.length > 0, `src/${folder} has files`);
    for (const name of files) {
      const offending = importsOf(join(SRC, folder, name)).filter((target) => !allowed(folder, target));
      t.same(offending, [], `src/${folder}/${name}`);
    }
  }
});

t.test('the import reader sees relative, package, dynamic and type-only imports', async (t) => {
  const file = join(SRC, 'plants', 'handlers.ts');
  const imports = importsOf(file);
  t.ok(imports.includes('src/store/types.ts'), 'a relative import, from the repository root');
  t.ok(imports.includes('src/contract/errors.ts'));
  t.ok(importsOf(join(SRC, 'security', 'rate-limit.ts')).includes('ioredis'), 'a dynamic import');
});

t.test('the rules bite', async (t) => {
  t.notOk(allowed('plants', 'pg'), 'plants/ never imports a driver');
  t.notOk(allowed('plants', 'src/store/sqlite.ts'));
  t.notOk(allowed('store', 'fastify'), 'store/ never imports Fastify');
  t.notOk(allowed('security', 'src/plants/handlers.ts'), 'a cross-cutting folder knows nothing of plants');
  t.notOk(allowed('observability', 'src/store/types.ts'));
  t.ok(allowed('plants', 'src/contract/errors.ts') && allowed('security', 'src/tokens/verifier.ts'));
});

// The client package runs in other people's programs: its own files and its one JSON parser, nothing else.
const CLIENT = join(REPO_ROOT, 'packages', 'client');
const CLIENT_PACKAGES = ['lossless-json'];

t.test('packages/client imports nothing but its own files and its declared dependencies', async (t) => {
  const manifest = JSON.parse(readFileSync(join(CLIENT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  t.same(Object.keys(manifest.dependencies ?? {}), CLIENT_PACKAGES, 'no server dependency ships with the client');
  const files = readdirSync(join(CLIENT, 'src')).filter((name) => name.endsWith('.ts'));
  t.ok(files.includes('index.ts'), 'packages/client/src has its files');
  for (const name of files) {
    const offending = importsOf(join(CLIENT, 'src', name)).filter((target) => !target.startsWith('packages/client/src/') && !CLIENT_PACKAGES.includes(target));
    t.same(offending, [], `packages/client/src/${name}`);
  }
});
