// fastify-openapi-glue, registered so that a healthy boot warns of nothing.
// Before it wires the routes, the plugin warns "ContentTypeParser for 'X' not found" for each media
// type in the spec that has no body parser, responses included (text/plain for /metrics,
// application/yaml for /openapi.yaml). So the check that matters, a parser for every media type a
// request body may have, is made here and fails the boot; and each media type only ever answered
// with gets a parser that refuses its bodies exactly as an unknown media type is refused (415).
import { errorCodes, type FastifyInstance, type FastifyPluginOptions } from 'fastify';
import openapiGlue, { type FastifyOpenapiGlueOptions } from 'fastify-openapi-glue';

export async function registerOpenapiGlue(app: FastifyInstance, options: FastifyOpenapiGlueOptions & FastifyPluginOptions): Promise<void> {
  const document = options.specification as OpenApiDocument;
  const accepted = requestMediaTypes(document);
  for (const mediaType of accepted) {
    if (!app.hasContentTypeParser(mediaType)) {
      throw new Error(`openapi.yaml accepts request bodies of ${mediaType}, but no body parser for it is registered.`);
    }
  }
  for (const mediaType of responseMediaTypes(document)) {
    if (accepted.has(mediaType) || app.hasContentTypeParser(mediaType)) continue;
    app.addContentTypeParser(mediaType, (_request, _body, done) => done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(), undefined));
  }
  await app.register(openapiGlue, options);
}

interface OpenApiDocument {
  paths?: Record<string, Record<string, Operation | unknown>>;
  components?: { requestBodies?: Record<string, Content>; responses?: Record<string, Content> };
}

interface Operation {
  requestBody?: Content;
  responses?: Record<string, Content>;
}

interface Content {
  $ref?: string;
  content?: Record<string, unknown>;
}

function operationsOf(document: OpenApiDocument): Operation[] {
  return Object.values(document.paths ?? {}).flatMap((operations) => Object.values(operations) as Operation[]);
}

/** The object a `#/components/<kind>/<name>` reference names, or the object itself. */
function resolved(document: OpenApiDocument, kind: 'requestBodies' | 'responses', item: Content | undefined): Content | undefined {
  const named = item?.$ref?.match(new RegExp(`^#/components/${kind}/(.+)$`))?.[1];
  return named === undefined ? item : document.components?.[kind]?.[named];
}

function requestMediaTypes(document: OpenApiDocument): Set<string> {
  const types = new Set<string>();
  for (const operation of operationsOf(document)) {
    for (const mediaType of Object.keys(resolved(document, 'requestBodies', operation?.requestBody)?.content ?? {})) types.add(mediaType);
  }
  return types;
}

function responseMediaTypes(document: OpenApiDocument): Set<string> {
  const types = new Set<string>();
  for (const operation of operationsOf(document)) {
    for (const response of Object.values(operation?.responses ?? {})) {
      for (const mediaType of Object.keys(resolved(document, 'responses', response)?.content ?? {})) types.add(mediaType);
    }
  }
  return types;
}
