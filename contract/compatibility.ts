// The backward-compatibility gate (npm run compat, test/contract/compatibility.test.ts): what in openapi.yaml would break a client generated
// from the published contract, contract/published-1.0.0.yaml. Written here because the maintained diff
// tools either refuse OpenAPI 3.1 or compare allOf positionally and miss changes behind a $ref.
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';

export const PUBLISHED_URL = new URL('./published-1.0.0.yaml', import.meta.url);
export const CURRENT_URL = new URL('../openapi.yaml', import.meta.url);

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed YAML or JSON walked by key: its shape is what this code checks
type Json = Record<string, any>;
/** A request travels from the client (the server must accept at least as much); a response to it (no more). */
type Direction = 'request' | 'response';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** One sentence per change that breaks a client generated from `published`; empty when `current` keeps it. */
export function breakingChanges(published: Json, current: Json): string[] {
  const problems: string[] = [...schemeChanges(published, current)];
  for (const [path, item] of Object.entries<Json>(published.paths ?? {})) {
    for (const method of METHODS.filter((name) => item[name])) {
      const name = `${method.toUpperCase()} ${path}`;
      const now = current.paths?.[path]?.[method];
      if (!now) problems.push(`${name} was removed`);
      else problems.push(...operationChanges(name, { doc: published, op: item[method], item }, { doc: current, op: now, item: current.paths[path] }));
    }
  }
  return problems;
}

export async function checkFiles(publishedUrl: URL = PUBLISHED_URL, currentUrl: URL = CURRENT_URL): Promise<string[]> {
  const [published, current] = await Promise.all([publishedUrl, currentUrl].map(async (url) => parse(await readFile(url, 'utf8')) as Json));
  return breakingChanges(published!, current!);
}

interface Side {
  doc: Json;
  op: Json;
  item: Json;
}

function schemeChanges(published: Json, current: Json): string[] {
  const problems: string[] = [];
  for (const [name, scheme] of Object.entries<Json>(published.components?.securitySchemes ?? {})) {
    const now = current.components?.securitySchemes?.[name];
    if (!now) problems.push(`the security scheme "${name}" was removed`);
    else if (now.type !== scheme.type || String(now.scheme).toLowerCase() !== String(scheme.scheme).toLowerCase()) {
      problems.push(`the security scheme "${name}" is no longer ${scheme.type} ${scheme.scheme}`);
    }
  }
  return problems;
}

function operationChanges(name: string, before: Side, after: Side): string[] {
  const problems = [...securityChanges(name, before, after), ...parameterChanges(name, before, after)];
  const body = before.op.requestBody && resolve(before.doc, before.op.requestBody);
  const bodyNow = after.op.requestBody && resolve(after.doc, after.op.requestBody);
  if (!body && bodyNow?.required) problems.push(`${name}: a request body is now required`);
  if (body) {
    if (!bodyNow) problems.push(`${name}: the request body was removed`);
    else {
      if (bodyNow.required && !body.required) problems.push(`${name}: the request body is now required`);
      problems.push(...contentChanges(`${name} request body`, before.doc, body.content, after.doc, bodyNow.content, 'request'));
    }
  }
  for (const [status, response] of Object.entries<Json>(before.op.responses ?? {})) {
    const now = after.op.responses?.[status];
    if (!now) problems.push(`${name}: the ${status} response was removed`);
    else {
      const [was, is] = [resolve(before.doc, response), resolve(after.doc, now)];
      problems.push(...contentChanges(`${name} ${status} response`, before.doc, was.content, after.doc, is.content, 'response'));
    }
  }
  return problems;
}

/** A client holds the published schemes only: one alternative of the operation must need no other. */
function securityChanges(name: string, before: Side, after: Side): string[] {
  const known = new Set(Object.keys(before.doc.components?.securitySchemes ?? {}));
  const required: Json[] = after.op.security ?? after.doc.security ?? [];
  if (required.length === 0 || required.some((alternative) => Object.keys(alternative).every((scheme) => known.has(scheme)))) return [];
  return [`${name}: every security alternative now needs a scheme the published contract does not have`];
}

function parameterChanges(name: string, before: Side, after: Side): string[] {
  const list = (side: Side) => [...(side.item.parameters ?? []), ...(side.op.parameters ?? [])].map((p: Json) => resolve(side.doc, p));
  const [was, is] = [list(before), list(after)];
  const problems: string[] = [];
  for (const parameter of was) {
    const now = is.find((p) => p.name === parameter.name && p.in === parameter.in);
    if (!now) problems.push(`${name}: the ${parameter.in} parameter "${parameter.name}" was removed`);
    else problems.push(...schemaChanges(`${name} ${parameter.in} parameter "${parameter.name}"`, before.doc, parameter.schema, after.doc, now.schema, 'request'));
  }
  for (const parameter of is.filter((p) => p.required && !was.some((old) => old.name === p.name && old.in === p.in))) {
    problems.push(`${name}: a required ${parameter.in} parameter "${parameter.name}" was added`);
  }
  return problems;
}

function contentChanges(where: string, doc: Json, content: Json | undefined, docNow: Json, contentNow: Json | undefined, direction: Direction): string[] {
  const problems: string[] = [];
  for (const [type, media] of Object.entries<Json>(content ?? {})) {
    const now = contentNow?.[type];
    if (!now) problems.push(`${where}: the ${type} content was removed`);
    else problems.push(...schemaChanges(`${where}`, doc, media.schema, docNow, now.schema, direction));
  }
  return problems;
}

/** What breaks between two schemas: a field removed, a type changed, a request field required, a response field optional. */
function schemaChanges(where: string, doc: Json, schema: Json | undefined, docNow: Json, schemaNow: Json | undefined, direction: Direction): string[] {
  if (!schema) return [];
  if (!schemaNow) return [`${where}: the schema was removed`];
  const [was, is] = [flatten(doc, schema), flatten(docNow, schemaNow)];
  const problems: string[] = [];
  const [types, typesNow] = [typesOf(was), typesOf(is)];
  // A request may now be broader, a response narrower; anything else changes the type a client was generated with.
  const kept = direction === 'request' ? [...types].every((t) => typesNow.has(t)) : [...typesNow].every((t) => types.has(t));
  if (types.size > 0 && (!kept || typesNow.size === 0)) problems.push(`${where}: the type changed from ${[...types].join('|')} to ${[...typesNow].join('|') || 'any'}`);
  if (was.format !== undefined && is.format !== was.format) problems.push(`${where}: the format changed from ${was.format} to ${is.format ?? 'none'}`);
  if (was.enum && is.enum) {
    const [values, valuesNow] = [was.enum, is.enum];
    const lost = direction === 'request' ? values.filter((v) => !valuesNow.includes(v)) : valuesNow.filter((v) => !values.includes(v));
    if (lost.length > 0) problems.push(`${where}: the values ${JSON.stringify(lost)} ${direction === 'request' ? 'are no longer accepted' : 'were added'}`);
  }
  for (const [field, property] of Object.entries<Json>(was.properties)) {
    const now = is.properties[field];
    if (!now) problems.push(`${where}: the field "${field}" was removed`);
    else problems.push(...schemaChanges(`${where} field "${field}"`, doc, property, docNow, now, direction));
    if (direction === 'response' && was.required.has(field) && now && !is.required.has(field)) {
      problems.push(`${where}: the field "${field}" is no longer always sent`);
    }
  }
  if (direction === 'request') {
    for (const field of is.required) if (!was.required.has(field)) problems.push(`${where}: the field "${field}" is now required`);
  }
  if (was.items) problems.push(...schemaChanges(`${where} items`, doc, was.items, docNow, is.items, direction));
  return problems;
}

interface Flat {
  type?: string | string[];
  format?: string;
  enum?: unknown[];
  items?: Json;
  properties: Record<string, Json>;
  required: Set<string>;
}

/** The schema with its $refs followed and its allOf parts merged, as a generated client sees it. */
function flatten(doc: Json, schema: Json, depth = 0): Flat {
  const own = resolve(doc, schema);
  const flat: Flat = { type: own.type, format: own.format, enum: own.enum, items: own.items, properties: { ...own.properties }, required: new Set(own.required ?? []) };
  for (const part of own.allOf ?? []) {
    if (depth > 32) throw new Error('allOf nests too deep; is a schema its own part?');
    const inner = flatten(doc, part, depth + 1);
    flat.type ??= inner.type;
    flat.format ??= inner.format;
    flat.enum ??= inner.enum;
    flat.items ??= inner.items;
    Object.assign(flat.properties, inner.properties);
    for (const field of inner.required) flat.required.add(field);
  }
  if (flat.type === undefined && Object.keys(flat.properties).length > 0) flat.type = 'object';
  return flat;
}

function typesOf(schema: Flat): Set<string> {
  const types = new Set(schema.type === undefined ? [] : [schema.type].flat());
  // An integer is a number too: widening a request's integer to number keeps it; narrowing does not.
  if (types.has('number')) types.add('integer');
  return types;
}

/** Follows local $refs (`#/components/...`) until the object holds something else. */
function resolve(doc: Json, node: Json): Json {
  let current = node;
  for (let hops = 0; typeof current?.$ref === 'string'; hops++) {
    if (hops > 32 || !current.$ref.startsWith('#/')) throw new Error(`cannot follow $ref ${current.$ref}`);
    const target = (current.$ref as string)
      .slice(2)
      .split('/')
      .reduce<Json | undefined>((at, key) => at?.[key.replaceAll('~1', '/').replaceAll('~0', '~')], doc);
    if (target === undefined) throw new Error(`$ref ${node.$ref} points nowhere`);
    current = target;
  }
  return current;
}
