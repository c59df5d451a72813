// The HTTP suites again, with build() opening PostgreSQL stores instead of SQLite files.
// (The SQLite-only checks, on files, crashes and closed stores, stay in their own files.)
import t from 'tap';
import { postgresTestOptions } from './harness/postgres.ts';

const options = await postgresTestOptions();
if (options.skip) {
  t.test('the HTTP suites on PostgreSQL', options, () => undefined);
} else {
  process.env.PLANT_STORE_TEST_DRIVER = 'postgres';
  await import('./plants/create-plant.test.ts');
  await import('./plants/lifecycle.test.ts');
  await import('./security/auth.test.ts');
  await import('./docs/docs.test.ts');
  await import('./contract/text-input.test.ts');
  await import('./webhooks/webhook-pages.test.ts');
}
