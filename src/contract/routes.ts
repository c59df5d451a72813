// The operations of openapi.yaml as routes, built by fastify-openapi-glue. What each route does is
// set here, as its route options, from the facts openapi.yaml states of its operation
// (operation-facts.ts): the handler named by its operationId, the security requirement (run as
// onRequest, before the body is read, so a client without a token gets 401, never a validation
// message), its turn or exemption under load, whether its answers are compressed, and HEAD for each GET.
//
// Glue warns "ContentTypeParser for 'X' not found" for each media type in the spec without a body
// parser, responses included (text/plain for /metrics, application/yaml for /openapi.yaml). So the
// check that matters, a parser for every media type a request body may have, is made here and fails
// the boot; and each media type only ever answered with gets a parser that refuses its bodies exactly
// as an unknown media type is refused (415), so that a healthy boot warns of nothing.
import { errorCodes, type FastifyInstance, type FastifyPluginOptions, type onRequestHookHandler, type RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import openapiGlue, { type FastifyOpenapiGlueOptions } from 'fastify-openapi-glue';
import { SpecificationError, withNumbers } from '../spec-path.ts';
import { deriveOperationFacts, METHODS, type OperationFacts, type SecurityRequirement } from './operation-facts.ts';
import type { ServiceHandlers } from './operations.ts';

export interface RoutesOptions {
  /** openapi.yaml, parsed; glue works on its own copy. */
  specification: object;
  handlers: ServiceHandlers;
}

async function routes(app: FastifyInstance, { specification, handlers }: RoutesOptions): Promise<void> {
  const facts = deriveOperationFacts(specification);
  refuseHandlersWithoutOperation(facts, handlers);
  // Its own context, so that the hook and the body parsers below concern these routes only.
  await app.register(async (operations) => {
    // Glue gives every schema per media type; Fastify would then skip validating a body whose
    // request names no media type, and pick a serializer by parsing each answer's Content-Type.
    operations.addHook('onRoute', useJsonSchemasDirectly);
    await registerOpenapiGlue(operations, {
      // Glue validates its copy through JSON.stringify; an int64 example that says how big an id may be shapes no route.
      specification: withNumbers(specification),
      // Glue's types ask for a whole route; its docs say these properties are added to the route it built.
      operationResolver: (operationId: string, method: string) =>
        routeOptionsOf(app, facts.get(operationId)!, handlerFor(handlers, operationId), method),
    });
  });
}

/** An operation's route options, from its facts; glue adds them to the route it built. */
function routeOptionsOf(app: FastifyInstance, facts: OperationFacts, handler: RouteOptions['handler'], method: string): RouteOptions {
  return {
    // The handler, taking its turn if it reads pages; the route config exempts it from shedding if marked.
    ...app.shedding(facts, handler),
    onRequest: securityHooks(app, facts),
    compress: app.compressionFor(facts),
    // HEAD is served by the GET route itself: Fastify's own HEAD route would drop the body in an
    // onSend that runs before compression's, and so report the plain length and no Content-Encoding.
    ...(method === 'GET' && { method: ['GET', 'HEAD'] }),
  } as RouteOptions;
}

// After the contract (error handler, validator compiler, JSON parser), security (app.bearerAuth)
// and transport (the compress route option needs its plugin, app.shedding its turns): routes take what is in force.
export default fp(routes, { name: 'routes', fastify: '5.x', dependencies: ['contract', 'security', 'transport'] });

// The boot errors below are what a spec editor meets: one line each (src/server.ts prints it), naming the
// file to change. The handlers are those buildApp, in src/app.ts, passes to this plugin.

/** Refuses to boot when openapi.yaml names an operation no handler implements. */
export function handlerFor(handlers: ServiceHandlers, operationId: string): RouteOptions['handler'] {
  if (!Object.hasOwn(handlers, operationId)) {
    throw new SpecificationError(
      `openapi.yaml declares operation "${operationId}" but no handler implements it: add one named ${operationId} to the handlers ` +
        'buildApp passes to the routes in src/app.ts (docs/development.md, "Adding an operation, end to end").',
    );
  }
  return handlers[operationId as keyof ServiceHandlers] as RouteOptions['handler'];
}

/** Refuses to boot when a handler is passed for an operation openapi.yaml does not declare. */
function refuseHandlersWithoutOperation(facts: ReadonlyMap<string, OperationFacts>, handlers: object): void {
  const extra = Object.keys(handlers).find((name) => !facts.has(name));
  if (extra !== undefined) {
    throw new SpecificationError(`src/app.ts passes the routes a handler "${extra}" but openapi.yaml declares no such operation: declare it there, or remove the handler.`);
  }
}

/** An operation's security requirement as onRequest hooks; a scheme without a check fails the boot. */
function securityHooks(app: FastifyInstance, { operationId, security }: OperationFacts): onRequestHookHandler[] {
  if (security.length === 0) return [];
  const [only] = security as [SecurityRequirement];
  if (security.length === 1 && Object.keys(only).join() === 'bearerAuth') return [app.bearerAuth.hookFor(only.bearerAuth!)];
  throw new SpecificationError(
    `openapi.yaml's operation "${operationId}" requires security ${JSON.stringify(security)}, which nothing checks: require bearerAuth there, ` +
      'or implement the scheme in src/security/ and map it in securityHooks (src/contract/routes.ts).',
  );
}

// JSON is the only body type the contract accepts, so its schema applies to every body (a POST
// without Content-Type is validated too); a status answered only in JSON has one serializer.
function useJsonSchemasDirectly(route: RouteOptions): void {
  const schema = route.schema as { body?: unknown; response?: Record<string, unknown> } | undefined;
  if (schema === undefined) return;
  const body = jsonOnly(schema.body);
  if (body !== undefined) schema.body = body;
  for (const [status, response] of Object.entries(schema.response ?? {})) {
    const json = jsonOnly(response);
    if (json !== undefined) schema.response![status] = json;
  }
}

/** The schema of a `{content: {'application/json': {schema}}}` that has no other media type. */
function jsonOnly(part: unknown): unknown {
  const content = (part as { content?: Record<string, { schema?: unknown }> } | undefined)?.content ?? {};
  const mediaTypes = Object.keys(content);
  return mediaTypes.length === 1 && mediaTypes[0] === 'application/json' ? content['application/json']!.schema : undefined;
}

export async function registerOpenapiGlue(app: FastifyInstance, options: FastifyOpenapiGlueOptions & FastifyPluginOptions): Promise<void> {
  const document = options.specification as OpenApiDocument;
  const accepted = requestMediaTypes(document);
  for (const [mediaType, operationId] of accepted) {
    if (!app.hasContentTypeParser(mediaType)) {
      throw new SpecificationError(
        `openapi.yaml's operation "${operationId}" accepts request bodies of ${mediaType}, which no body parser reads: accept application/json there, ` +
          'or register a parser for it beside the JSON one (src/contract/json.ts).',
      );
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
  operationId?: string;
  requestBody?: Content;
  responses?: Record<string, Content>;
}

interface Content {
  $ref?: string;
  content?: Record<string, unknown>;
}

/** Every operation under `paths` (not the path items' other keys, such as `parameters`). */
function operationsOf(document: OpenApiDocument): Operation[] {
  return Object.values(document.paths ?? {}).flatMap((item) => METHODS.flatMap((method) => (item?.[method] ? [item[method] as Operation] : [])));
}

/** The object a `#/components/<kind>/<name>` reference names, or the object itself. */
function resolved(document: OpenApiDocument, kind: 'requestBodies' | 'responses', item: Content | undefined): Content | undefined {
  const named = item?.$ref?.match(new RegExp(`^#/components/${kind}/(.+)$`))?.[1];
  return named === undefined ? item : document.components?.[kind]?.[named];
}

/** Each media type a request body may have, with the first operation that accepts it. */
function requestMediaTypes(document: OpenApiDocument): Map<string, string | undefined> {
  const types = new Map<string, string | undefined>();
  for (const operation of operationsOf(document)) {
    for (const mediaType of Object.keys(resolved(document, 'requestBodies', operation.requestBody)?.content ?? {})) {
      if (!types.has(mediaType)) types.set(mediaType, operation.operationId);
    }
  }
  return types;
}

function responseMediaTypes(document: OpenApiDocument): Set<string> {
  const types = new Set<string>();
  for (const operation of operationsOf(document)) {
    for (const response of Object.values(operation.responses ?? {})) {
      for (const mediaType of Object.keys(resolved(document, 'responses', response)?.content ?? {})) types.add(mediaType);
    }
  }
  return types;
}
