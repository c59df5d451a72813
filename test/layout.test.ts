// The folder rules of docs/architecture.md, checked on the imports of every file under src/.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from './harness/paths.ts';

const SRC = join(REPO_ROOT, 'src');
const DRIVERS = ['pg', 'node:sqlite', 'ioredis', 'src/store/sqlite.ts', 'src/store/postgres.ts', 'src/store/factory.ts', 'src/store/migrations.ts'];
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
  // The redaction finds issued tokens by their shape.
  observability: { may: ['src/contract/', 'src/config.ts', 'src/tokens/format.ts'] },
  transport: { may: ['src/contract/', 'src/config.ts'] },
  docs: { may: ['src/contract/', 'src/transport/compression.ts'] },
  // Plants and webhooks see storage only through its interface, never a driver.
  plants: { may: ['src/contract/', 'src/store/types.ts', 'src/generated/'], never: (name) => DRIVERS.includes(name) },
  // The types of a traced delivery attempt (tracing.ts itself loads only when tracing is on).
  webhooks: { may: ['src/contract/', 'src/store/types.ts', 'src/generated/', 'src/observability/tracing.ts'], never: (name) => DRIVERS.includes(name) },
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

t.test('every file the rules name exists', async (t) => {
  const named = [...DRIVERS, ...LEAVES, ...Object.values(RULES).flatMap((rule) => rule.may)].filter((entry) => entry.startsWith('src/') && !entry.endsWith('/'));
  t.same(named.filter((file) => !existsSync(join(REPO_ROOT, file))), [], 'no rule names a file that is gone');
});

t.test('every file eslint ignores by name exists', async (t) => {
  // Read as text: loading the config loads every lint plugin, seconds of a quick run.
  const ignores = /ignores: \[([^\]]*)\]/.exec(readFileSync(join(REPO_ROOT, 'eslint.config.js'), 'utf8'))?.[1] ?? '';
  const files = [...ignores.matchAll(/'([^']+)'/g)].map((match) => match[1]!).filter((entry) => !entry.endsWith('/') && !entry.includes('*'));
  t.ok(files.length > 0, 'eslint ignores files by name');
  t.same(files.filter((file) => !existsSync(join(REPO_ROOT, file))), [], 'no ignore names a file that is gone');
});

t.test('each exported type of src/ is declared in one file, and imported where it is needed', async (t) => {
  const declared = new Map<string, string[]>();
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts') && !name.startsWith('generated'));
  for (const file of files) {
    for (const match of readFileSync(join(SRC, file), 'utf8').matchAll(/^export (?:interface|type) (\w+)/gm)) {
      declared.set(match[1]!, [...(declared.get(match[1]!) ?? []), file]);
    }
  }
  t.ok(declared.has('TraceAttempt'), 'the reader finds exported types');
  t.same([...declared].filter(([, where]) => where.length > 1), [], 'no type is declared twice');
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

/** The node of the folder graph a file of src/ belongs to: its folder, or the file itself at the top. */
function nodeOf(target: string): string {
  const [, first, rest] = /^src\/([^/]+)(\/.*)?$/.exec(target) ?? [];
  return rest === undefined ? `src/${first}` : `src/${first}/`;
}

/** The first cycle in a graph of nodes, as the path around it; undefined when there is none. */
function firstCycle(graph: Map<string, Set<string>>): string[] | undefined {
  const done = new Set<string>();
  const visit = (node: string, path: string[]): string[] | undefined => {
    if (path.includes(node)) return [...path.slice(path.indexOf(node)), node];
    if (done.has(node)) return undefined;
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next, [...path, node]);
      if (cycle) return cycle;
    }
    done.add(node);
    return undefined;
  };
  for (const node of graph.keys()) {
    const cycle = visit(node, []);
    if (cycle) return cycle;
  }
  return undefined;
}

t.test('no cycle between the folders (and top-level files) of src/', async (t) => {
  const graph = new Map<string, Set<string>>();
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((name) => /\.(ts|js)$/.test(name) && !name.startsWith('generated/'));
  for (const name of files) {
    const from = nodeOf(`src/${name}`);
    for (const target of importsOf(join(SRC, name)).filter((target) => target.startsWith('src/'))) {
      const to = nodeOf(target);
      if (to !== from) graph.set(from, (graph.get(from) ?? new Set()).add(to));
    }
  }
  t.ok(graph.get('src/app.ts')?.has('src/contract/'), 'the graph sees src/app.ts import the contract');
  t.equal(firstCycle(graph)?.join(' -> '), undefined);
  t.same(firstCycle(new Map([['a/', new Set(['b/'])], ['b/', new Set(['c.ts'])], ['c.ts', new Set(['a/'])]])), ['a/', 'b/', 'c.ts', 'a/'], 'a cycle is found');
});

t.test("contract/ reads no decorator of the plugins above it: src/app.ts passes what routes need", async (t) => {
  for (const name of readdirSync(join(SRC, 'contract'))) {
    t.notMatch(readFileSync(join(SRC, 'contract', name), 'utf8'), /\.(shedding|compressionFor|bearerAuth|lifecycle|observability)\b/, `src/contract/${name}`);
  }
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
