// A request's id, metrics and trace; registered first, so that whatever refuses a request, it is counted and traced.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { tracingOf } from '../config.ts';
import { returnRequestId } from './logging.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import type { Redact } from './redaction.ts';
import type { TraceAttempt, WithOutboxTrace } from './tracing.ts';

export interface ObservabilityOptions {
  /** The outbox queue depth, shown in /metrics. */
  pendingDeliveries: () => Promise<number>;
  tracing?: ReturnType<typeof tracingOf>;
  withOutboxTrace: WithOutboxTrace;
  /** The rule that keeps tokens out of spans, the one the logs use. */
  redact: Redact;
}

declare module 'fastify' {
  interface FastifyInstance {
    observability: {
      metrics: Metrics;
      /** The store with every call timed, and traced when tracing is on. */
      instrument<T extends object>(store: T): T;
      /** Tracing's span around each webhook delivery attempt; absent when tracing is off. */
      traceAttempt?: TraceAttempt;
    };
  }
}

async function observability(app: FastifyInstance, options: ObservabilityOptions): Promise<void> {
  app.addHook('onRequest', (request, reply, done) => {
    returnRequestId(request, reply);
    done();
  });
  const metrics = createMetrics(app, options.pendingDeliveries);
  // Not even loaded when tracing is off.
  const tracing = options.tracing && (await (await import('./tracing.ts')).startTracing(app, options.tracing, options.withOutboxTrace, options.redact));
  app.decorate('observability', {
    metrics,
    instrument: (store) => metrics.instrument(tracing ? tracing.instrument(store) : store),
    traceAttempt: tracing?.traceAttempt,
  });
}

export default fp(observability, { name: 'observability', fastify: '5.x' });
