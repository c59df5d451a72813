// `npm run store` as a process: bad input and refused targets get one line on stderr naming what to fix (never a
// password, never a stack) and exit 1, leaving the source and the target as they were; a wrong command line exits 2.
import t from 'tap';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { copyStore } from '../../src/store/copy.ts';
import { openStore } from '../../src/store/factory.ts';
import { databaseUrl, freshDatabase, postgresTestOptions, withClient } from '../harness/postgres.ts';
import { runScript } from '../harness/process.ts';

t.test('copy refusals: one line naming what to fix, never a password or a stack; the target untouched', await postgresTestOptions(), async (t) => {
  const dir = t.testdir();
  const from = `sqlite:${join(dir, 'shop.db')}`;
  const store = await openStore(from);
  await store.plants.createPlant({ id: 1n, name: 'kept' });
  await store.close();
  const newer = join(dir, 'newer.db');
  await (await openStore(`sqlite:${newer}`)).close();
  new DatabaseSync(newer).exec("INSERT INTO schema_migrations VALUES (99, 'from the future', '2030-01-01T00:00:00.000Z')");
  const full = databaseUrl(await freshDatabase(t, 'store_cli'));
  await copyStore(from, full, () => undefined);
  const withPassword = (url: string) => url.replace('//root@', '//root:s3cret-pw@');
  const cases: [string[], RegExp][] = [
    [['mysql://root:s3cret-pw@db/shop', `sqlite:${join(dir, 'x.db')}`], /^The source URL must look like sqlite:<path> or postgres:\/\/.*; got a "mysql:" URL\.$/],
    [[from, 'postgres://root:s3cret-pw@127.0.0.1:1/shop'], /^The target database shop at 127\.0\.0\.1:1 cannot be reached \(connect ECONNREFUSED 127\.0\.0\.1:1\): start it, or fix the host and port in the URL\.$/],
    [[`sqlite:${join(dir, 'missing.db')}`, `sqlite:${join(dir, 'x.db')}`], /^The source sqlite:.*missing\.db does not exist: check the path\.$/],
    [['sqlite:', `sqlite:${join(dir, 'x.db')}`], /^The source URL sqlite: needs a file path, for example sqlite:\.\/data\/plants\.db\.$/],
    [[from, 'sqlite:/proc/x.db'], /^The target sqlite:\/proc\/x\.db cannot be opened: it is under \/proc, which holds no real files: .*\.$/],
    [[withPassword(full).replace(/\/store_cli\w+$/, '/store_cli_nowhere'), `sqlite:${join(dir, 'x.db')}`], /^The source database store_cli_nowhere at 127\.0\.0\.1:5432 does not exist: check the database name\.$/],
    [[`sqlite:${newer}`, `sqlite:${join(dir, 'x.db')}`], /^The source sqlite:.*newer\.db is at schema version 99, newer than this code knows \(8\): run the command from the release that wrote it, or a later one\.$/],
    [[from, `sqlite:${dir}/./shop.db`], /^The source and the target are the same database: give a new file or an empty database as the target\.$/],
    [[withPassword(full), full.replace('127.0.0.1', 'localhost')], /^The source and the target are the same database: give a new, empty database as the target\.$/],
    [[from, withPassword(full)], /^The target database store_cli\w+ at 127\.0\.0\.1:5432 holds data \(table plants\): the target must be new or empty; it was left untouched\.$/],
  ];
  const bytes = readFileSync(join(dir, 'shop.db'));
  for (const [args, said] of cases) {
    const run = await runScript(t, 'scripts/store.ts', ['copy', ...args], {});
    t.equal(run.code, 1, `copy ${args.join(' ')}: exit 1`);
    t.match(run.stderr.trimEnd(), said, 'names what to fix');
    t.equal(run.stderr.trimEnd().split('\n').length, 1, 'in one line');
    t.notMatch(run.stderr + run.stdout, /s3cret-pw|\n\s+at /, 'never the password, never a stack');
  }
  t.same(readFileSync(join(dir, 'shop.db')), bytes, 'the source file is unchanged (read-only)');
  t.notOk(statSync(join(dir, 'x.db'), { throwIfNoEntry: false }), 'no target file was left behind');
  const plants = await withClient(full, async (client) => (await client.query('SELECT count(*)::int AS n FROM plants')).rows[0].n);
  t.equal(plants, 1, 'the target holding data was left as it was');
  const usage = await runScript(t, 'scripts/store.ts', ['copy', from], {});
  t.same([usage.code, usage.stderr.split('\n')[0]], [2, 'copy: wrong command or arguments.'], 'a wrong command line exits 2 with the usage');
});
