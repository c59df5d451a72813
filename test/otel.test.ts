// OpenTelemetry traces end to end: the real server process exports to a real OTLP/HTTP receiver
// (JSON) on loopback, which also plays the webhook subscriber. A client's traceparent is continued
// by the request span (named by operationId), store calls are its children, the request's log
// lines carry its trace id, and the webhook delivery carries the trace of the create behind it.
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freshSchemaUrl, postgresTestOptions } from './postgres.ts';
import { serverEnv, startServer, type RunningServer } from './harness/process.ts';

const TOKEN = 'otel-test-token-0123456789abcdef';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
/** Bounds every wait, so that a missing span fails the test with its name rather than at tap's timeout. */
const WAIT_LIMIT_MS = 60_000;

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: { key: string; value: { stringValue?: string; intValue?: string | number } }[];
}

interface Collector {
  url: string;
  spans: OtlpSpan[];
  webhooks: IncomingHttpHeaders[];
  /** Resolves with the first value `find` returns once something has arrived; rejects after WAIT_LIMIT_MS. */
  until<T>(what: string, find: () => T | undefined): Promise<T>;
}

/** An OTLP/HTTP receiver (POST /v1/traces, JSON, answered `tracesStatus`) and a webhook subscriber (POST /hook) on one port. */
async function startCollector(t: Test, tracesStatus = 200): Promise<Collector> {
  const spans: OtlpSpan[] = [];
  const webhooks: IncomingHttpHeaders[] = [];
  const waiters = new Set<() => void>();
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[];
        };
        for (const resource of body.resourceSpans) for (const scope of resource.scopeSpans) spans.push(...scope.spans);
      } else {
        webhooks.push(request.headers);
      }
      response.writeHead(request.url === '/v1/traces' ? tracesStatus : 200, { 'content-type': 'application/json' }).end('{}');
      for (const wake of [...waiters]) wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    webhooks,
    until: (what, find) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`never arrived: ${what}`));
        }, WAIT_LIMIT_MS);
        function check(): void {
          const found = find();
          if (found === undefined) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(found);
        }
        waiters.add(check);
        check();
      }),
  };
}

function clientTrace(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

function attribute(span: OtlpSpan, key: string): string | undefined {
  return span.attributes?.find((entry) => entry.key === key)?.value.stringValue;
}

/** The JSON log lines the request with this id wrote. */
function logLinesOf(server: RunningServer, requestId: string): { msg: string; trace_id?: string; span_id?: string }[] {
  return server
    .stdout()
    .split('\n')
    .filter((line) => line.includes(`"reqId":"${requestId}"`))
    .map((line) => JSON.parse(line) as { msg: string; trace_id?: string; span_id?: string });
}

t.test('with an OTLP endpoint, requests, store calls and webhook deliveries are traced (SQLite)', async (t) => {
  await tracedScenario(t, 'sqlite', {});
});

t.test('the same on PostgreSQL', await postgresTestOptions(), async (t) => {
  await tracedScenario(t, 'postgresql', { DATABASE_URL: await freshSchemaUrl() });
});

async function tracedScenario(t: Test, dbSystem: string, env: Record<string, string>): Promise<void> {
  const collector = await startCollector(t);
  const dir = t.testdir();
  const server = await startServer(
    t,
    serverEnv(dir, {
      ...env,
      API_TOKENS: TOKEN,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    }),
  );
  const subscribed = await fetch(`${server.url}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url: `${collector.url}/hook` }) });
  t.equal(subscribed.status, 201, 'a webhook subscriber');

  const create = clientTrace();
  const created = await fetch(`${server.url}/plants`, {
    method: 'POST',
    headers: { ...headers, traceparent: create.traceparent },
    body: JSON.stringify({ id: 7, name: 'Monstera' }),
  });
  t.equal(created.status, 200, 'the plant is created');

  const get = clientTrace();
  const got = await fetch(`${server.url}/plants/7`, { headers: { authorization: headers.authorization, traceparent: get.traceparent } });
  t.equal(got.status, 200);
  const requestId = got.headers.get('x-request-id')!;

  const requestSpan = await collector.until('the getPlant span', () => collector.spans.find((span) => span.name === 'getPlant'));
  t.equal(requestSpan.traceId, get.traceId, "the request span continues the client's trace");
  t.equal(requestSpan.parentSpanId, get.spanId, "its parent is the client's span");
  const storeSpan = await collector.until('the store.getPlant span', () =>
    collector.spans.find((span) => span.name === 'store.getPlant' && span.traceId === get.traceId),
  );
  t.equal(storeSpan.parentSpanId, requestSpan.spanId, 'the store call is a child of the request span');
  t.equal(attribute(storeSpan, 'db.system.name'), dbSystem, 'naming the database');

  const createSpan = await collector.until('the createPlant span', () => collector.spans.find((span) => span.name === 'createPlant'));
  t.equal(createSpan.traceId, create.traceId, 'the create continues its own client trace');
  t.equal(createSpan.parentSpanId, create.spanId, "its parent is that client's span");
  t.ok(
    collector.spans.some((span) => span.name === 'store.createPlant' && span.parentSpanId === createSpan.spanId),
    'its store call is a child of its span, though the handler ran once the body had arrived',
  );

  // A refusal logs from within the request too; "incoming request" is written before any hook, so before the span exists.
  const missing = clientTrace();
  const refused = await fetch(`${server.url}/plants/8`, { headers: { authorization: headers.authorization, traceparent: missing.traceparent } });
  t.equal(refused.status, 404, 'a plant that does not exist');
  for (const [trace, id] of [[get, requestId], [missing, refused.headers.get('x-request-id')!]] as const) {
    await server.waitFor('stdout', new RegExp(`"reqId":"${id}"[^\\n]*"msg":"request completed"`));
    const lines = logLinesOf(server, id).filter((line) => line.msg !== 'incoming request');
    for (const line of lines) t.equal(line.trace_id, trace.traceId, `"${line.msg}" carries the trace id`);
  }
  t.match(
    logLinesOf(server, requestId).find((line) => line.msg === 'request completed'),
    { span_id: requestSpan.spanId },
    'and the request span id',
  );
  t.ok(logLinesOf(server, refused.headers.get('x-request-id')!).some((line) => line.msg === 'request refused'), 'a line from the handling itself');

  const delivery = await collector.until('the webhook delivery', () => collector.webhooks.find((received) => received['webhook-event'] === 'plant.created'));
  const [, traceId, parentId] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(String(delivery.traceparent)) ?? [];
  t.equal(traceId, create.traceId, "the delivery's traceparent continues the trace of the create");
  const deliverySpan = await collector.until('the webhook.deliver span', () =>
    collector.spans.find((span) => span.name === 'webhook.deliver' && span.spanId === parentId),
  );
  t.equal(deliverySpan.traceId, create.traceId, 'and names the delivery span as its parent, in that trace');
}

t.test('a collector refusing the last spans, sent as the process stops, does not make the stop fail', async (t) => {
  const collector = await startCollector(t, 404);
  // Batches wait ten minutes: the spans are still pending when the stop begins.
  const env = { API_TOKENS: TOKEN, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '600000' };
  const server = await startServer(t, serverEnv(t.testdir(), env));
  t.equal((await fetch(`${server.url}/plants/1`, { headers: { authorization: headers.authorization } })).status, 404);
  const exit = await server.stop('SIGTERM');
  t.ok(
    collector.spans.some((span) => span.name === 'getPlant'),
    'the pending spans were sent as it stopped',
  );
  t.same(exit, { code: 0, signal: null }, 'the stop is still clean');
  t.match(server.stdout(), /the last spans could not be sent to the OpenTelemetry collector/, 'and the refusal is logged');
});
