// OpenTelemetry traces, loaded only when OTEL_* sets an endpoint: a span per request, store call and webhook attempt.
import { FastifyOtelInstrumentation } from '@fastify/otel';
import { context, diag, DiagLogLevel, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type DiagLogger, type Span } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { ATTR_DB_SYSTEM_NAME, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_SERVICE_NAME, ATTR_URL_FULL } from '@opentelemetry/semantic-conventions';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { tracingOf } from '../config.ts';
import { wrapMethods } from './metrics.ts';
import { redactingExporter } from './redacting-exporter.ts';
import type { Redact } from './redaction.ts';

/** What one webhook delivery attempt came to: the receiver's status, or why there was none. */
export interface AttemptResult {
  status?: number;
  error?: string;
}
/** Runs one delivery attempt (the dispatcher's), in a span when tracing is on; the attempt sends the headers it is given. */
export type TraceAttempt = (
  delivery: { traceparent?: string; event: string; messageId: string; url: string },
  attempt: (headers: Record<string, string>) => Promise<AttemptResult>,
) => Promise<AttemptResult>;

/** Runs a store call with the traceparent the store keeps with the webhook events that call writes. */
export type WithOutboxTrace = <T>(traceparent: string, call: () => T) => T;

const TRACER = 'plant-store';
const FLUSH_ON_CLOSE_MS = 2_000;

/** Sets up the SDK, and instruments the app: call before any route or hook is added. */
export async function startTracing(app: FastifyInstance, { dbSystem }: NonNullable<ReturnType<typeof tracingOf>>, withOutboxTrace: WithOutboxTrace, redact: Redact) {
  const instrumentation = new FastifyOtelInstrumentation({
    // One span per request: no span per hook or handler, which would cost on every request.
    instrumentHooks: false,
    instrumentHandler: false,
    requestHook: nameByOperation,
  });
  // The SDK and the exporter read OTEL_* themselves, as the specification defines them.
  const sdk = new NodeSDK({
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, read by the SDK's detectors, win over this name.
    resource: defaultResource().merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: TRACER })),
    traceExporter: redactingExporter(new OTLPTraceExporter(), redact),
    instrumentations: [instrumentation],
    // Metrics are served at /metrics and logs written to stdout: neither is sent to the collector.
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  // The SDK's own troubles (a collector refusing spans) would otherwise go unsaid.
  diag.setLogger(diagnosticsTo(app.log), DiagLogLevel.WARN);
  // The last spans are sent, but a collector that does not answer must not hold the stop, nor one that refuses them fail it.
  app.addHook('onClose', async () => {
    const flushed = sdk.shutdown().catch((error: unknown) => app.log.warn({ err: error }, 'the last spans could not be sent to the OpenTelemetry collector'));
    await Promise.race([flushed, sleep(FLUSH_ON_CLOSE_MS, undefined, { ref: false })]);
  });
  await app.register(instrumentation.plugin());
  app.addHook('onRequest', bindTraceToLogs);

  const tracer = trace.getTracer(TRACER);
  // Each attempt continues the trace of the change that queued it.
  const traceAttempt: TraceAttempt = (delivery, attempt) => {
    const parent = delivery.traceparent ? propagation.extract(ROOT_CONTEXT, { traceparent: delivery.traceparent }) : ROOT_CONTEXT;
    const attributes = { 'webhook.event': delivery.event, 'webhook.message_id': delivery.messageId, [ATTR_URL_FULL]: delivery.url };
    return tracer.startActiveSpan('webhook.deliver', { kind: SpanKind.CLIENT, attributes }, parent, async (span) => {
      const headers: Record<string, string> = {};
      propagation.inject(context.active(), headers);
      return ended(span, attempt(headers).then((result) => recordAttempt(span, result)));
    });
  };
  return {
    instrument: <T extends object>(store: T): T => wrapMethods(store, (name, method) => (...args) => storeSpan(name, () => method(...args))),
    traceAttempt,
  };

  function storeSpan<T>(name: string, call: () => T): T {
    // Store calls outside a request or delivery (the dispatcher's polls) would each start a trace of their own.
    if (trace.getSpan(context.active()) === undefined) return call();
    const attributes = { [ATTR_DB_SYSTEM_NAME]: dbSystem, 'db.system': dbSystem };
    return tracer.startActiveSpan(`store.${name}`, { kind: SpanKind.CLIENT, attributes }, (span) => {
      const result = withOutboxTrace(traceparentOf(context.active()), call);
      return result instanceof Promise ? (ended(span, result) as T) : (span.end(), result);
    });
  }
}

function diagnosticsTo(log: FastifyBaseLogger): DiagLogger {
  const say = (level: 'warn' | 'debug') => (message: string, ...args: unknown[]) => log[level]({ opentelemetry: args }, `OpenTelemetry: ${message}`);
  return { error: say('warn'), warn: say('warn'), info: say('debug'), debug: say('debug'), verbose: say('debug') };
}

function nameByOperation(span: Span, request: FastifyRequest): void {
  const operationId = (request.routeOptions.schema as { operationId?: string } | undefined)?.operationId;
  if (operationId !== undefined) span.updateName(operationId);
}

// Every line the request logs from here on carries its trace ("incoming request", logged before, has its reqId).
function bindTraceToLogs(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const span = request.opentelemetry().span;
  if (span) {
    const { traceId, spanId } = span.spanContext();
    request.log = request.log.child({ trace_id: traceId, span_id: spanId });
    reply.log = request.log;
  }
  done();
}

function traceparentOf(active: Context): string {
  const carrier: Record<string, string> = {};
  propagation.inject(active, carrier);
  return carrier.traceparent ?? '';
}

function recordAttempt(span: Span, result: AttemptResult): AttemptResult {
  if (result.status !== undefined) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, result.status);
  if (result.error !== undefined || (result.status !== undefined && (result.status < 200 || result.status >= 300))) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: result.error ?? `the receiver answered ${result.status}` });
  }
  return result;
}

function ended<T>(span: Span, promise: Promise<T>): Promise<T> {
  const failed = (error: unknown) => {
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message });
    throw error;
  };
  return promise.catch(failed).finally(() => span.end());
}
