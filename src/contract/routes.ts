// The operations of openapi.yaml as routes, built by fastify-openapi-glue: each route gets the handler named
// by its operationId, HEAD for each GET, and what the app adds from the operation's facts (operation-facts.ts).
import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import type { FastifyInstance, FastifySerializerCompiler, onRequestHookHandler, RouteOptions } from 'fastify';
import { errorCodes } from 'fastify';
import fp from 'fastify-plugin';
import openapiGlue from 'fastify-openapi-glue';
import { SpecificationError, withNumbers } from '../spec-path.ts';
import { deriveOperationFacts, type OperationFacts } from './operation-facts.ts';
import type { ServiceHandlers } from './operations.ts';
import { validatorCompiler } from './validation.ts';

interface RoutesOptions {
  /** openapi.yaml, parsed; glue works on its own copy. */
  specification: object;
  handlers: ServiceHandlers;
  /** What the app adds to an operation's route from its facts (its security hooks, load shedding, compression). */
  routeOptionsFor: (facts: OperationFacts, handler: RouteOptions['handler']) => object;
}

async function routes(app: FastifyInstance, { specification, handlers, routeOptionsFor }: RoutesOptions): Promise<void> {
  const facts = deriveOperationFacts(specification);
  checkHandlers(facts, handlers);
  // Its own context, so that the hook and the body parsers below concern these routes only.
  await app.register(async (operations) => {
    // Glue gives every schema per media type; Fastify would then skip validating a body whose request names none.
    operations.addHook('onRoute', useJsonSchemasDirectly);
    const failures: SpecificationError[] = [];
    operations.setValidatorCompiler(namingFailures(validatorCompiler, 'a request', () => true, failures));
    operations.setSerializerCompiler(namingFailures(serializerCompiler, 'an answer', JSON.stringify, failures));
    // Schemas compile just before ready: the first that failed stops the start.
    operations.addHook('onReady', async () => {
      if (failures[0]) throw failures[0];
    });
    parseEveryMediaType(operations, facts);
    await operations.register(openapiGlue, {
      // Glue validates its copy through JSON.stringify; an int64 example that says how big an id may be shapes no route.
      specification: withNumbers(specification),
      // Glue's types ask for a whole route; its docs say these properties are added to the route it built.
      operationResolver: (operationId: string, method: string) =>
        ({
          ...routeOptionsFor(facts.get(operationId)!, handlers[operationId as keyof ServiceHandlers] as RouteOptions['handler']),
          // HEAD is served by the GET route itself: Fastify's own HEAD route would drop the body before compression.
          ...(method === 'GET' && { method: ['GET', 'HEAD'] }),
        }) as RouteOptions,
    });
  });
}

// After the contract: routes take the error handler, validator compiler and JSON parser in force.
export default fp(routes, { name: 'routes', fastify: '5.x', dependencies: ['contract'] });

/** Each handler serves an operation of openapi.yaml, and each operation has the handler named by its operationId. */
function checkHandlers(facts: ReadonlyMap<string, OperationFacts>, handlers: ServiceHandlers): void {
  const extra = Object.keys(handlers).find((name) => !facts.has(name));
  if (extra !== undefined) {
    throw new SpecificationError(`src/app.ts passes the routes a handler "${extra}" but openapi.yaml declares no such operation: declare it there, or remove the handler.`);
  }
  const missing = [...facts.keys()].find((operationId) => !Object.hasOwn(handlers, operationId));
  if (missing !== undefined) {
    throw new SpecificationError(
      `openapi.yaml declares operation "${missing}" but no handler implements it: add one named ${missing} to the handlers ` +
        'buildApp passes to the routes in src/app.ts (docs/development.md, "Adding an operation, end to end").',
    );
  }
}

/** An operation's security requirement as onRequest hooks, from a check per scheme; a scheme without one fails the boot. */
export function securityHooks({ operationId, security }: OperationFacts, checks: Record<string, (scopes: string[]) => onRequestHookHandler>): onRequestHookHandler[] {
  if (security.length === 0) return [];
  const [scheme, scopes] = Object.entries(security[0]!)[0] ?? [];
  if (security.length === 1 && Object.keys(security[0]!).length === 1 && Object.hasOwn(checks, scheme!)) return [checks[scheme!]!(scopes!)];
  throw new SpecificationError(
    `openapi.yaml's operation "${operationId}" requires security ${JSON.stringify(security)}, which nothing checks: require bearerAuth there, ` +
      'or implement the scheme in src/security/ and map it in securityHooks (src/contract/routes.ts).',
  );
}

// JSON is the only body type, so its schema applies to every body; a status answered only in JSON has one serializer.
function useJsonSchemasDirectly(route: RouteOptions): void {
  const schema = route.schema as { body?: unknown; response?: Record<string, unknown> };
  if (schema.body !== undefined) schema.body = jsonOnly(schema.body);
  for (const status in schema.response) schema.response[status] = jsonOnly(schema.response[status]);
}

function jsonOnly(part: unknown): unknown {
  const content = (part as { content?: Record<string, { schema?: unknown }> }).content ?? {};
  const mediaTypes = Object.keys(content);
  return mediaTypes.length === 1 && mediaTypes[0] === 'application/json' ? content['application/json']!.schema : part;
}

const serializerCompiler = SerializerSelector()({}) as FastifySerializerCompiler<unknown>;

type Compile = (request: { method: string | string[]; url: string }) => unknown;

/** A compiler whose failure names its operation (Fastify's error only quotes the reason in a sentence). */
function namingFailures<C>(compile: C, part: string, failed: unknown, failures: SpecificationError[]): C {
  const named: Compile = (request) => {
    try {
      return (compile as Compile)(request);
    } catch (error) {
      const where = `${[request.method].flat()[0]} ${request.url.replace(/:(\w+)/g, '{$1}')}`;
      const reason = (error as Error).message.replaceAll('\n', ' ');
      failures.push(new SpecificationError(`openapi.yaml: ${part} schema of ${where} is not valid JSON Schema (${reason}); fix it there.`, { cause: error }));
      return failed;
    }
  };
  return named as C;
}

/** A request media type no parser reads fails the boot; one only answered with gets a 415 parser, so that glue warns of nothing. */
function parseEveryMediaType(app: FastifyInstance, facts: ReadonlyMap<string, OperationFacts>): void {
  for (const { operationId, requestMediaTypes } of facts.values()) {
    const unread = requestMediaTypes.find((mediaType) => !app.hasContentTypeParser(mediaType));
    if (unread === undefined) continue;
    throw new SpecificationError(
      `openapi.yaml's operation "${operationId}" accepts request bodies of ${unread}, which no body parser reads: accept application/json there, ` +
        'or register a parser for it beside the JSON one (src/contract/json.ts).',
    );
  }
  for (const mediaType of new Set([...facts.values()].flatMap((fact) => fact.responseMediaTypes))) {
    if (app.hasContentTypeParser(mediaType)) continue;
    app.addContentTypeParser(mediaType, (_request, _body, done) => done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(), undefined));
  }
}
