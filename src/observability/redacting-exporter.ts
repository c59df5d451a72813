// Spans leave the process only through this exporter, which applies the logs' redaction rule
// (redaction.ts) to every text a span carries: its name, attributes (url.path, url.query,
// http.target, url.full, whatever an instrumentation records), status message, events (exceptions)
// and links. Wrapping the exporter, a public SDK interface, covers every instrumentation at once.
import type { Attributes, Link } from '@opentelemetry/api';
import type { ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter, TimedEvent } from '@opentelemetry/sdk-trace';
import { redactTokens } from './redaction.ts';

export class RedactingExporter implements SpanExporter {
  readonly #exporter: SpanExporter;

  constructor(exporter: SpanExporter) {
    this.#exporter = exporter;
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.#exporter.export(spans.map(redactSpan), resultCallback);
  }

  shutdown(): Promise<void> {
    return this.#exporter.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#exporter.forceFlush?.() ?? Promise.resolve();
  }
}

/** A copy of the span, field by field as ReadableSpan declares them, with its texts redacted. */
export function redactSpan(span: ReadableSpan): ReadableSpan {
  const { message } = span.status;
  return {
    name: redactTokens(span.name),
    kind: span.kind,
    spanContext: () => span.spanContext(),
    ...(span.parentSpanContext && { parentSpanContext: span.parentSpanContext }),
    startTime: span.startTime,
    endTime: span.endTime,
    status: message === undefined ? span.status : { ...span.status, message: redactTokens(message) },
    attributes: redactAttributes(span.attributes),
    links: span.links.map(redactLink),
    events: span.events.map(redactEvent),
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

function redactEvent(event: TimedEvent): TimedEvent {
  return { ...event, name: redactTokens(event.name), ...(event.attributes && { attributes: redactAttributes(event.attributes) }) };
}

function redactLink(link: Link): Link {
  return link.attributes ? { ...link, attributes: redactAttributes(link.attributes) } : link;
}

function redactAttributes(attributes: Attributes): Attributes {
  return Object.fromEntries(Object.entries(attributes).map(([key, value]) => [key, redactValue(value)]));
}

// Attribute values may be strings, arrays and maps of them (AnyValue); bytes and numbers carry no text.
function redactValue(value: unknown): unknown {
  if (typeof value === 'string') return redactTokens(value);
  if (Array.isArray(value)) return value.map(redactValue);
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return redactAttributes(value as Attributes);
  }
  return value;
}
