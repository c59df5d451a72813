// Checks a response against openapi.yaml: the status must be documented for the operation, the
// headers the contract speaks of must be documented on that response, the content type must be
// one it declares, and the body must match that response's schema.
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { Test } from 'tap';
import { parse as parseYaml } from 'yaml';
import { SPEC_PATH } from '../src/app.ts';
import { exactIntegerKeyword, withExactIntegers } from '../src/contract/integers.ts';
import { parseJson } from '../src/contract/json.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed YAML or JSON walked by key: its shape is what this code checks
type Json = Record<string, any>;

export const spec: Json = parseYaml(readFileSync(SPEC_PATH, 'utf8'));
const TRANSPORT_RESPONSES: Json = spec['x-transport-responses'] ?? {};

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);
ajv.addKeyword(exactIntegerKeyword);
// Response bodies are parsed with the service's own int64-exact parser, so integers are BigInt.
ajv.addSchema(withExactIntegers(spec, 'json'), 'openapi');

export interface ResponseLike {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
}

/** Every problem with the response, empty when it is exactly what the contract documents. */
export function contractProblems(method: string, url: string, response: ResponseLike): string[] {
  const found = findOperation(method, url);
  const status = String(response.statusCode);
  // Answers to what is no operation (not HTTP, an unknown route, CONNECT) are documented once, at the root.
  if (!found && !(status in TRANSPORT_RESPONSES)) return [`${method} ${url} is not an operation of openapi.yaml`];
  const path = found?.path ?? url;
  const responses: Json = found?.operation.responses ?? TRANSPORT_RESPONSES;
  if (!(status in responses) && !('default' in responses)) {
    return [`${method} ${path} answered ${status}, which openapi.yaml does not document`];
  }
  const key = status in responses ? status : 'default';
  const at = found ? `#/paths/${escape(path)}/${method.toLowerCase()}/responses/${key}` : `#/x-transport-responses/${key}`;
  const [documented, pointer] = resolveResponse(responses[key], at);
  const headerProblems = undocumentedHeaders(documented, response.headers).map(
    (name) => `${method} ${path} ${status} sent the header ${name}, which openapi.yaml does not document on this response`,
  );
  if (headerProblems.length > 0) return headerProblems;
  const content: Json | undefined = documented.content;
  if (!content) return response.body === '' ? [] : [`${method} ${path} ${status} must have no body`];
  const mediaType = String(response.headers['content-type'] ?? '').split(';')[0]!.trim();
  if (!(mediaType in content)) return [`${method} ${path} ${status} sent content type "${mediaType}", not one of ${Object.keys(content).join(', ')}`];
  if (!content[mediaType].schema) return [];
  const body = mediaType === 'application/json' ? parseJson(response.body) : response.body;
  const validate = ajv.getSchema(`openapi${pointer}/content/${escape(mediaType)}/schema`);
  if (!validate) return [`no schema at ${pointer}`];
  if (validate(body)) return [];
  return (validate.errors ?? []).map((error) => `${method} ${path} ${status} body${error.instancePath} ${error.message}`);
}

// The headers whose presence is part of the contract. Transport headers (Date, Content-Length,
// Connection) and X-Request-Id, which every answer carries (see info.description), are not listed.
const CONTRACT_HEADERS = [
  'content-encoding',
  'etag',
  'link',
  'retry-after',
  'vary',
  'www-authenticate',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
];

// CORS: these two go with every answer to a listed Origin (see info.description); any other
// Access-Control-* header (a preflight's) must be documented on the response that sends it.
const CORS_ON_EVERY_ANSWER = new Set(['access-control-allow-origin', 'access-control-expose-headers']);

function undocumentedHeaders(documented: Json, headers: Record<string, unknown>): string[] {
  const declared = new Set(Object.keys(documented.headers ?? {}).map((name) => name.toLowerCase()));
  const cors = Object.keys(headers).filter((name) => name.toLowerCase().startsWith('access-control-') && !CORS_ON_EVERY_ANSWER.has(name.toLowerCase()));
  return [...CONTRACT_HEADERS, ...cors].filter(
    (name) => headers[name] !== undefined && !declared.has(name.toLowerCase()) && !(name === 'vary' && onlyVaryOrigin(headers[name])),
  );
}

// `Vary: Origin` goes with every answer while CORS_ORIGINS is set (info.description says so);
// any other Vary (Accept-Encoding) must be documented on the response that sends it.
function onlyVaryOrigin(value: unknown): boolean {
  return String(value).split(',').every((token) => token.trim().toLowerCase() === 'origin');
}

function findOperation(method: string, url: string): { path: string; operation: Json } | undefined {
  const pathname = new URL(url, 'http://localhost').pathname;
  for (const [path, item] of Object.entries<Json>(spec.paths)) {
    const pattern = new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    const operation = item[method.toLowerCase()];
    if (operation && pattern.test(pathname)) return { path, operation };
  }
  return undefined;
}

function resolveResponse(response: Json, pointer: string): [Json, string] {
  if (typeof response.$ref !== 'string') return [response, pointer];
  const target = response.$ref as string;
  const resolved = target.slice(2).split('/').reduce<Json>((node, segment) => node[segment.replaceAll('~1', '/')], spec);
  return [resolved, target];
}

// A JSON pointer segment inside a URI fragment: ~ and / escaped, then percent-encoded ({id}).
function escape(segment: string): string {
  return encodeURIComponent(segment.replaceAll('~', '~0').replaceAll('/', '~1'));
}

/** Asserts an Error body: the status, JSON, exactly `error` and `message`, and `error` equal to the status. */
export function isErrorBody(t: Test, response: { statusCode: number; headers: Record<string, string | undefined>; body: string } | undefined, status: number, label: string): void {
  t.equal(response?.statusCode, status, `${label}: ${status}`);
  t.match(response?.headers['content-type'], /^application\/json/, `${label}: JSON`);
  const body = JSON.parse(response?.body || 'null') as Record<string, unknown> | null;
  t.same(Object.keys(body ?? {}).sort(), ['error', 'message'], `${label}: exactly error and message`);
  t.equal(body?.error, status, `${label}: error is the status`);
}
