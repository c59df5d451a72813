// The HTTP suites again, with build() opening PostgreSQL stores instead of SQLite files.
// (The SQLite-only checks, on files, crashes and closed stores, stay in their own files.)
import t from 'tap';
import { postgresTestOptions } from './postgres.ts';

const options = await postgresTestOptions();
if (options.skip) {
  t.test('the HTTP suites on PostgreSQL', options, () => undefined);
} else {
  process.env.PLANT_STORE_TEST_DRIVER = 'postgres';
  await import('./create-plant.test.ts');
  await import('./lifecycle.test.ts');
  await import('./auth.test.ts');
  await import('./docs.test.ts');
  await import('./text-input.test.ts');
  await import('./webhook-pages.test.ts');
}
