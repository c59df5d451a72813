// OpenTelemetry traces end to end: the real server process exports to a real OTLP/HTTP receiver
// (JSON) on loopback, which also plays the webhook subscriber. A client's traceparent is continued
// by the request span (named by operationId), store calls are its children, the request's log
// lines carry its trace id, and the webhook delivery carries the trace of the create behind it.
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freshSchemaUrl, postgresTestOptions } from '../harness/postgres.ts';
import { serverEnv, startServer, type RunningServer } from '../harness/process.ts';
import { rawExchange, rawResponses } from '../harness/raw-http.ts';
import { generateToken } from '../../src/tokens/format.ts';

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
  status?: { message?: string };
  events?: { name: string; attributes?: OtlpSpan['attributes'] }[];
}

interface Collector {
  url: string;
  spans: OtlpSpan[];
  /** Every export as it arrived, JSON text, and the headers it came with. */
  exports: string[];
  exportHeaders: IncomingHttpHeaders[];
  webhooks: IncomingHttpHeaders[];
  /** Resolves with the first value `find` returns once something has arrived; rejects after WAIT_LIMIT_MS. */
  until<T>(what: string, find: () => T | undefined): Promise<T>;
}

/** An OTLP/HTTP receiver (POST `tracesPath`, JSON, answered `tracesStatus`) and a webhook subscriber (POST /hook) on one port. */
async function startCollector(t: Test, tracesStatus = 200, tracesPath = '/v1/traces'): Promise<Collector> {
  const spans: OtlpSpan[] = [];
  const exports: string[] = [];
  const exportHeaders: IncomingHttpHeaders[] = [];
  const webhooks: IncomingHttpHeaders[] = [];
  const waiters = new Set<() => void>();
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url === tracesPath) {
        exports.push(Buffer.concat(chunks).toString('utf8'));
        exportHeaders.push(request.headers);
        const body = JSON.parse(exports.at(-1)!) as {
          resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[];
        };
        for (const resource of body.resourceSpans) for (const scope of resource.scopeSpans) spans.push(...scope.spans);
      } else {
        webhooks.push(request.headers);
      }
      response.writeHead(request.url === tracesPath ? tracesStatus : 200, { 'content-type': 'application/json' }).end('{}');
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
    exports,
    exportHeaders,
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

function attribute(span: Pick<OtlpSpan, 'attributes'>, key: string): string | undefined {
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

  // A refusal's reason is on its access line; every line at info is written once the span exists.
  const missing = clientTrace();
  const refused = await fetch(`${server.url}/plants/8`, { headers: { authorization: headers.authorization, traceparent: missing.traceparent } });
  t.equal(refused.status, 404, 'a plant that does not exist');
  for (const [trace, id] of [[get, requestId], [missing, refused.headers.get('x-request-id')!]] as const) {
    await server.waitFor('stdout', new RegExp(`"reqId":"${id}"[^\\n]*"msg":"request completed"`));
    for (const line of logLinesOf(server, id)) t.equal(line.trace_id, trace.traceId, `"${line.msg}" carries the trace id`);
  }
  t.match(
    logLinesOf(server, requestId).find((line) => line.msg === 'request completed'),
    { span_id: requestSpan.spanId },
    'and the request span id',
  );
  t.match(
    logLinesOf(server, refused.headers.get('x-request-id')!).find((line) => line.msg === 'request completed'),
    { res: { statusCode: 404 }, reason: ((await refused.json()) as { message: string }).message },
    'its access line gives the reason it was refused',
  );

  const delivery = await collector.until('the webhook delivery', () => collector.webhooks.find((received) => received['webhook-event'] === 'plant.created'));
  const [, traceId, parentId] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(String(delivery.traceparent)) ?? [];
  t.equal(traceId, create.traceId, "the delivery's traceparent continues the trace of the create");
  const deliverySpan = await collector.until('the webhook.deliver span', () =>
    collector.spans.find((span) => span.name === 'webhook.deliver' && span.spanId === parentId),
  );
  t.equal(deliverySpan.traceId, create.traceId, 'and names the delivery span as its parent, in that trace');
}

t.test('the OpenTelemetry SDK reads its own variables: the traces endpoint, headers, resource and sampler', async (t) => {
  const collector = await startCollector(t, 200, '/custom/traces');
  const env = {
    API_TOKENS: TOKEN,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/custom/traces`,
    OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-key=key-0123',
    OTEL_SERVICE_NAME: 'plants-eu',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=staging',
    OTEL_TRACES_SAMPLER: 'parentbased_always_off',
    OTEL_BSP_SCHEDULE_DELAY: '100',
  };
  const server = await startServer(t, serverEnv(t.testdir(), env));
  // Without a client trace the request span is a root, which parentbased_always_off does not sample.
  t.equal((await fetch(`${server.url}/plants/1`, { headers: { authorization: headers.authorization } })).status, 404);
  const sampled = clientTrace();
  t.equal((await fetch(`${server.url}/plants/2`, { headers: { authorization: headers.authorization, traceparent: sampled.traceparent } })).status, 404);
  await collector.until('the span of the sampled request', () => collector.spans.find((span) => span.traceId === sampled.traceId && span.name === 'getPlant'));
  // Spans are exported in the order they ended: the root's would have come first.
  t.same([...new Set(collector.spans.map((span) => span.traceId))], [sampled.traceId], 'only the sampled trace was exported');
  t.equal(collector.exportHeaders[0]?.['x-collector-key'], 'key-0123', 'with the configured headers');
  const resource = (JSON.parse(collector.exports[0]!) as { resourceSpans: { resource: Pick<OtlpSpan, 'attributes'> }[] }).resourceSpans[0]!.resource;
  t.equal(attribute(resource, 'service.name'), 'plants-eu', 'named by OTEL_SERVICE_NAME');
  t.equal(attribute(resource, 'deployment.environment.name'), 'staging', 'with the attributes of OTEL_RESOURCE_ATTRIBUTES');
});

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

/** A token in the issued shape (pst_ + base62), random so that its text can only come from this test. */
function issuedShape(): string {
  const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  return `pst_${Array.from(randomBytes(49), (byte) => alphabet[byte % alphabet.length]).join('')}`;
}

/** The text a backend could show: JSON escapes undone, then percent-encoding undone, however often it was applied. */
function decoded(exported: string): string {
  let text = JSON.stringify(JSON.parse(exported));
  for (let next = percentDecodedOnce(text); next !== text; next = percentDecodedOnce(text)) text = next;
  return text;
}

t.test('no token reaches the collector: queries, encoded names, paths, headers, error messages and webhook targets are redacted in spans', async (t) => {
  const collector = await startCollector(t);
  const env = { API_TOKENS: TOKEN, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '100' };
  const server = await startServer(t, serverEnv(t.testdir(), env));
  const issued = issuedShape();
  const everyByteEncoded = [...issued].map((char) => `%${char.charCodeAt(0).toString(16)}`).join('');
  const bearer = { authorization: `Bearer ${TOKEN}` };
  // Each request: what it sends, the status it gets, and the url.path its span must carry.
  const requests: { path: string; headers: Record<string, string>; status: number; expected: string; body?: string }[] = [
    { path: `/plants?access_token=${TOKEN}`, headers: {}, status: 400, expected: '/plants?access_token=[redacted]' },
    { path: `/plants?limit=5&%61ccess_token=${TOKEN}`, headers: bearer, status: 400, expected: '/plants?limit=5&%61ccess_token=[redacted]' },
    // Not a name the query parser reads as access_token, so served; still redacted, in any case.
    { path: `/plants?ACCESS%5FTOKEN=${issued}`, headers: bearer, status: 200, expected: '/plants?ACCESS%5FTOKEN=[redacted]' },
    { path: `/plants/${issued}`, headers: bearer, status: 400, expected: '/plants/[redacted]' },
    { path: `/no-such-route/${issued}?tag=${everyByteEncoded}`, headers: bearer, status: 404, expected: '/no-such-route/[redacted]?tag=[redacted]' },
    { path: '/plants?limit=1', headers: { authorization: `Bearer ${issued}` }, status: 401, expected: '/plants?limit=1' },
    // Error messages that quote the token, which become the span's status message and exception event.
    { path: `/webhooks/${issued}`, headers: bearer, status: 404, expected: '/webhooks/[redacted]' },
    { path: '/plants', headers, status: 400, expected: '/plants', body: JSON.stringify({ id: 2, name: 'Fern', [issued]: 1 }) },
  ];
  const spans: OtlpSpan[] = [];
  for (const request of requests) {
    const sent = clientTrace();
    const init = request.body === undefined ? {} : { method: 'POST', body: request.body };
    const response = await fetch(`${server.url}${request.path}`, { ...init, headers: { ...request.headers, traceparent: sent.traceparent } });
    t.equal(response.status, request.status, request.expected);
    // Found by its trace, not its path, so that an unredacted span is found too.
    spans.push(
      await collector.until(`the span of ${request.expected}`, () =>
        collector.spans.find((span) => span.traceId === sent.traceId && attribute(span, 'url.path') !== undefined),
      ),
    );
  }
  const subscribed = await fetch(`${server.url}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url: `${collector.url}/hook?access_token=${TOKEN}` }) });
  t.equal(subscribed.status, 201, 'a subscriber whose address carries a token');
  t.equal((await fetch(`${server.url}/plants`, { method: 'POST', headers, body: JSON.stringify({ id: 1, name: 'Fern' }) })).status, 200);
  const delivery = await collector.until('the webhook.deliver span', () => collector.spans.find((span) => span.name === 'webhook.deliver'));

  const exported = collector.exports.map(decoded).join('\n');
  t.notOk(exported.includes(TOKEN), 'the static token, sent as a header, as access_token and in a webhook address, is in no export');
  t.notOk(exported.includes(issued.slice(4)), 'the issued-shape token, sent in paths, queries, a header and a body, is in no export');
  requests.forEach((request, index) => t.equal(attribute(spans[index]!, 'url.path'), request.expected, `the span is there, its url.path redacted: ${request.expected}`));
  t.equal(attribute(spans[0]!, 'http.route'), '/plants', 'and keeps its route');
  const message = 'The request body has the unknown field "[redacted]".';
  t.equal(spans.at(-1)!.status?.message, message, 'an error message quoting the token is redacted in the status');
  t.equal(attribute(spans.at(-1)!.events?.find((event) => event.name === 'exception') ?? {}, 'exception.message'), message, 'and in the exception event');
  t.equal(attribute(delivery, 'url.full'), `${collector.url}/hook?access_token=[redacted]`, "the delivery span's url.full is redacted too");
});

// Every byte as %XX: what encodeURIComponent leaves alone (letters, digits, _) is encoded too.
function everyByteEncoded(text: string): string {
  return [...text].map((char) => `%${char.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('');
}

/** `text` percent-encoded `times` times: every byte the first time, then each % again (%25). */
function encodedTimes(text: string, times: number): string {
  let encoded = everyByteEncoded(text);
  for (let round = 1; round < times; round++) encoded = encodeURIComponent(encoded);
  return encoded;
}

/** Every text a reader of this JSON could see: each key and string, then each of its percent-decodings, round after round until none is left. */
function readableForms(json: string): string[] {
  const strings: string[] = [];
  const walk = (value: unknown): void => {
    if (typeof value === 'string') strings.push(value);
    else if (Array.isArray(value)) value.forEach(walk);
    else if (value !== null && typeof value === 'object') {
      for (const [key, inner] of Object.entries(value)) {
        strings.push(key);
        walk(inner);
      }
    }
  };
  walk(JSON.parse(json));
  return strings.flatMap((text) => {
    const forms = [text];
    for (let next = percentDecodedOnce(text); next !== forms.at(-1); next = percentDecodedOnce(next)) forms.push(next);
    return forms;
  });
}

function percentDecodedOnce(text: string): string {
  return text.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

t.test('no configured token reaches a log line or the collector, in a path, any query parameter or a logged header, however often encoded', async (t) => {
  const collector = await startCollector(t);
  const plain = 'static-Token-0123456789abcdef';
  // Characters a URL reads as delimiters, a + the query parser reads as a space, and a %41 that decodes further.
  const tricky = 'Tr1cky+/=&?%41;t0ken';
  const issued = generateToken();
  const secrets = [plain, tricky, tricky.replaceAll('+', ' '), issued, issued.slice(4)];
  const leaks = (texts: string[]) =>
    texts.flatMap(readableForms).flatMap((text) => secrets.filter((secret) => text.includes(secret)).map((secret) => `${secret} in ${text.slice(0, 120)}`));
  const env = { API_TOKENS: `${plain},${tricky}`, TRUST_PROXY: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '100' };
  const server = await startServer(t, serverEnv(t.testdir(), env));
  const port = Number(new URL(server.url).port);

  // Each token as sent, encoded by encodeURIComponent, and every byte encoded 1, 3, 5 and 7 times.
  const forms = [plain, tricky, issued].flatMap((token) => [token, encodeURIComponent(token), ...[1, 3, 5, 7].map((times) => encodedTimes(token, times))]);
  const requests: { path: string; headers?: Record<string, string> }[] = forms.flatMap((form) =>
    [`/plants/${form}`, `/no-such-route/${form}`, `/plants?q=${form}`, `/plants?x=${form}&y=1`].map((path) => ({ path })),
  );
  // The headers whose values are logged (as host, remoteAddress, reqId; TRUST_PROXY reads X-Forwarded-*).
  for (const token of [plain, issued]) {
    for (const header of ['host', 'x-forwarded-host', 'x-forwarded-for', 'x-request-id']) requests.push({ path: '/plants?limit=1', headers: { [header]: token } });
  }

  const sent: { label: string; id: string; traceId?: string; path: string }[] = [];
  for (const [index, request] of requests.entries()) {
    const trace = clientTrace();
    const headers = { host: 'localhost', 'x-request-id': `redaction-${index}`, authorization: `Bearer ${plain}`, traceparent: trace.traceparent, connection: 'close', ...request.headers };
    const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
    const [response] = rawResponses(await rawExchange(port, `GET ${request.path} HTTP/1.1\r\n${lines.join('')}\r\n`));
    const label = `${request.path.slice(0, 70)} ${JSON.stringify(request.headers ?? {})}`;
    t.ok(response && response.statusCode < 500, `answered: ${label}`);
    // Refused by the router before any hook (a path parameter over 100 characters): logged, not traced.
    const routed = !response!.body.includes('A path parameter of the URL is too long.');
    const id = response!.headers['x-request-id'] ?? headers['x-request-id'];
    await server.waitFor('stdout', new RegExp(`"reqId":"${id}"[^\\n]*"msg":"request completed"`));
    sent.push({ label, id, path: request.path, ...(routed && { traceId: trace.traceId }) });
  }

  const logLines = server.stdout().split('\n').filter(Boolean);
  for (const request of sent) {
    const lines = logLines.filter((line) => line.includes(`"reqId":"${request.id}"`));
    const texts = [...lines];
    if (request.traceId !== undefined) {
      const { traceId } = request;
      const span = await collector.until(`the span of ${request.label}`, () => collector.spans.find((span) => span.traceId === traceId && attribute(span, 'url.path') !== undefined));
      if (request.path !== '/plants?limit=1') t.match(attribute(span, 'url.path'), /\[redacted\]/, `url.path redacted: ${request.label}`);
      texts.push(...collector.spans.filter((span) => span.traceId === traceId).map((span) => JSON.stringify(span)));
    }
    t.ok(lines.length > 0, `logged: ${request.label}`);
    t.same(leaks(texts), [], `no token in its log lines or spans, in any decoding: ${request.label}`);
  }
  t.same(leaks([...logLines, ...collector.exports]), [], 'no token in any log line or export');
  t.notOk(server.stderr().includes(plain), 'nor on stderr');
});

t.test('a webhook target holding a token is logged and exported redacted when its deliveries fail', async (t) => {
  const collector = await startCollector(t);
  const refusing = createServer((request, response) => request.resume().on('end', () => response.writeHead(500).end()));
  await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    refusing.closeAllConnections();
    refusing.close();
  });
  const plain = 'static-Token-0123456789abcdef';
  const issued = generateToken();
  const env = {
    API_TOKENS: plain,
    LOG_LEVEL: 'debug',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOK_RETRY_SCHEDULE: '1ms',
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    OTEL_BSP_SCHEDULE_DELAY: '100',
  };
  const server = await startServer(t, serverEnv(t.testdir(), env));
  const headers = { authorization: `Bearer ${plain}`, 'content-type': 'application/json' };
  const target = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}/hook/${plain}?q=${encodedTimes(issued, 5)}`;
  t.equal((await fetch(`${server.url}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url: target }) })).status, 201, 'a subscriber');
  t.equal((await fetch(`${server.url}/plants`, { method: 'POST', headers, body: JSON.stringify({ id: 1, name: 'Fern' }) })).status, 200);
  const [line] = await server.waitFor('stdout', /^.*"msg":"webhook delivery failed for good after its last attempt".*$/m);
  t.match(JSON.parse(line), { url: /^http:\/\/127\.0\.0\.1:\d+\/hook\/\[redacted\]\?q=\[redacted\]$/ }, 'the target is logged, redacted');
  await collector.until('both webhook.deliver spans', () => (collector.spans.filter((span) => span.name === 'webhook.deliver').length === 2 ? true : undefined));
  const texts = [...server.stdout().split('\n').filter(Boolean), ...collector.exports].flatMap(readableForms);
  t.same(
    texts.filter((text) => text.includes(plain) || text.includes(issued.slice(4))),
    [],
    'neither token is in any log line or export, in any decoding',
  );
});
