// The contract itself, served as written, and Swagger UI (static mode) to browse and try it.
import { readFileSync } from 'node:fs';
import fastifySwagger, { type StaticDocumentSpec } from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyError, FastifyInstance } from 'fastify';
import { documentForUi } from './docs-ui-spec.ts';
import { exactJson } from '../int64.ts';
import { parseSpecification } from '../spec-path.ts';
import type { OperationHandler } from '../contract/operations.ts';
import { sendStored, storeAnswer, type StoredAnswer } from '../transport/compression-stored.ts';

export const DOCS_PREFIX = '/docs';

// Swagger UI needs only its own files (scripts, styles, images, some as data: URIs) and this origin's
// API; no other page may frame it, so a click on "Authorize" cannot be hijacked (clickjacking).
export const DOCS_CSP = [
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
  /** Swagger UI keeps a token given to "Authorize" in the browser's localStorage (DOCS_PERSIST_AUTHORIZATION). */
  persistAuthorization: boolean;
}

export async function registerDocs(app: FastifyInstance, document: object, options: DocsOptions): Promise<void> {
  await app.register(fastifySwagger, { mode: 'static', specification: { document: document as StaticDocumentSpec['document'] } });
  // The UI's copy, twice: its big integers as bigint for /docs/yaml (the yaml package writes them),
  // and as raw JSON for /docs/json (JSON.stringify throws on a bigint), so both keep every digit.
  const forUi = documentForUi(document);
  const forUiJson = withRawIntegers(forUi);
  const title = (document as { info?: { title?: string } }).info?.title ?? 'API';
  // @fastify/static refuses a path leaving the UI's folder (a `..` segment) with 403: to a client there is no such document.
  await app.register(async (ui) => {
    ui.setErrorHandler((error: FastifyError, _request, reply) => (error.statusCode === 403 ? reply.callNotFound() : reply.send(error)));
    await ui.register(fastifySwaggerUi, {
      routePrefix: DOCS_PREFIX,
      uiConfig: { persistAuthorization: options.persistAuthorization },
      staticCSP: DOCS_CSP,
      // For browsers older than frame-ancestors.
      uiHooks: {
        onRequest: (_request, reply, done) => {
          reply.header('x-frame-options', 'DENY');
          done();
        },
      },
      transformSpecificationClone: false,
      transformSpecification: (_document, request) => (request.routeOptions.url?.endsWith('/yaml') ? forUi : forUiJson),
      logo: { type: 'image/svg+xml', content: uiFile('logo.svg'), href: DOCS_PREFIX },
      theme: {
        title,
        css: [{ filename: 'docs-ui.css', content: uiFile('docs-ui.css').toString('utf8') }],
        js: [{ filename: 'docs-ui.js', content: uiFile('docs-ui.js').toString('utf8') }],
        favicon: [{ filename: 'logo.svg', rel: 'icon', type: 'image/svg+xml', sizes: 'any', content: uiFile('logo.svg') }],
      },
    });
  });
}

/** A copy of `value` in which each bigint is a JSON.rawJSON of its digits. */
function withRawIntegers(value: unknown): Record<string, unknown> {
  return rawIntegers(value) as Record<string, unknown>;
}

function rawIntegers(value: unknown): unknown {
  if (typeof value === 'bigint') return JSON.rawJSON(String(value));
  if (Array.isArray(value)) return value.map(rawIntegers);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, rawIntegers(item)]));
}

/** The browser side of the docs page (top bar, exact big integers), served by the service itself. */
function uiFile(name: string): Buffer {
  return readFileSync(new URL(`./docs-ui/${name}`, import.meta.url));
}

/**
 * The contract as written (YAML, byte for byte) and as JSON, from the text `readText` gives: each
 * built once, plain and compressed, on its first request (it never changes while the process runs).
 */
export function createDocsHandlers(readText: () => string): {
  getOpenApiJson: OperationHandler<'getOpenApiJson'>;
  getOpenApiYaml: OperationHandler<'getOpenApiYaml'>;
} {
  let json: Promise<StoredAnswer> | undefined;
  let yaml: Promise<StoredAnswer> | undefined;
  return {
    async getOpenApiJson(request, reply) {
      json ??= storeAnswer('application/json; charset=utf-8', exactJson(parseSpecification(readText())));
      return sendStored(request, reply, await json);
    },
    async getOpenApiYaml(request, reply) {
      yaml ??= storeAnswer('application/yaml', readText());
      return sendStored(request, reply, await yaml);
    },
  };
}
