// The folder rules of docs/architecture.md, checked on the imports of every file under src/.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from './harness/paths.ts';

const SRC = join(REPO_ROOT, 'src');
const DRIVERS = ['pg', 'node:sqlite', 'ioredis', 'src/store/sqlite.ts', 'src/store/postgres.ts', 'src/store/factory.ts', 'src/store/rows.ts', 'src/store/migrations.ts'];

/** What each folder must never import: packages by name, files by their path from the repository root. */
const FORBIDDEN: Record<string, (target: string) => boolean> = {
  http: (target) => /^src\/(plants|webhooks|store)\//.test(target),
  plants: (target) => DRIVERS.includes(target) || /^src\/webhooks\//.test(target),
  webhooks: (target) => DRIVERS.includes(target) || /^src\/plants\//.test(target),
  store: (target) => /^(fastify|@fastify\/|fastify-)/.test(target) || /^src\/(http|plants|webhooks|tokens)\//.test(target),
  tokens: (target) => /^(fastify|@fastify\/|fastify-)/.test(target) || /^src\/(http|plants|webhooks)\//.test(target),
  generated: () => true,
  // The client runs in other people's programs: nothing of the server, no Fastify, no driver.
  client: (target) =>
    /^(fastify|@fastify\/|fastify-)/.test(target) ||
    DRIVERS.includes(target) ||
    /^src\/(http|plants|webhooks|store|tokens)\//.test(target) ||
    ['src/app.ts', 'src/server.ts', 'src/config.ts'].includes(target),
};

/** The modules a source file imports (static, dynamic and type-only): packages by name, files from the repository root. */
function importsOf(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const specifiers = [...source.matchAll(/(?:from\s+|import\s*\(\s*|^import\s+)'([^']+)'/gm)].map((match) => match[1]!);
  return specifiers.map((specifier) => (specifier.startsWith('.') ? relative(REPO_ROOT, resolve(dirname(file), specifier)) : specifier));
}

t.test('each folder of src/ imports only what docs/architecture.md allows it', async (t) => {
  for (const [folder, forbidden] of Object.entries(FORBIDDEN)) {
    const files = readdirSync(join(SRC, folder)).filter((name) => name.endsWith('.ts'));
    t.ok(files.length > 0, `src/${folder} has files`);
    for (const name of files) {
      const offending = importsOf(join(SRC, folder, name)).filter(forbidden);
      t.same(offending, [], `src/${folder}/${name}`);
    }
  }
});

t.test('the import reader sees relative, package, dynamic and type-only imports', async (t) => {
  const file = join(SRC, 'plants', 'handlers.ts');
  const imports = importsOf(file);
  t.ok(imports.includes('src/store/types.ts'), 'a relative import, from the repository root');
  t.ok(imports.includes('src/http/errors.ts'));
  t.ok(importsOf(join(SRC, 'http', 'rate-limit.ts')).includes('ioredis'), 'a dynamic import');
  t.ok(FORBIDDEN.plants!('pg') && FORBIDDEN.store!('fastify') && FORBIDDEN.http!('src/plants/handlers.ts'), 'the rules bite');
});
