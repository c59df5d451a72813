// The contract served for people: Swagger UI at /docs over a copy of openapi.yaml drawn for it.
// The documents themselves (/openapi.yaml, /openapi.json) are operations, handled by docs.ts.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { registerDocs, type DocsOptions } from './docs.ts';

async function docs(app: FastifyInstance, options: DocsOptions & { specification: object }): Promise<void> {
  await registerDocs(app, structuredClone(options.specification), { persistAuthorization: options.persistAuthorization });
}

// After the contract: a path outside the UI's folder is answered with the Error body.
export default fp(docs, { name: 'docs', fastify: '5.x', dependencies: ['contract'] });
