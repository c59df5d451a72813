// Spans leave only through this exporter, which redacts each text a span carries by the logs' rule, whoever recorded it.
import type { Attributes, Link } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter, TimedEvent } from '@opentelemetry/sdk-trace';
import type { Redact } from './redaction.ts';

export function redactingExporter(exporter: SpanExporter, redact: Redact): SpanExporter {
  return {
    export: (spans, resultCallback) => exporter.export(spans.map((span) => redactSpan(span, redact)), resultCallback),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}

/** A copy of the span, field by field as ReadableSpan declares them, with its texts redacted. */
function redactSpan(span: ReadableSpan, redact: Redact): ReadableSpan {
  const { message } = span.status;
  return {
    name: redact(span.name),
    kind: span.kind,
    spanContext: () => span.spanContext(),
    ...(span.parentSpanContext && { parentSpanContext: span.parentSpanContext }),
    startTime: span.startTime,
    endTime: span.endTime,
    status: message === undefined ? span.status : { ...span.status, message: redact(message) },
    attributes: redactAttributes(span.attributes, redact),
    links: span.links.map((link) => redactLink(link, redact)),
    events: span.events.map((event) => redactEvent(event, redact)),
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

function redactEvent(event: TimedEvent, redact: Redact): TimedEvent {
  return { ...event, name: redact(event.name), ...(event.attributes && { attributes: redactAttributes(event.attributes, redact) }) };
}

function redactLink(link: Link, redact: Redact): Link {
  return link.attributes ? { ...link, attributes: redactAttributes(link.attributes, redact) } : link;
}

function redactAttributes(attributes: Attributes, redact: Redact): Attributes {
  return Object.fromEntries(Object.entries(attributes).map(([key, value]) => [key, redactValue(value, redact)]));
}

// Attribute values may be strings, arrays and maps of them (AnyValue); bytes and numbers carry no text.
function redactValue(value: unknown, redact: Redact): unknown {
  if (typeof value === 'string') return redact(value);
  if (Array.isArray(value)) return value.map((item) => redactValue(item, redact));
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return redactAttributes(value as Attributes, redact);
  }
  return value;
}
