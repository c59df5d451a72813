// fastify-openapi-glue, registered without its false warnings.
// Before it wires the routes, the plugin warns "ContentTypeParser for 'X' not found" for each media
// type in the spec that has no body parser, but it collects those from the responses as well as
// the request bodies (one parseContent serves both, lib/Parser.v3.js in 4.11). So the text/plain of
// /metrics and the application/yaml of /openapi.yaml, which no request ever carries, warned on every
// healthy boot and taught operators to ignore warnings. Registering parsers for them would be a lie
// (no request body of those types is accepted: they answer 415 like any other), so the check is made
// here for what it means, the media types of request bodies, and fails the boot; while the plugin
// registers, its own version of the check is not logged.
// Nor does the boot compile the OpenAPI 3.1 meta-schema: see skippingMetaSchema below.
import { Validator } from '@seriousme/openapi-schema-validator';
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
    await skippingMetaSchema(async () => app.register(openapiGlue, options));
  } finally {
    app.log.warn = warn;
  }
}

// Glue validates the contract with @seriousme/openapi-schema-validator, which compiles the whole
// OpenAPI 3.1 meta-schema with a new Ajv on every call: 60 of the ~390 ms from spawn to the first
// answer (cpu-prof of npm start), for a file that ships with the code and cannot change after
// release. So while glue registers, the meta-schema check accepts the document, and the check
// is made where the file does change: `npm run generate` and `npm run dev` refuse a contract that
// fails it (scripts/generate.ts), and so does test/spec.test.ts, as does `npm run lint`. The rest
// of the validator's work still runs at every boot: every $ref must resolve (a dangling one fails
// the boot), and glue resolves the references; Fastify compiles every operation's schemas.
// getAjvValidator is the validator's own (unexported in its types) cache of compiled meta-schemas;
// were it renamed, this would fall back to the full check, slower but as correct.
type MetaSchemaCheck = ((document: unknown) => boolean) & { errors: null };
const VALIDATOR = Validator.prototype as unknown as { getAjvValidator?: (version: string) => MetaSchemaCheck };

async function skippingMetaSchema<T>(register: () => Promise<T>): Promise<T> {
  const compile = VALIDATOR.getAjvValidator;
  VALIDATOR.getAjvValidator = () => Object.assign(() => true, { errors: null });
  try {
    return await register();
  } finally {
    VALIDATOR.getAjvValidator = compile;
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
