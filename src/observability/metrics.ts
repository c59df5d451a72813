// Prometheus metrics at GET /metrics (prom-client), in a registry per app: requests, store calls, webhooks, rate-limit skips.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { OperationHandler } from '../contract/operations.ts';

type Observe = (seconds: number) => void;

export type Metrics = ReturnType<typeof createMetrics>;

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export function createMetrics(app: FastifyInstance, pendingDeliveries: () => Promise<number>) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time to answer a request, by operation (the operationId, or "unknown"), method (one no route serves: "other") and status',
    labelNames: ['operation', 'method', 'status'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const storeLatency = new Histogram({
    name: 'store_operation_duration_seconds',
    help: 'Time the store took per method, failures included',
    labelNames: ['method', 'outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const attempts = new Counter({
    name: 'webhook_delivery_attempts_total',
    help: 'Webhook delivery attempts by result: delivered, retry (failed, will retry) or failed (for good)',
    labelNames: ['result'],
    registers: [registry],
  });
  const skippedChecks = new Counter({
    name: 'rate_limit_checks_skipped_total',
    help: 'Rate-limit checks skipped (request served unlimited) because Redis was late (timeout), unreachable (unavailable) or answered an error (error)',
    labelNames: ['reason'],
    registers: [registry],
  });
  // At 0 from the start, so a rate() over it has a series before the first skip.
  for (const reason of ['timeout', 'unavailable', 'error'] as const) skippedChecks.inc({ reason }, 0);
  registry.registerMetric(new Gauge({
    name: 'webhook_deliveries_pending',
    help: 'Webhook deliveries waiting to be sent or retried (the outbox queue depth)',
    registers: [],
    async collect() {
      try {
        this.set(await pendingDeliveries());
      } catch {
        // The last known depth stays: /metrics must answer above all while the store does not.
      }
    },
  }));

  // A method no route serves is "other", as a path no route matches is "unknown": anonymous clients add no series.
  const servedMethods = new Set<string>();
  // Each route observes its own operation's series, resolved at start; a request only looks up its method and status.
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) servedMethods.add(method);
    const observe = observerOf((route.schema as { operationId?: string } | undefined)?.operationId ?? 'unknown');
    const own = route.onResponse === undefined ? [] : [route.onResponse].flat();
    route.onResponse = [...own, (request, reply, done) => {
      observe(request.method, reply);
      done();
    }];
  });
  // The not-found handler is no route: what reaches it is counted here.
  const unmatched = observerOf('unknown');
  app.addHook('onResponse', (request, reply, done) => {
    if (request.is404) unmatched(servedMethods.has(request.method) ? request.method : 'other', reply);
    done();
  });

  /** Observes an answer of `operation` in the series of its method and status, each resolved on first use. */
  function observerOf(operation: string): (method: string, reply: FastifyReply) => void {
    const series = new Map<string, Map<number, Observe>>();
    return (method, reply) => {
      let byStatus = series.get(method);
      if (byStatus === undefined) series.set(method, (byStatus = new Map()));
      let observe = byStatus.get(reply.statusCode);
      if (observe === undefined) {
        observe = requests.labels(operation, method, String(reply.statusCode)).observe;
        byStatus.set(reply.statusCode, observe);
      }
      observe(reply.elapsedTime / 1000);
    };
  }

  return {
    registry,
    deliveryAttempt: (result: 'delivered' | 'retry' | 'failed') => attempts.inc({ result }),
    rateLimitSkipped: (reason: 'timeout' | 'unavailable' | 'error') => skippedChecks.inc({ reason }),
    instrument: <T extends object>(store: T): T =>
      wrapMethods(store, (name, method) => {
        // Series resolved on first use: /metrics shows a method once it has been called.
        let ok: Observe | undefined;
        let failed: Observe | undefined;
        return (...args) => {
          const started = performance.now();
          const result = method(...args);
          if (!(result instanceof Promise)) return result;
          // Observed beside the caller, which awaits the store's own promise: no promise chained in front of it.
          result.then(
            () => (ok ??= storeLatency.labels(name, 'ok').observe)((performance.now() - started) / 1000),
            () => (failed ??= storeLatency.labels(name, 'error').observe)((performance.now() - started) / 1000),
          );
          return result;
        };
      }),
  };
}

type Method = (...args: unknown[]) => unknown;

/** An object with each method of `object`, own and inherited, replaced once, up front, by `wrap`'s; used by tracing too. */
export function wrapMethods<T extends object>(object: T, wrap: (name: string, method: Method) => Method): T {
  const wrapped: Record<string, Method> = {};
  for (let level = object; level !== null && level !== Object.prototype; level = Object.getPrototypeOf(level)) {
    for (const name of Object.getOwnPropertyNames(level)) {
      const value: unknown = Reflect.get(object, name);
      if (name !== 'constructor' && typeof value === 'function' && !(name in wrapped)) {
        wrapped[name] = wrap(name, (value as Method).bind(object));
      }
    }
  }
  return wrapped as T;
}

export function createMetricsHandler(metrics: Metrics): OperationHandler<'getMetrics'> {
  return async (_request, reply) => reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
}
