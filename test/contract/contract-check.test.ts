// test/harness/contract.ts, the check every test runs on every answer, checked itself: an answer is as
// openapi.yaml documents it only when its response declares every header it sends (message framing
// aside) and it sends every header its response marks required.
import t from 'tap';
import { contractProblems, type ResponseLike } from '../harness/contract.ts';

const FRAMING = { date: 'Sat, 01 Jan 2026 00:00:00 GMT', connection: 'keep-alive', 'keep-alive': 'timeout=72', 'content-length': '15' };
const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };

const health: ResponseLike = { statusCode: 200, headers: { ...FRAMING, ...JSON_TYPE, 'x-request-id': 'check-1' }, body: '{"status":"ok"}' };
const refusal: ResponseLike = {
  statusCode: 401,
  headers: { ...JSON_TYPE, 'x-request-id': 'check-2', 'www-authenticate': 'Bearer realm="plants"' },
  body: '{"error":401,"message":"A valid bearer token is required."}',
};
const plant: ResponseLike = { statusCode: 200, headers: { ...JSON_TYPE, 'x-request-id': 'check-3', etag: '"a"' }, body: '{"id":1,"name":"Monstera"}' };

function without(response: ResponseLike, name: string): ResponseLike {
  const { [name]: _dropped, ...headers } = response.headers;
  return { ...response, headers };
}

function withHeaders(response: ResponseLike, headers: Record<string, string>): ResponseLike {
  return { ...response, headers: { ...response.headers, ...headers } };
}

t.test('an answer with exactly its declared headers, and the framing any answer has, is documented', async (t) => {
  t.same(contractProblems('GET', '/healthz', health), []);
  t.same(contractProblems('GET', '/plants', refusal), []);
  t.same(contractProblems('GET', '/plants/1', plant), []);
  t.same(contractProblems('GET', '/healthz', withHeaders(without(health, 'x-request-id'), { 'X-Request-Id': 'check-4' })), [], 'names in any case');
  const cors = { vary: 'Origin', 'access-control-allow-origin': 'https://app.plants.test', 'access-control-expose-headers': 'X-Request-Id' };
  t.same(contractProblems('GET', '/plants/1', withHeaders(plant, cors)), [], 'with the CORS headers the response declares');
});

t.test('a header the response does not declare is a problem, even one declared on other responses', async (t) => {
  t.same(contractProblems('GET', '/healthz', withHeaders(health, { 'x-powered-by': 'Fastify' })), [
    'GET /healthz 200 sent the header x-powered-by, which openapi.yaml does not declare on this response',
  ]);
  // A single plant is never compressed; the page of plants declares both.
  t.same(contractProblems('GET', '/plants/1', withHeaders(plant, { 'content-encoding': 'gzip', link: '</plants?cursor=x>; rel="next"' })), [
    'GET /plants/{id} 200 sent the header content-encoding, which openapi.yaml does not declare on this response',
    'GET /plants/{id} 200 sent the header link, which openapi.yaml does not declare on this response',
  ]);
  t.same(contractProblems('GET', '/healthz', withHeaders(health, { 'x-ratelimit-limit': '10' })), [
    'GET /healthz 200 sent the header x-ratelimit-limit, which openapi.yaml does not declare on this response',
  ], 'the health checks are never rate limited');
});

t.test('a required header missing is a problem', async (t) => {
  t.same(contractProblems('GET', '/healthz', without(health, 'x-request-id')), [
    'GET /healthz 200 lacks the header x-request-id, which openapi.yaml declares required on this response',
  ]);
  t.same(contractProblems('GET', '/plants', without(refusal, 'www-authenticate')), [
    'GET /plants 401 lacks the header www-authenticate, which openapi.yaml declares required on this response',
  ]);
  t.same(contractProblems('GET', '/plants/1', without(plant, 'etag')), [
    'GET /plants/{id} 200 lacks the header etag, which openapi.yaml declares required on this response',
  ]);
  const connect: ResponseLike = { statusCode: 405, headers: { ...JSON_TYPE, 'x-request-id': 'check-5' }, body: '{"error":405,"message":"Not a proxy."}' };
  t.same(contractProblems('CONNECT', '/', connect), [
    'CONNECT / 405 lacks the header allow, which openapi.yaml declares required on this response',
  ], 'on the transport answers too');
});
