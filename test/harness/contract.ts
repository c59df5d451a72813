// Checks a response against openapi.yaml: the status must be documented for the operation, every
// header sent (message framing aside) must be declared on that response and every header it marks
// required must be sent, the content type must be one it declares, and the body must match that
// response's schema.
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { Test } from 'tap';
import { parse as parseYaml } from 'yaml';
import { SPEC_PATH } from '../../src/spec-path.ts';
import { exactIntegerKeyword, withExactIntegers } from '../../src/contract/integers.ts';
import { parseJson } from '../../src/contract/json.ts';

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
  const headerFaults = headerProblems(documented, response.headers, `${method} ${path} ${status}`);
  if (headerFaults.length > 0) return headerFaults;
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

// Message framing, which any answer may carry whatever its response says.
const FRAMING_HEADERS = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding', 'content-type']);

/** Each header the answer sends that its response does not declare, and each required one it lacks. */
function headerProblems(documented: Json, headers: Record<string, unknown>, label: string): string[] {
  const declared = new Map(Object.entries<Json>(documented.headers ?? {}).map(([name, header]) => [name.toLowerCase(), resolveRef(header)]));
  const sent = Object.keys(headers).filter((name) => headers[name] !== undefined).map((name) => name.toLowerCase());
  const undeclared = sent.filter((name) => !FRAMING_HEADERS.has(name) && !declared.has(name));
  const missing = [...declared].filter(([name, header]) => header.required === true && !sent.includes(name)).map(([name]) => name);
  return [
    ...undeclared.map((name) => `${label} sent the header ${name}, which openapi.yaml does not declare on this response`),
    ...missing.map((name) => `${label} lacks the header ${name}, which openapi.yaml declares required on this response`),
  ];
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
  return [resolveRef(response), response.$ref];
}

/** The node a `$ref` points to, or the node itself. */
function resolveRef(node: Json): Json {
  if (typeof node.$ref !== 'string') return node;
  return (node.$ref as string).slice(2).split('/').reduce<Json>((at, segment) => at[segment.replaceAll('~1', '/')], spec);
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
