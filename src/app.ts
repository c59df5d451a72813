// buildApp: the whole HTTP service on a given store, ready to inject or listen; each concern a plugin naming those it needs.
import type { Server } from 'node:http';
import Fastify, { type FastifyHttpOptions, type FastifyInstance } from 'fastify';
import { tracingOf, type Config } from './config.ts';
import contract from './contract/plugin.ts';
import { frameworkErrorHandler } from './contract/errors.ts';
import type { ServiceHandlers } from './contract/operations.ts';
import routes, { securityHooks } from './contract/routes.ts';
import { formatSchemaErrors } from './contract/validation.ts';
import { createDocsHandlers } from './docs/docs.ts';
import docs from './docs/plugin.ts';
import { AccessLog, lazyChildLogger, loggerOptions, requestIds, returnRequestId } from './observability/logging.ts';
import { createMetricsHandler } from './observability/metrics.ts';
import observability from './observability/plugin.ts';
import { createRedaction, type Redact } from './observability/redaction.ts';
import { createPlantHandlers } from './plants/handlers.ts';
import security from './security/plugin.ts';
import { readSpecification } from './spec-path.ts';
import { withOutboxTrace } from './store/plants.ts';
import type { PlantStore } from './store/types.ts';
import { compressionOf } from './transport/compression.ts';
import { answerClientError, TRANSPORT_SERVER_OPTIONS } from './transport/edges.ts';
import { createHealthHandlers } from './transport/health.ts';
import { writtenAsRead } from './transport/pages.ts';
import transport from './transport/plugin.ts';
import { createWebhookDispatcher } from './webhooks/dispatcher.ts';
import { createWebhookHandlers } from './webhooks/handlers.ts';

/** Documented in openapi.yaml as the 413 limit. */
export const BODY_LIMIT = 64 * 1024;

export interface AppDependencies {
  config: Config;
  store: PlantStore;
  /** Where JSON log lines go; stdout by default. */
  logStream?: NodeJS.WritableStream;
  /** Milliseconds since the epoch; tests move it to cross cache windows without waiting. */
  clock?: () => number;
}

export async function buildApp({ config, store: plainStore, logStream, clock = Date.now }: AppDependencies): Promise<FastifyInstance> {
  // Tokens are known at start (issued ones by their shape): one rule for logs, request ids and spans.
  const redact = createRedaction(config.API_TOKENS);
  const app = Fastify(serverOptions(config, redact, logStream));
  await app.register(observability, { pendingDeliveries: () => plainStore.webhooks.countPendingDeliveries(), tracing: tracingOf(config), withOutboxTrace, redact });
  const { instrument } = app.observability;
  const [plants, tokens, webhooks] = [instrument(plainStore.plants), instrument(plainStore.tokens), instrument(plainStore.webhooks)];
  await app.register(contract);
  await app.register(security, {
    corsOrigins: config.CORS_ORIGINS,
    tokens: { staticTokens: config.API_TOKENS, store: tokens, now: clock },
    authFailuresPerMinute: config.AUTH_FAILURES_PER_MINUTE,
    rateLimit: { perMinute: config.RATE_LIMIT_PER_MINUTE, redisUrl: config.REDIS_URL, redisTimeoutMs: config.REDIS_TIMEOUT },
  });
  await app.register(transport, { limits: config });

  const dispatcher = createWebhookDispatcher({
    store: webhooks,
    log: app.log,
    retryScheduleMs: config.WEBHOOK_RETRY_SCHEDULE,
    allowPrivateNetworks: config.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
    timeoutMs: config.WEBHOOK_TIMEOUT,
    deliveredRetentionMs: config.WEBHOOK_RETENTION,
    onAttempt: app.observability.metrics.deliveryAttempt,
    traceAttempt: app.observability.traceAttempt,
    now: clock,
  });
  app.addHook('onReady', async () => dispatcher.start());
  // No new delivery attempt once the stop begins, though open connections are still being drained.
  app.lifecycle.onClosing(() => dispatcher.stop());

  // Parsed once per process; the docs and the routes each work on their own copy.
  const specification = readSpecification();
  await app.register(docs, { specification, persistAuthorization: config.DOCS_PERSIST_AUTHORIZATION });
  // One handler per operation of openapi.yaml, named by its operationId: the type check names any missing.
  const handlers: ServiceHandlers = {
    // A plant change wrote events to the outbox: deliver them now rather than at the next poll.
    ...createPlantHandlers({ store: plants, afterChange: () => dispatcher.wake() }),
    ...createWebhookHandlers({ store: webhooks, allowPrivateNetworks: config.WEBHOOK_ALLOW_PRIVATE_NETWORKS, subscriptionsMax: config.WEBHOOK_SUBSCRIPTIONS_MAX }),
    ...createHealthHandlers({ ping: instrument({ ping: () => plainStore.ping() }).ping, stopping: () => app.lifecycle.draining }),
    ...createDocsHandlers(),
    getMetrics: createMetricsHandler(app.observability.metrics),
  };
  await app.register(routes, {
    specification,
    handlers,
    // What each route gets from its operation's facts, from the plugins that know how.
    routeOptionsFor: (facts, handler) => ({
      ...app.shedding(facts, writtenAsRead(facts, handler)),
      onRequest: securityHooks(facts, { bearerAuth: app.bearerAuth.hookFor }),
      compress: compressionOf(facts),
    }),
  });
  return app;
}

function serverOptions(config: AppDependencies['config'], redact: Redact, logStream?: NodeJS.WritableStream): FastifyHttpOptions<Server> {
  return {
    logger: loggerOptions(config.LOG_LEVEL, redact, logStream),
    logController: new AccessLog(config.LOG_LEVEL),
    childLoggerFactory: lazyChildLogger,
    genReqId: requestIds(redact),
    // request.ip (logs, the failed-authentication guard) is then the client's, as trusted proxies report it.
    trustProxy: trustProxyOption(config.TRUST_PROXY),
    bodyLimit: BODY_LIMIT,
    schemaErrorFormatter: formatSchemaErrors,
    // Answered before any onRequest hook, so the request id is put on here.
    frameworkErrors: (error, request, reply) => {
      returnRequestId(request, reply);
      frameworkErrorHandler(error, request, reply);
    },
    clientErrorHandler: answerClientError,
    // Requests arriving on open connections while closing are served (transport/lifecycle.ts), not refused.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    requestTimeout: config.REQUEST_TIMEOUT,
    keepAliveTimeout: config.KEEP_ALIVE_TIMEOUT,
    // Node checks these limits every connectionsCheckingInterval: check often enough to honour them.
    http: { headersTimeout: config.HEADERS_TIMEOUT, connectionsCheckingInterval: 1_000, ...TRANSPORT_SERVER_OPTIONS },
  };
}

// Fastify 5.12.1 made a numeric trustProxy trust nothing (GHSA-3m5p-2c4r-xxw2); TRUST_PROXY=<n> keeps the n nearest hops, as README says.
function trustProxyOption(trustProxy: Config['TRUST_PROXY']): NonNullable<FastifyHttpOptions<Server>['trustProxy']> {
  if (typeof trustProxy !== 'number') return trustProxy;
  return (_address: string, hop: number) => hop < trustProxy;
}
