// buildApp: the whole HTTP service on a given store, ready to inject or listen. No listen here.
import type { Server } from 'node:http';
import Fastify, { type FastifyHttpOptions, type FastifyInstance, type RouteOptions } from 'fastify';
import type { Config } from './config.ts';
import { createBearerAuth, type BearerAuth } from './http/auth.ts';
import { compressionOf, registerCompression } from './http/compression.ts';
import { allowCrossOrigin } from './http/cors.ts';
import { createDocsHandlers, registerDocs } from './http/docs.ts';
import { clientErrorHandler, frameworkErrorHandler, installErrorHandling } from './http/errors.ts';
import { createFailureLimiter } from './http/failure-limiter.ts';
import { createHealthHandlers } from './http/health.ts';
import { installLifecycle } from './http/lifecycle.ts';
import { answerTransportEdges, TRANSPORT_SERVER_OPTIONS } from './http/transport.ts';
import { closeOnUnreadBodies } from './http/unread-body.ts';
import { useExactJsonBodies } from './http/json.ts';
import { loggerOptions } from './http/logging.ts';
import { createMetrics, createMetricsHandler } from './http/metrics.ts';
import { registerOpenapiGlue } from './http/openapi-glue.ts';
import type { ServiceHandlers } from './http/operations.ts';
import { registerRateLimit } from './http/rate-limit.ts';
import { requestIdFor, returnRequestIds } from './http/request-id.ts';
import { hookList } from './http/route-hooks.ts';
import { formatSchemaErrors, validatorCompiler } from './http/validation.ts';
import { createPlantHandlers } from './plants/handlers.ts';
import { readSpecification, readSpecificationText, SPEC_PATH } from './spec-path.ts';
import { StoreUnavailableError, type PlantStore } from './store/types.ts';
import { createTokenVerifier } from './tokens/verifier.ts';
import { WebhookDispatcher } from './webhooks/dispatcher.ts';
import { createWebhookHandlers } from './webhooks/handlers.ts';

export { SPEC_PATH };
/** Documented in openapi.yaml as the 413 limit. */
export const BODY_LIMIT = 64 * 1024;

export interface AppDependencies {
  config: Pick<
    Config,
    'apiTokens' | 'corsOrigins' | 'logLevel' | 'authFailuresPerMinute' | 'trustProxy' | 'rateLimitPerMinute' | 'redisUrl' | 'webhooks' | 'timeouts' | 'tracing'
  >;
  store: PlantStore;
  /** Where JSON log lines go; stdout by default. */
  logStream?: NodeJS.WritableStream;
  /** Milliseconds since the epoch; tests move it to cross cache windows without waiting. */
  clock?: () => number;
}

export async function buildApp({ config, store: plainStore, logStream, clock = Date.now }: AppDependencies): Promise<FastifyInstance> {
  const app = Fastify(serverOptions(config, logStream));
  returnRequestIds(app); // first, so that every answer carries the id, the 503 while closing included
  // Before any route is added (CORS adds one): each route observes its own requests.
  const metrics = createMetrics(app, () => plainStore.countPendingDeliveries());
  installErrorHandling(app, { bodyLimit: BODY_LIMIT, isUnavailable: (error) => error instanceof StoreUnavailableError });
  // After the error handler (its OPTIONS route answers Error bodies), before the closing check and
  // auth, so that a page can read every answer, the 503 while closing and the 401 included.
  await allowCrossOrigin(app, config.corsOrigins);
  const lifecycle = installLifecycle(app); // then nothing new starts while closing
  app.setValidatorCompiler(validatorCompiler);
  closeOnUnreadBodies(app);
  answerTransportEdges(app);
  useExactJsonBodies(app);
  // Before any route: the request spans must cover them all. Not even loaded when tracing is off.
  const tracing = config.tracing && (await (await import('./tracing.ts')).startTracing(app, config.tracing));
  await registerCompression(app);
  const store = metrics.instrument(tracing ? tracing.instrument(plainStore) : plainStore);

  const verifier = createTokenVerifier({ staticTokens: config.apiTokens, store, now: clock });
  app.addHook('onClose', () => verifier.close());
  const failures = createFailureLimiter({ max: config.authFailuresPerMinute, windowMs: 60_000, now: clock });
  const bearerAuth = await createBearerAuth(app, { verifier, failures });
  // Parsed once per process; glue and the docs each work on their own copy.
  const specification = readSpecification();
  await registerRateLimit(app, {
    perMinute: config.rateLimitPerMinute,
    redisUrl: config.redisUrl,
    redisTimeoutMs: config.timeouts.redisMs,
    onSkip: metrics.rateLimitSkipped,
  });
  adaptGlueRoutes(app, { bearerAuth, security: securityByOperation(specification) });
  await registerDocs(app, structuredClone(specification));

  const dispatcher = new WebhookDispatcher({
    store,
    log: app.log,
    ...config.webhooks,
    deliveredRetentionMs: config.webhooks.retentionMs,
    onAttempt: metrics.deliveryAttempt,
    ...(tracing && { traceAttempt: tracing.traceAttempt }),
    now: clock,
  });
  app.addHook('onReady', async () => dispatcher.start());
  // No new delivery attempt once the stop begins, though open connections are still being drained.
  lifecycle.onClosing(() => dispatcher.stop());

  const handlers: ServiceHandlers = {
    // A plant change wrote events to the outbox: deliver them now rather than at the next poll.
    ...createPlantHandlers({ store, afterChange: () => dispatcher.wake() }),
    ...createWebhookHandlers({ store, allowPrivateNetworks: config.webhooks.allowPrivateNetworks }),
    ...createHealthHandlers({ ping: () => store.ping() }),
    ...createDocsHandlers(readSpecificationText),
    getMetrics: createMetricsHandler(metrics),
  };
  await registerOpenapiGlue(app, {
    specification,
    // Glue's types ask for a whole route; its docs say these properties are added to the route it built.
    operationResolver: (operationId: string) =>
      ({ handler: handlerFor(handlers, operationId), compress: compressionOf(operationId) }) as RouteOptions,
    securityHandlers: { bearerAuth: bearerAuth.handler },
  });
  return app;
}

function serverOptions(config: AppDependencies['config'], logStream?: NodeJS.WritableStream): FastifyHttpOptions<Server> {
  return {
    logger: loggerOptions(config.logLevel, logStream),
    genReqId: requestIdFor,
    // request.ip, the address in logs and in the failed-authentication guard, is then the
    // client's as the trusted proxies report it in X-Forwarded-For.
    trustProxy: trustProxyOption(config.trustProxy),
    bodyLimit: BODY_LIMIT,
    schemaErrorFormatter: formatSchemaErrors,
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
    // Fastify's built-in 503 while closing does not match the Error schema; lifecycle.ts answers instead.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    requestTimeout: config.timeouts.requestMs,
    keepAliveTimeout: config.timeouts.keepAliveMs,
    // Node checks these limits every connectionsCheckingInterval: check often enough to honour them.
    http: { headersTimeout: config.timeouts.headersMs, connectionsCheckingInterval: 1_000, ...TRANSPORT_SERVER_OPTIONS },
  };
}

// Fastify 5.12.1 made a numeric trustProxy trust nothing (a hop count cannot tell the proxy from
// a direct client, GHSA-3m5p-2c4r-xxw2); TRUST_PROXY=<n> keeps its proxy-addr meaning, the n
// nearest hops, for deployments that only the proxies can reach, as README says.
function trustProxyOption(trustProxy: AppDependencies['config']['trustProxy']): NonNullable<FastifyHttpOptions<Server>['trustProxy']> {
  if (typeof trustProxy !== 'number') return trustProxy;
  return (_address: string, hop: number) => hop < trustProxy;
}

/** Refuses to boot when openapi.yaml names an operation no handler implements. */
export function handlerFor(handlers: ServiceHandlers, operationId: string): RouteOptions['handler'] {
  if (!Object.hasOwn(handlers, operationId)) {
    throw new Error(`openapi.yaml declares operation "${operationId}" but no handler implements it.`);
  }
  return handlers[operationId as keyof ServiceHandlers] as RouteOptions['handler'];
}

type SecurityRequirement = Record<string, string[]>;

interface GlueAdaptation {
  bearerAuth: BearerAuth;
  /** Each operation's security requirements, as openapi.yaml states them (its own, or the default). */
  security: Map<string, SecurityRequirement[]>;
}

function adaptGlueRoutes(app: FastifyInstance, adaptation: GlueAdaptation): void {
  app.addHook('onRoute', (route) => {
    const operationId = route.schema?.operationId;
    if (operationId === undefined) return;
    runSecurityBeforeValidation(route, adaptation.bearerAuth, adaptation.security.get(operationId));
    validateEveryBody(route);
    serializeJsonResponsesDirectly(route);
  });
}

// fastify-openapi-glue attaches security handlers as preHandler, which runs after body
// validation; a client without a token must get 401, not a validation error, and an
// unauthenticated body should not even be parsed. So run them as onRequest instead. The
// usual requirement, bearerAuth alone, runs as our own callback hook (cheaper than glue's
// async wrapper, see auth.ts); any other combination keeps glue's wrapper.
function runSecurityBeforeValidation(route: RouteOptions, bearerAuth: BearerAuth, security: SecurityRequirement[] | undefined): void {
  if (route.preHandler === undefined) return;
  const scopes = security?.length === 1 && Object.keys(security[0]!).join() === 'bearerAuth' ? security[0]!.bearerAuth : undefined;
  const check = scopes === undefined ? hookList(route.preHandler) : [bearerAuth.hookFor(scopes)];
  route.onRequest = [...hookList(route.onRequest), ...check];
  delete route.preHandler;
}

function securityByOperation(specification: Record<string, unknown>): Map<string, SecurityRequirement[]> {
  const spec = specification as { security?: SecurityRequirement[]; paths?: Record<string, Record<string, unknown>> };
  const security = new Map<string, SecurityRequirement[]>();
  for (const pathItem of Object.values(spec.paths ?? {})) {
    for (const operation of Object.values(pathItem)) {
      const { operationId, security: own } = (operation ?? {}) as { operationId?: string; security?: SecurityRequirement[] };
      if (operationId !== undefined) security.set(operationId, own ?? spec.security ?? []);
    }
  }
  return security;
}

// With per-media-type body schemas, Fastify skips validation when the request names no media
// type it knows (a POST without Content-Type reached the handler unvalidated). JSON is the only
// body type the contract accepts, so its schema applies to every body.
function validateEveryBody(route: RouteOptions): void {
  const body = route.schema?.body as { content?: Record<string, { schema?: unknown }> } | undefined;
  const mediaTypes = Object.keys(body?.content ?? {});
  if (mediaTypes.length !== 1 || mediaTypes[0] !== 'application/json') return;
  route.schema!.body = body!.content!['application/json']!.schema;
}

// A response schema per media type makes Fastify parse the answer's Content-Type on every reply
// to pick its serializer (0.3 µs of a 16 µs 401 in a profile). A status answered only in JSON has
// one serializer whatever the parameters of its Content-Type: give Fastify that schema directly.
function serializeJsonResponsesDirectly(route: RouteOptions): void {
  const responses = route.schema?.response as Record<string, unknown> | undefined;
  for (const [status, response] of Object.entries(responses ?? {})) {
    const content = (response as { content?: Record<string, { schema?: unknown }> }).content ?? {};
    const schema = content['application/json']?.schema;
    if (Object.keys(content).length === 1 && schema !== undefined) responses![status] = schema;
  }
}
