// Swagger UI (static mode) at /docs, over a copy of openapi.yaml drawn for it (documentForUi).
import { readFileSync } from 'node:fs';
import fastifySwagger, { type StaticDocumentSpec } from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyError, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { resolve } from '../contract/operation-facts.ts';
import { exactJson } from '../int64.ts';

const DOCS_PREFIX = '/docs';

// Swagger UI needs only its own files and this origin's API; no other page may frame it (clickjacking of "Authorize").
const DOCS_CSP = [
  "default-src 'self'",
  "base-uri 'self'",
  "object-src 'none'",
  "frame-ancestors 'none'",
  "form-action 'self'",
  "img-src 'self' data:",
  "script-src 'self'",
  "script-src-attr 'none'",
  "style-src 'self'",
  "connect-src 'self'",
].join('; ');

export interface DocsOptions {
  specification: object;
  /** Swagger UI keeps a token given to "Authorize" in the browser's localStorage (DOCS_PERSIST_AUTHORIZATION). */
  persistAuthorization: boolean;
}

async function docs(app: FastifyInstance, { specification, persistAuthorization }: DocsOptions): Promise<void> {
  const document = documentForUi(specification) as StaticDocumentSpec['document'];
  await app.register(fastifySwagger, { mode: 'static', specification: { document } });
  await app.register(async (ui) => {
    // @fastify/static refuses a path leaving the UI's folder (a `..` segment) with 403: to a client there is no such document.
    ui.setErrorHandler((error: FastifyError, _request, reply) => (error.statusCode === 403 ? reply.callNotFound() : reply.send(error)));
    // /docs/json writes each bigint (an int64 example) digit for digit; /docs/yaml is text the yaml package wrote.
    ui.setReplySerializer((payload) => exactJson(payload));
    await ui.register(fastifySwaggerUi, {
      routePrefix: DOCS_PREFIX,
      uiConfig: { persistAuthorization },
      staticCSP: DOCS_CSP,
      // For browsers older than frame-ancestors.
      uiHooks: {
        onRequest: (_request, reply, done) => {
          reply.header('x-frame-options', 'DENY');
          done();
        },
      },
      logo: { type: 'image/svg+xml', content: uiFile('logo.svg'), href: DOCS_PREFIX },
      theme: {
        title: document.info?.title ?? 'API',
        css: [{ filename: 'docs-ui.css', content: uiFile('docs-ui.css').toString('utf8') }],
        js: [{ filename: 'docs-ui.js', content: uiFile('docs-ui.js').toString('utf8') }],
        favicon: [{ filename: 'logo.svg', rel: 'icon', type: 'image/svg+xml', sizes: 'any', content: uiFile('logo.svg') }],
      },
    });
  });
}

/** The browser side of the docs page (top bar, exact big integers), served by the service itself. */
function uiFile(name: string): Buffer {
  return readFileSync(new URL(`./docs-ui/${name}`, import.meta.url));
}

type Schema = Record<string, unknown>;

const PLAIN_OBJECT_KEYWORDS = new Set(['type', 'title', 'description', 'properties', 'required']);

/** Swagger UI's own copy: components titled by name, plain-object allOfs merged (else NewPlant shows as "(any & object)"). */
function documentForUi(document: object): object {
  const copy = structuredClone(document) as Schema & { components?: { schemas?: Record<string, Schema> } };
  const schemas = copy.components?.schemas ?? {};
  for (const [name, schema] of Object.entries(schemas)) schema.title ??= name;
  // Components first, so a body or response merges the components' merged forms.
  for (const [name, schema] of Object.entries(schemas)) schemas[name] = mergeAll(schema, copy) as Schema;
  return mergeAll(copy, copy) as object;
}

/** `value` with every allOf merged; `document` holds the components already merged, which $refs name. */
function mergeAll(value: unknown, document: Schema): unknown {
  if (Array.isArray(value)) return value.map((item) => mergeAll(item, document));
  if (!isObject(value)) return value;
  const walked = Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mergeAll(item, document)]));
  return Array.isArray(walked.allOf) ? mergeAllOf(walked, document) : walked;
}

/** `{allOf: [A, B], ...rest}` as one object schema, when A and B are plain objects; else as it is. */
function mergeAllOf(schema: Schema, document: Schema): Schema {
  const { allOf, ...outer } = schema as Schema & { allOf: unknown[] };
  const parts = allOf.map((part) => resolve(document, part));
  if (!parts.every(isPlainObjectSchema)) return schema;
  return {
    // A lone part (a component beside unevaluatedProperties) lends the whole its title.
    ...(parts.length === 1 && { title: parts[0]!.title }),
    ...outer,
    type: 'object',
    properties: Object.assign({}, ...parts.map((part) => part.properties), outer.properties),
    required: [...new Set([...parts, outer].flatMap((part) => (part.required as string[] | undefined) ?? []))],
  };
}

function isPlainObjectSchema(value: unknown): value is Schema {
  return isObject(value) && value.type === 'object' && Object.keys(value).every((key) => PLAIN_OBJECT_KEYWORDS.has(key));
}

function isObject(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// After the contract: a path outside the UI's folder is answered with the Error body.
export default fp(docs, { name: 'docs', fastify: '5.x', dependencies: ['contract'] });
