// The `sql` tag the store builds every statement with: values never become text, and each dialect's
// placeholders go only between the parts, so a `?` in a literal or PostgreSQL's jsonb `?` operator stays as written.
import t from 'tap';
import pg from 'pg';
import { DatabaseSync } from 'node:sqlite';
import { raw, sql } from '../../src/store/sql.ts';
import { freshSchemaUrl, postgresTestOptions } from '../harness/postgres.ts';

const tagged = (tag: string) => sql`tag = ${tag}`;
const statement = sql`SELECT '?' AS literal, ${'a value'} AS value, ${raw('1 + 1')} AS two WHERE ${tagged('fern?')} OR ${7} > 0`;

t.test('values stay apart from the text, in order, fragments and raw text included', async (t) => {
  t.same(statement.values, ['a value', 'fern?', 7]);
  t.equal(statement.sql, "SELECT '?' AS literal, ? AS value, 1 + 1 AS two WHERE tag = ? OR ? > 0");
  t.equal(statement.text, "SELECT '?' AS literal, $1 AS value, 1 + 1 AS two WHERE tag = $2 OR $3 > 0");
});

t.test('SQLite runs it as written: the literal keeps its ?', async (t) => {
  const db = new DatabaseSync(':memory:');
  t.teardown(() => db.close());
  const select = sql`SELECT '?' AS literal, ${'a value'} AS value, ${raw('1 + 1')} AS two`;
  t.same({ ...db.prepare(select.sql).get(...(select.values as string[])) }, { literal: '?', value: 'a value', two: 2 });
});

t.test('PostgreSQL runs it as written: the literal keeps its ?, the jsonb ? operator works', await postgresTestOptions(), async (t) => {
  const client = new pg.Client({ connectionString: await freshSchemaUrl() });
  await client.connect();
  t.teardown(() => client.end());
  const select = sql`SELECT '?' AS literal, ${'a value'}::text AS value, ${'{"fern": 1}'}::jsonb ? ${'fern'} AS has, ${'{}'}::jsonb ? 'fern' AS empty`;
  const { rows } = await client.query({ text: select.text, values: select.values });
  t.same(rows, [{ literal: '?', value: 'a value', has: true, empty: false }]);
});
