// fastify-openapi-glue, registered without its false warnings.
// Before it wires the routes, the plugin warns "ContentTypeParser for 'X' not found" for each media
// type in the spec that has no body parser, but it collects those from the responses as well as
// the request bodies (one parseContent serves both, lib/Parser.v3.js in 4.11). So the text/plain of
// /metrics and the application/yaml of /openapi.yaml, which no request ever carries, warned on every
// healthy boot and taught operators to ignore warnings. Registering parsers for them would be a lie
// (no request body of those types is accepted: they answer 415 like any other), so the check is made
// here for what it means, the media types of request bodies, and fails the boot; while the plugin
// registers, its own version of the check is not logged.
import type { FastifyInstance, FastifyPluginOptions } from 'fastify';
import openapiGlue, { type FastifyOpenapiGlueOptions } from 'fastify-openapi-glue';

const GLUE_PARSER_WARNING = /^ContentTypeParser for '.*' not found$/;

export async function registerOpenapiGlue(app: FastifyInstance, options: FastifyOpenapiGlueOptions & FastifyPluginOptions): Promise<void> {
  for (const mediaType of requestMediaTypes(options.specification as OpenApiDocument)) {
    if (!app.hasContentTypeParser(mediaType)) {
      throw new Error(`openapi.yaml accepts request bodies of ${mediaType}, but no body parser for it is registered.`);
    }
  }
  const warn = app.log.warn;
  app.log.warn = function (this: unknown, ...args: unknown[]) {
    if (typeof args[0] === 'string' && GLUE_PARSER_WARNING.test(args[0])) return;
    (warn as (...args: unknown[]) => void).apply(this, args);
  } as typeof warn;
  try {
    await app.register(openapiGlue, options);
  } finally {
    app.log.warn = warn;
  }
}

interface OpenApiDocument {
  paths?: Record<string, Record<string, { requestBody?: RequestBody } | unknown>>;
  components?: { requestBodies?: Record<string, RequestBody> };
}

interface RequestBody {
  $ref?: string;
  content?: Record<string, unknown>;
}

function requestMediaTypes(document: OpenApiDocument): Set<string> {
  const types = new Set<string>();
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      let body = (operation as { requestBody?: RequestBody } | undefined)?.requestBody;
      const named = body?.$ref?.match(/^#\/components\/requestBodies\/(.+)$/)?.[1];
      if (named !== undefined) body = document.components?.requestBodies?.[named];
      for (const mediaType of Object.keys(body?.content ?? {})) types.add(mediaType);
    }
  }
  return types;
}
