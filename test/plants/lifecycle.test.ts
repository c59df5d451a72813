// The plant lifecycle through a client generated from the contract: list with cursors, read
// with ETags, replace and delete with If-Match, and int64 ids above 2^53 everywhere.
import t from 'tap';
import { typedClient, type TypedClient } from '../harness/client.ts';
import { AUTH, build } from '../harness/helper.ts';

const ABOVE_2_53 = 9_007_199_254_740_993n;
const NEIGHBOUR = 9_007_199_254_740_992n;

async function createMany(client: TypedClient, plants: { id: bigint; name: string; tag?: string }[]): Promise<void> {
  const responses = await Promise.all(plants.map((body) => client.POST('/plants', { body })));
  for (const { response } of responses) if (response.status !== 200) throw new Error(`create answered ${response.status}`);
}

/** Follows Link rel="next" from the first page; answers every page's ids. */
async function walk(client: TypedClient, query: { limit?: number; tag?: string }): Promise<bigint[][]> {
  const pages: bigint[][] = [];
  let cursor: string | undefined;
  for (;;) {
    const { data, response } = await client.GET('/plants', { params: { query: { ...query, ...(cursor && { cursor }) } } });
    if (!data) throw new Error(`list answered ${response.status}`);
    pages.push(data.map((plant) => plant.id));
    const next = nextLink(response.headers.get('link'));
    if (!next) return pages;
    cursor = next.searchParams.get('cursor') ?? undefined;
  }
}

function nextLink(header: string | null): URL | undefined {
  const match = header && /^<([^>]+)>; rel="next"$/.exec(header);
  return match ? new URL(match[1]!, 'http://plants.test') : undefined;
}

t.test('GET /plants pages through every plant in id order with Link rel="next"', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  const empty = await client.GET('/plants');
  t.same(empty.data, [], 'an empty store lists []');
  t.equal(empty.response.headers.get('link'), null, 'and announces no next page');

  const ids = [-(2n ** 63n), -5n, 0n, 7n, NEIGHBOUR, ABOVE_2_53, 2n ** 63n - 1n];
  for (let id = 100n; id < 343n; id++) ids.push(id);
  await createMany(client, ids.map((id) => ({ id, name: `plant ${id}`, ...(id % 2n === 0n && { tag: 'even' }) })));
  const sorted = [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

  const pages = await walk(client, { limit: 100 });
  t.same(pages.map((page) => page.length), [100, 100, 50], 'pages of the requested size');
  t.same(pages.flat(), sorted, 'every plant once, ascending by id, int64 exact');

  const first = await client.GET('/plants', { params: { query: { limit: 2 } } });
  t.same(first.data, [
    { id: -(2n ** 63n), name: `plant ${-(2n ** 63n)}`, tag: 'even' },
    { id: -5n, name: 'plant -5' },
  ], 'items carry id, name, and tag when set');
  const next = nextLink(first.response.headers.get('link'))!;
  t.equal(next.pathname, '/plants');
  t.equal(next.searchParams.get('limit'), '2', 'the next page keeps the limit');

  const byDefault = await client.GET('/plants');
  t.equal(byDefault.data!.length, 100, 'the default limit is 100');
  t.ok(nextLink(byDefault.response.headers.get('link')), 'with a next page');
  const all = await client.GET('/plants', { params: { query: { limit: 1000 } } });
  t.equal(all.data!.length, ids.length, 'limit 1000 is allowed');
  t.equal(all.response.headers.get('link'), null, 'the last page announces nothing');
});

t.test('the tag filter combines with pagination', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  const plants = Array.from({ length: 150 }, (_, index) => ({
    id: BigInt(index * 3),
    name: `plant ${index}`,
    ...(index % 5 === 0 ? { tag: 'fern' } : index % 5 === 1 ? { tag: 'Fern' } : {}),
  }));
  await createMany(client, plants);
  const ferns = plants.filter((plant) => plant.tag === 'fern').map((plant) => plant.id);
  const pages = await walk(client, { limit: 7, tag: 'fern' });
  t.same(pages.flat(), ferns, 'exactly the plants tagged "fern" (case-sensitive), in order');
  t.equal(pages.length, Math.ceil(ferns.length / 7));
  const first = await client.GET('/plants', { params: { query: { limit: 7, tag: 'fern' } } });
  t.equal(nextLink(first.response.headers.get('link'))!.searchParams.get('tag'), 'fern', 'the next page keeps the filter');
  t.same((await client.GET('/plants', { params: { query: { tag: 'cactus' } } })).data, [], 'an unused tag lists nothing');
});

t.test('walking pages while others insert and delete: no duplicates, no stable plant skipped', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  const initial = Array.from({ length: 300 }, (_, index) => BigInt(index * 10));
  await createMany(client, initial.map((id) => ({ id, name: `plant ${id}` })));
  const deleted = new Set<bigint>();
  let writes = 0;
  // Each page is fetched while a delete of an initial plant and an insert between existing ids
  // are in flight, so every page boundary has writes racing it.
  const churn = async (step: number) => {
    const victim = initial[(step * 7) % initial.length]!;
    deleted.add(victim);
    await Promise.all([
      client.DELETE('/plants/{id}', { params: { path: { id: victim } } }),
      client.POST('/plants', { body: { id: BigInt(step * 10 + 5), name: `new ${step}` } }),
    ]);
    writes += 2;
  };
  const seen: bigint[] = [];
  let cursor: string | undefined;
  let step = 0;
  do {
    const writing = churn(step++);
    const { data, response } = await client.GET('/plants', { params: { query: { limit: 5, ...(cursor && { cursor }) } } });
    await writing;
    seen.push(...data!.map((plant) => plant.id));
    cursor = nextLink(response.headers.get('link'))?.searchParams.get('cursor') ?? undefined;
  } while (cursor);
  t.ok(writes >= 100, `writes raced the walk (${writes})`);
  t.equal(new Set(seen).size, seen.length, 'no plant twice');
  t.same(seen, [...seen].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)), 'ids strictly ascending');
  const stable = initial.filter((id) => !deleted.has(id));
  const seenSet = new Set(seen);
  t.same(stable.filter((id) => !seenSet.has(id)), [], `every plant that existed throughout was seen (${stable.length})`);
});

t.test('bad limit, tag and cursor values are 400 naming the parameter', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  await createMany(client, [{ id: 1n, name: 'a' }, { id: 2n, name: 'b' }]);
  const cases: [string, RegExp][] = [
    ['limit=0', /query parameter "limit" must be >= 1/],
    ['limit=1001', /query parameter "limit" must be <= 1000/],
    ['limit=-1', /query parameter "limit" must be >= 1/],
    ['limit=abc', /query parameter "limit" must be an integer/],
    ['limit=1.5', /query parameter "limit" must be an integer/],
    ['limit=1e2', /query parameter "limit" must be an integer/],
    ['limit=', /query parameter "limit" must be an integer/],
    ['limit=1&limit=2', /query parameter "limit" must be an integer/],
    ['tag=', /query parameter "tag" must NOT have fewer than 1 characters/],
    ['cursor=abc', /"cursor" is not a cursor this API gave out/],
    ['cursor=cDE6OTIyMzM3MjAzNjg1NDc3NTgwOA', /"cursor" is not a cursor this API gave out/], // p1:9223372036854775808
    ['cursor=cDE6MDE', /"cursor" is not a cursor this API gave out/], // p1:01
  ];
  for (const [query, message] of cases) {
    const response = await app.inject({ method: 'GET', url: `/plants?${query}`, headers: AUTH });
    t.equal(response.statusCode, 400, query);
    t.match(JSON.parse(response.body), { error: 400, message }, `${query}: ${message}`);
  }
  const { response } = await client.GET('/plants', { params: { query: { limit: 1 } } });
  const cursor = nextLink(response.headers.get('link'))!.searchParams.get('cursor')!;
  const tampered = await app.inject({ method: 'GET', url: `/plants?cursor=${cursor}x`, headers: AUTH });
  t.equal(tampered.statusCode, 400, 'a tampered cursor');
});

t.test('GET /plants/{id} answers the plant with a strong ETag; If-None-Match gives 304', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  await createMany(client, [{ id: 1n, name: 'Monstera', tag: 'aroid' }, { id: 2n, name: 'Fern' }]);
  const got = await client.GET('/plants/{id}', { params: { path: { id: 1n } } });
  t.equal(got.response.status, 200);
  t.same(got.data, { id: 1n, name: 'Monstera', tag: 'aroid' });
  const etag = got.response.headers.get('etag')!;
  t.match(etag, /^"[A-Za-z0-9_-]+"$/, 'a strong ETag');
  t.not((await client.GET('/plants/{id}', { params: { path: { id: 2n } } })).response.headers.get('etag'), etag, 'another plant, another ETag');

  for (const header of [etag, `"other", ${etag}`, `W/${etag}`, '*']) {
    const fresh = await client.GET('/plants/{id}', { params: { path: { id: 1n }, header: { 'If-None-Match': header } } });
    t.equal(fresh.response.status, 304, `If-None-Match: ${header}`);
    t.equal(fresh.response.headers.get('etag'), etag, '304 carries the ETag');
    t.equal(await fresh.response.text(), '', 'and no body');
  }
  const stale = await client.GET('/plants/{id}', { params: { path: { id: 1n }, header: { 'If-None-Match': '"stale"' } } });
  t.equal(stale.response.status, 200, 'a stale ETag gets the plant');
  const malformed = await client.GET('/plants/{id}', { params: { path: { id: 1n }, header: { 'If-None-Match': 'no-quotes' } } });
  t.equal(malformed.response.status, 400, 'a malformed If-None-Match is 400');
  t.match(malformed.error, { message: /If-None-Match header must be/ });
});

t.test('GET /plants/{id}: unknown ids are 404; non-integer and out-of-range ids are 400', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  const missing = await client.GET('/plants/{id}', { params: { path: { id: 42n } } });
  t.equal(missing.response.status, 404);
  t.same(missing.error, { error: 404n, message: 'There is no plant with id 42.' });
  for (const [id, message] of [
    ['abc', /path parameter "id" must be an integer/],
    ['1.5', /path parameter "id" must be an integer/],
    ['1e3', /path parameter "id" must be an integer/],
    ['9223372036854775808', /path parameter "id" must be <= 9223372036854775807/],
    ['-9223372036854775809', /path parameter "id" must be >= -9223372036854775808/],
  ] as const) {
    for (const method of ['GET', 'PUT', 'DELETE'] as const) {
      const response = await app.inject({
        method,
        url: `/plants/${id}`,
        headers: { ...AUTH, 'content-type': 'application/json' },
        ...(method === 'PUT' && { payload: '{"name":"x"}' }),
      });
      t.equal(response.statusCode, 400, `${method} /plants/${id}`);
      t.match(JSON.parse(response.body), { error: 400, message }, `${method} /plants/${id}: ${message}`);
    }
  }
});

t.test('PUT /plants/{id} replaces name and tag and answers the new ETag', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  await createMany(client, [{ id: 1n, name: 'Monstera', tag: 'aroid' }]);
  const before = (await client.GET('/plants/{id}', { params: { path: { id: 1n } } })).response.headers.get('etag')!;
  const replaced = await client.PUT('/plants/{id}', { params: { path: { id: 1n } }, body: { name: 'Monstera deliciosa' } });
  t.equal(replaced.response.status, 200);
  t.same(replaced.data, { id: 1n, name: 'Monstera deliciosa' }, 'a missing tag removes it');
  const etag = replaced.response.headers.get('etag')!;
  t.not(etag, before, 'the ETag changed with the content');
  const read = await client.GET('/plants/{id}', { params: { path: { id: 1n } } });
  t.same(read.data, { id: 1n, name: 'Monstera deliciosa' }, 'GET sees the replacement');
  t.equal(read.response.headers.get('etag'), etag, 'with the ETag PUT answered');
  const replay = await client.POST('/plants', { body: { id: 1n, name: 'Monstera', tag: 'aroid' } });
  t.equal(replay.response.status, 409, 'the old content is now a conflict for POST');
  const unknown = await client.PUT('/plants/{id}', { params: { path: { id: 2n } }, body: { name: 'x' } });
  t.equal(unknown.response.status, 404, 'PUT never creates');
  t.equal((await client.GET('/plants/{id}', { params: { path: { id: 2n } } })).response.status, 404, 'nothing was created');
});

t.test('the ETag names the version of the plant: new with every change, never one it had before', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  const etagOf = async () => (await client.GET('/plants/{id}', { params: { path: { id: ABOVE_2_53 } } })).response.headers.get('etag')!;
  await createMany(client, [{ id: ABOVE_2_53, name: 'Monstera', tag: 'aroid' }]);
  const seen = [await etagOf()];
  await createMany(client, [{ id: ABOVE_2_53, name: 'Monstera', tag: 'aroid' }]);
  t.equal(await etagOf(), seen[0], 'an identical create changes nothing, the ETag neither');
  for (const name of ['Monstera deliciosa', 'Monstera']) {
    const replaced = await client.PUT('/plants/{id}', { params: { path: { id: ABOVE_2_53 } }, body: { name, tag: 'aroid' } });
    const etag = replaced.response.headers.get('etag')!;
    t.notOk(seen.includes(etag), `replaced by ${name}: an ETag the plant never had, even for content it had before`);
    seen.push(etag);
  }
  const same = await client.PUT('/plants/{id}', { params: { path: { id: ABOVE_2_53 } }, body: { name: 'Monstera', tag: 'aroid' } });
  t.equal(same.response.headers.get('etag'), seen.at(-1), 'a replace with the same content keeps the ETag');

  t.equal((await client.DELETE('/plants/{id}', { params: { path: { id: ABOVE_2_53 } } })).response.status, 204);
  await createMany(client, [{ id: ABOVE_2_53, name: 'Monstera', tag: 'aroid' }]);
  const recreated = await etagOf();
  t.notOk(seen.includes(recreated), 'deleted and created again with the same content: a new ETag');
  const stale = await client.DELETE('/plants/{id}', { params: { path: { id: ABOVE_2_53 }, header: { 'If-Match': seen[0]! } } });
  t.equal(stale.response.status, 412, 'so an ETag from before the delete no longer matches');
});

t.test('PUT bodies are strict, as in POST', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  await createMany(client, [{ id: 1n, name: 'Monstera' }]);
  const cases: [string, RegExp][] = [
    ['{"name":"x","id":1}', /unknown field "id"/],
    ['{"name":"x","color":"green"}', /unknown field "color"/],
    ['{"name":5}', /field "name" must be string/],
    ['{"name":""}', /field "name" must NOT have fewer than 1 characters/],
    ['{"tag":"x"}', /missing the required field "name"/],
    ['{"name":"x","tag":null}', /field "tag" must be string/],
  ];
  for (const [body, message] of cases) {
    const response = await app.inject({
      method: 'PUT',
      url: '/plants/1',
      headers: { ...AUTH, 'content-type': 'application/json' },
      payload: body,
    });
    t.equal(response.statusCode, 400, body);
    t.match(JSON.parse(response.body), { error: 400, message }, `${body}: ${message}`);
  }
  t.same((await client.GET('/plants/{id}', { params: { path: { id: 1n } } })).data, { id: 1n, name: 'Monstera' }, 'unchanged');
});

t.test('If-Match: a stale ETag is 412 and nothing changes; the current one or * proceeds', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  await createMany(client, [{ id: 1n, name: 'Monstera', tag: 'aroid' }]);
  const original = (await client.GET('/plants/{id}', { params: { path: { id: 1n } } })).response.headers.get('etag')!;
  const first = await client.PUT('/plants/{id}', {
    params: { path: { id: 1n }, header: { 'If-Match': original } },
    body: { name: 'first writer' },
  });
  t.equal(first.response.status, 200, 'the current ETag proceeds');
  const current = first.response.headers.get('etag')!;

  const lost = await client.PUT('/plants/{id}', {
    params: { path: { id: 1n }, header: { 'If-Match': original } },
    body: { name: 'second writer' },
  });
  t.equal(lost.response.status, 412, 'the stale ETag is 412');
  t.match(lost.error, { error: 412n, message: /no longer matches If-Match/ });
  t.equal(lost.response.headers.get('etag'), current, '412 tells the current ETag');
  t.same((await client.GET('/plants/{id}', { params: { path: { id: 1n } } })).data, { id: 1n, name: 'first writer' }, 'nothing changed');

  const weak = await client.PUT('/plants/{id}', { params: { path: { id: 1n }, header: { 'If-Match': `W/${current}` } }, body: { name: 'w' } });
  t.equal(weak.response.status, 412, 'If-Match compares strongly: a weak ETag never matches');
  const any = await client.PUT('/plants/{id}', { params: { path: { id: 1n }, header: { 'If-Match': '*' } }, body: { name: 'any' } });
  t.equal(any.response.status, 200, '* matches an existing plant');
  const listed = await client.PUT('/plants/{id}', {
    params: { path: { id: 1n }, header: { 'If-Match': `"nope", ${any.response.headers.get('etag')}` } },
    body: { name: 'listed' },
  });
  t.equal(listed.response.status, 200, 'any ETag of a list may match');
  const missing = await client.PUT('/plants/{id}', { params: { path: { id: 9n }, header: { 'If-Match': '*' } }, body: { name: 'x' } });
  t.equal(missing.response.status, 404, 'an unknown id is 404 even with If-Match: *');
  const malformed = await client.PUT('/plants/{id}', { params: { path: { id: 1n }, header: { 'If-Match': 'abc' } }, body: { name: 'x' } });
  t.equal(malformed.response.status, 400, 'a malformed If-Match is 400');

  const staleDelete = await client.DELETE('/plants/{id}', { params: { path: { id: 1n }, header: { 'If-Match': original } } });
  t.equal(staleDelete.response.status, 412, 'DELETE honours If-Match');
  t.equal((await client.GET('/plants/{id}', { params: { path: { id: 1n } } })).response.status, 200, 'the plant is still there');
  const latest = (await client.GET('/plants/{id}', { params: { path: { id: 1n } } })).response.headers.get('etag')!;
  const deleted = await client.DELETE('/plants/{id}', { params: { path: { id: 1n }, header: { 'If-Match': latest } } });
  t.equal(deleted.response.status, 204, 'the current ETag deletes');
});

t.test('DELETE /plants/{id} answers 204 with an empty body; then the plant is gone', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  await createMany(client, [{ id: 1n, name: 'Monstera' }, { id: 2n, name: 'Fern' }]);
  const deleted = await client.DELETE('/plants/{id}', { params: { path: { id: 1n } } });
  t.equal(deleted.response.status, 204);
  t.equal(await deleted.response.text(), '', 'an empty body');
  t.equal((await client.GET('/plants/{id}', { params: { path: { id: 1n } } })).response.status, 404, 'GET is 404');
  const again = await client.DELETE('/plants/{id}', { params: { path: { id: 1n } } });
  t.equal(again.response.status, 404, 'deleting again is 404');
  t.same(again.error, { error: 404n, message: 'There is no plant with id 1.' });
  t.same((await client.GET('/plants')).data, [{ id: 2n, name: 'Fern' }], 'the other plant stays');
  t.equal((await client.POST('/plants', { body: { id: 1n, name: 'Cactus' } })).response.status, 200, 'the id can be used again');
  const labelled = await app.inject({ method: 'DELETE', url: '/plants/2', headers: { ...AUTH, 'content-type': 'application/json' } });
  t.equal(labelled.statusCode, 204, 'a body-less DELETE labelled application/json is fine');
});

t.test('ids above 2^53 round-trip exactly in every operation', async (t) => {
  const { app } = await build(t);
  const client = typedClient(t, app);
  await createMany(client, [{ id: ABOVE_2_53, name: 'above' }, { id: NEIGHBOUR, name: 'neighbour' }]);
  const raw = await app.inject({ method: 'GET', url: `/plants/${ABOVE_2_53}`, headers: AUTH });
  t.match(raw.body, /"id":9007199254740993[,}]/, 'the JSON number is written digit for digit');
  t.same((await client.GET('/plants/{id}', { params: { path: { id: ABOVE_2_53 } } })).data, { id: ABOVE_2_53, name: 'above' });
  const listed = await app.inject({ method: 'GET', url: '/plants', headers: AUTH });
  t.match(listed.body, /"id":9007199254740992[,}].*"id":9007199254740993[,}]/, 'the list writes both exactly, in order');
  t.same((await client.PUT('/plants/{id}', { params: { path: { id: ABOVE_2_53 } }, body: { name: 'renamed' } })).data, {
    id: ABOVE_2_53,
    name: 'renamed',
  });
  t.equal((await client.DELETE('/plants/{id}', { params: { path: { id: ABOVE_2_53 } } })).response.status, 204);
  t.same((await client.GET('/plants')).data, [{ id: NEIGHBOUR, name: 'neighbour' }], 'the neighbour one below is untouched');
  const { response } = await client.GET('/plants', { params: { query: { limit: 1 } } });
  t.equal(response.headers.get('link'), null);
  const max = 2n ** 63n - 1n;
  await createMany(client, [{ id: max, name: 'max' }, { id: max - 1n, name: 'max-1' }]);
  const lastPages = await walk(client, { limit: 1 });
  t.same(lastPages.flat(), [NEIGHBOUR, max - 1n, max], 'cursors reach the largest int64 exactly');
});

t.test('every lifecycle operation needs a token', async (t) => {
  const { app } = await build(t);
  for (const [method, url] of [['GET', '/plants'], ['GET', '/plants/1'], ['PUT', '/plants/1'], ['DELETE', '/plants/1']] as const) {
    const response = await app.inject({ method, url, headers: { 'content-type': 'application/json' }, payload: method === 'PUT' ? '{}' : undefined });
    t.equal(response.statusCode, 401, `${method} ${url}`);
    t.equal(response.headers['www-authenticate'], 'Bearer realm="plants"');
  }
});
