// Contract details a client or a contract-test generator trips over: list syntax in conditional
// headers, headers on errors, rate-limit headers documented where sent, path parameter examples,
// and what a hand-made cursor does.
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { SPEC_PATH } from '../../src/spec-path.ts';
import { AUTH, api, build, createPlant } from '../harness/helper.ts';
import { rawExchange } from '../harness/raw-http.ts';

const JSON_AUTH = { ...AUTH, 'content-type': 'application/json' };

async function plantWithEtag(t: Test, app: FastifyInstance): Promise<string> {
  t.equal((await createPlant(t, app, '{"id":1,"name":"Monstera"}')).statusCode, 200);
  return (await api(t, app, { method: 'GET', url: '/plants/1', headers: AUTH })).headers.etag as string;
}

t.test('If-None-Match follows RFC 9110 list syntax: empty elements are ignored, an empty list matches nothing', async (t) => {
  const { app } = await build(t);
  const etag = await plantWithEtag(t, app);
  const cases: [string, number][] = [
    ['"x",', 200],
    [`${etag},`, 304],
    [`, ${etag}`, 304],
    [`"x" , ,${etag}`, 304],
    ['', 200],
    [' , ', 200],
  ];
  for (const [header, status] of cases) {
    const response = await api(t, app, { method: 'GET', url: '/plants/1', headers: { ...AUTH, 'if-none-match': header } });
    t.equal(response.statusCode, status, `If-None-Match: ${header}`);
  }
  for (const header of ['no-quotes', '"a" "b"', '*, "a"', `${etag};`]) {
    const response = await api(t, app, { method: 'GET', url: '/plants/1', headers: { ...AUTH, 'if-none-match': header } });
    t.equal(response.statusCode, 400, `If-None-Match: ${header} is still malformed`);
  }
});

t.test('an empty If-None-Match field line on the wire is an empty list, not a malformed header', async (t) => {
  const { app } = await build(t);
  await plantWithEtag(t, app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as { port: number };
  const answer = await rawExchange(port, `GET /plants/1 HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nIf-None-Match:\r\nConnection: close\r\n\r\n`);
  t.match(answer, /^HTTP\/1\.1 200 /);
});

t.test('If-Match follows RFC 9110 list syntax; an empty list matches no ETag', async (t) => {
  const { app } = await build(t);
  let etag = await plantWithEtag(t, app);
  const lists = [(tag: string) => `${tag},`, (tag: string) => ` ,${tag}`, (tag: string) => `"x", ,${tag}, `];
  for (const [index, list] of lists.entries()) {
    const header = list(etag);
    const replaced = await api(t, app, {
      method: 'PUT',
      url: '/plants/1',
      headers: { ...JSON_AUTH, 'if-match': header },
      payload: `{"name":"version ${index}"}`,
    });
    t.equal(replaced.statusCode, 200, `If-Match: ${header}`);
    etag = replaced.headers.etag as string;
  }
  for (const header of ['', ',']) {
    const refused = await api(t, app, { method: 'DELETE', url: '/plants/1', headers: { ...AUTH, 'if-match': header } });
    t.equal(refused.statusCode, 412, `If-Match: "${header}" names no ETag, so none matches`);
  }
  const malformed = await api(t, app, { method: 'DELETE', url: '/plants/1', headers: { ...AUTH, 'if-match': `${etag} x` } });
  t.equal(malformed.statusCode, 400, 'a malformed element is still 400');
});

t.test('an error answer carries no ETag', async (t) => {
  const { app } = await build(t);
  await plantWithEtag(t, app);
  const response = await api(t, app, { method: 'GET', url: '/plants/1', headers: { ...AUTH, 'if-none-match': 'no-quotes' } });
  t.equal(response.statusCode, 400);
  t.equal(response.headers.etag, undefined, 'the ETag of a plant the client did not get is not sent');
});

t.test('with RATE_LIMIT_PER_MINUTE, X-RateLimit-* come on every authenticated answer, and openapi.yaml documents them there', async (t) => {
  const { app } = await build(t, { RATE_LIMIT_PER_MINUTE: 1000, WEBHOOK_ALLOW_PRIVATE_NETWORKS: true });
  const requests = [
    { method: 'POST', url: '/plants', headers: JSON_AUTH, payload: '{"id":1,"name":"a"}' }, // 200
    { method: 'POST', url: '/plants', headers: JSON_AUTH, payload: '{"id":1,"name":"b"}' }, // 409
    { method: 'POST', url: '/plants', headers: JSON_AUTH, payload: '{"id":2}' }, // 400
    { method: 'POST', url: '/plants', headers: { ...AUTH, 'content-type': 'text/plain' }, payload: 'x' }, // 415
    { method: 'POST', url: '/plants', headers: JSON_AUTH, payload: `{"id":3,"name":"${'x'.repeat(70_000)}"}` }, // 413
    { method: 'GET', url: '/plants?limit=1', headers: AUTH },
    { method: 'GET', url: '/plants/1', headers: AUTH },
    { method: 'GET', url: '/plants/1', headers: { ...AUTH, 'if-none-match': '*' } }, // 304
    { method: 'GET', url: '/plants/2', headers: AUTH }, // 404
    { method: 'PUT', url: '/plants/1', headers: { ...JSON_AUTH, 'if-match': '"stale"' }, payload: '{"name":"c"}' }, // 412
    { method: 'PUT', url: '/plants/1', headers: JSON_AUTH, payload: '{"name":"c"}' },
    { method: 'DELETE', url: '/plants/1', headers: AUTH }, // 204
    { method: 'POST', url: '/webhooks', headers: JSON_AUTH, payload: '{"url":"http://127.0.0.1:9/hooks"}' }, // 201
    { method: 'GET', url: '/webhooks', headers: AUTH },
    { method: 'GET', url: '/webhooks/1/deliveries', headers: AUTH },
    { method: 'GET', url: '/webhooks/9/deliveries', headers: AUTH }, // 404
    { method: 'DELETE', url: '/webhooks/1', headers: AUTH }, // 204
  ] as const;
  const statuses = new Set<number>();
  for (const request of requests) {
    const response = await api(t, app, { ...request });
    statuses.add(response.statusCode);
    t.ok(response.headers['x-ratelimit-remaining'] !== undefined, `${request.method} ${request.url} ${response.statusCode} carries X-RateLimit-*`);
  }
  t.same([...statuses].sort(), [200, 201, 204, 304, 400, 404, 409, 412, 413, 415]);
});

// Parsed with exact integers: an example above 2^53 must not be rounded on the way.
const exactSpec = parseYaml(readFileSync(SPEC_PATH, 'utf8'), { intAsBigInt: true });

interface Parameter {
  in: string;
  name: string;
  example: bigint;
  schema: { examples?: bigint[] };
}
type Ref = { $ref: string };
type ParameterOwner = { parameters?: (Parameter | Ref)[] };

function resolve(node: Parameter | Ref): Parameter {
  if (!('$ref' in node)) return node;
  return node.$ref.slice(2).split('/').reduce<unknown>((at, key) => (at as Record<string, unknown>)[key], exactSpec) as Parameter;
}

t.test('every path parameter has a positive example; one is above 2^53', async (t) => {
  const examples: bigint[] = [];
  for (const [path, item] of Object.entries<ParameterOwner>(exactSpec.paths)) {
    const operations = Object.values(item as Record<string, unknown>).filter(
      (value): value is ParameterOwner => typeof value === 'object' && value !== null && 'responses' in value,
    );
    for (const owner of [item, ...operations]) {
      for (const parameter of (owner.parameters ?? []).map(resolve).filter((p) => p.in === 'path')) {
        t.type(parameter.example, 'bigint', `${path} {${parameter.name}} has an example`);
        t.ok(parameter.example > 0n, `${path} {${parameter.name}}: the example is a positive id`);
        examples.push(parameter.example, ...(parameter.schema.examples ?? []));
      }
    }
  }
  t.ok(examples.length >= 2, 'the id and webhookId parameters were found');
  t.ok(examples.some((example) => example > 2n ** 53n && example <= 2n ** 63n - 1n), 'an int64 example above 2^53 shows the range is exact');
});

t.test('a cursor is an opaque position: a well-formed hand-made one is honoured, a malformed one is 400', async (t) => {
  const { app } = await build(t);
  for (const id of [99, 100, 101, 102]) await createPlant(t, app, `{"id":${id},"name":"p${id}"}`);
  const handMade = Buffer.from('p1:100').toString('base64url');
  const page = await api(t, app, { method: 'GET', url: `/plants?cursor=${handMade}`, headers: AUTH });
  t.equal(page.statusCode, 200);
  t.same((page.json() as { id: bigint }[]).map((plant) => plant.id), [101n, 102n], 'the plants after id 100');
  for (const cursor of [`${handMade}x`, Buffer.from('p1:1x').toString('base64url'), Buffer.from('p9:100').toString('base64url')]) {
    const refused = await api(t, app, { method: 'GET', url: `/plants?cursor=${cursor}`, headers: AUTH });
    t.equal(refused.statusCode, 400, `cursor ${cursor}`);
  }
});

t.test('pages write every int64 id digit for digit on both sides of ±2^53, and their cursors walk across', async (t) => {
  const { app } = await build(t);
  // In id order; the store reads ids within ±(2^53 - 1) as numbers and the others as BigInt.
  const ids = [
    '-9223372036854775808',
    '-9007199254740993',
    '-9007199254740992',
    '-9007199254740991',
    '-1',
    '0',
    '9007199254740991',
    '9007199254740992',
    '9007199254740993',
    '9223372036854775807',
  ];
  for (const id of [...ids].reverse()) t.equal((await createPlant(t, app, `{"id":${id},"name":"plant ${id}"}`)).statusCode, 200);
  const whole = await api(t, app, { method: 'GET', url: '/plants', headers: AUTH });
  t.equal(whole.body, `[${ids.map((id) => `{"id":${id},"name":"plant ${id}"}`).join(',')}]`, 'one page, byte for byte');
  const walked: string[] = [];
  let url: string | undefined = '/plants?limit=3';
  while (url !== undefined) {
    const page = await api(t, app, { method: 'GET', url, headers: AUTH });
    walked.push(...[...page.body.matchAll(/"id":(-?\d+)/g)].map((match) => match[1]!));
    url = /^<([^>]+)>; rel="next"$/.exec(String(page.headers.link ?? ''))?.[1];
  }
  t.strictSame(walked, ids, 'pages of 3 through the Link header: every id once, in order');
});
