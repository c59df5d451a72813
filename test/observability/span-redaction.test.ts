// The exporter every span leaves through redacts, by the logs' rule, what instrumentations this
// service does not load today would record too: url.query, http.target, cookies, arrays, maps, events, links.
import t from 'tap';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { redactingExporter } from '../../src/observability/redacting-exporter.ts';
import { createRedaction } from '../../src/observability/redaction.ts';

const ISSUED = 'pst_0123456789abcdefghijABCDEFGHIJ0123456789abcdefghij';
// Not configured: redacted by the access_token name alone.
const STATIC = 'a-static-token-from-API_TOKENS';

t.test('every text of a span is redacted on its way to the exporter', async (t) => {
  const memory = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: redactingExporter(memory, createRedaction([])) })] });
  const tracer = provider.getTracer('test');
  const linked = tracer.startSpan('linked');
  linked.end();
  const span = tracer.startSpan(`GET /plants/${ISSUED}`, {
    attributes: {
      'url.query': `limit=5&Access%255Ftoken=${STATIC}`,
      'http.target': `/plants?%61ccess_token=${STATIC}`,
      'url.full': `https://example.test/p=1?ACCESS_TOKEN+=${STATIC}?${STATIC}#x`,
      'http.request.header.cookie': [`session=1; Access_Token=${STATIC}`, 'plain'],
      'app.map': { nested: `/p/${encodeURIComponent(ISSUED).replace('p', '%70')}` },
      'http.response.status_code': 400,
    },
    links: [{ context: linked.spanContext(), attributes: { note: `?access_token=${STATIC}` } }],
  });
  span.addEvent('exception', { 'exception.message': `The request body has the unknown field "${ISSUED}".` });
  span.setStatus({ code: 2, message: `Route GET:/x?access_token=${STATIC} not found` });
  span.end();
  await provider.forceFlush();

  const [, exported] = memory.getFinishedSpans();
  t.ok(exported, 'the span was exported');
  t.equal(exported!.name, 'GET /plants/[redacted]');
  t.same(exported!.attributes, {
    'url.query': 'limit=5&Access%255Ftoken=[redacted]',
    'http.target': '/plants?%61ccess_token=[redacted]',
    'url.full': 'https://example.test/p=1?ACCESS_TOKEN+=[redacted]',
    'http.request.header.cookie': ['session=1; Access_Token=[redacted]', 'plain'],
    'app.map': { nested: '/p/[redacted]' },
    'http.response.status_code': 400,
  });
  t.equal(exported!.events[0]?.attributes?.['exception.message'], 'The request body has the unknown field "[redacted]".');
  t.equal(exported!.status.message, 'Route GET:/x?access_token=[redacted]');
  t.same(exported!.links[0]?.attributes, { note: '?access_token=[redacted]' });
  t.equal(exported!.spanContext().spanId, span.spanContext().spanId, 'the same span, identity kept');
  const text = JSON.stringify(memory.getFinishedSpans().map((finished) => [finished.name, finished.attributes, finished.events, finished.status, finished.links]));
  t.notOk(text.includes(STATIC) || text.includes(ISSUED.slice(4)), 'no token text is left anywhere');
  await provider.shutdown();
});
