// The contract itself, served as written (static mode), and Swagger UI to browse and try it.
import fastifySwagger, { type StaticDocumentSpec } from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import type { OperationHandler } from './operations.ts';

export const DOCS_PREFIX = '/docs';

export async function registerDocs(app: FastifyInstance, document: object): Promise<void> {
  await app.register(fastifySwagger, { mode: 'static', specification: { document: document as StaticDocumentSpec['document'] } });
  await app.register(fastifySwaggerUi, {
    routePrefix: DOCS_PREFIX,
    uiConfig: { persistAuthorization: true },
  });
}

export function createDocsHandlers(app: FastifyInstance): {
  getOpenApiJson: OperationHandler<'getOpenApiJson'>;
  getOpenApiYaml: OperationHandler<'getOpenApiYaml'>;
} {
  let json: string | undefined;
  let yaml: string | undefined;
  return {
    async getOpenApiJson(_request, reply) {
      json ??= JSON.stringify(app.swagger());
      return reply.type('application/json').send(json);
    },
    async getOpenApiYaml(_request, reply) {
      yaml ??= app.swagger({ yaml: true });
      return reply.type('application/yaml').send(yaml);
    },
  };
}
