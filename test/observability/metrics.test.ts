// The request latency histogram as /metrics shows it (prom-client's Histogram): one series per
// operation, method and status, with every bucket bound, cumulative counts, a sum and a count; and
// a number of series that what anonymous clients send cannot raise.
import { METHODS, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { api, build } from '../harness/helper.ts';

const BOUNDS = ['0.0005', '0.001', '0.0025', '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '+Inf'];
const SERIES = 'operation="getHealth",method="GET",status="200"';

t.test('/metrics: the request histogram has every bucket, cumulative, with its sum and count', async (t) => {
  const { app } = await build(t);
  for (let i = 0; i < 3; i++) t.equal((await api(t, app, { method: 'GET', url: '/healthz' })).statusCode, 200);
  const text = (await api(t, app, { method: 'GET', url: '/metrics' })).body;

  t.match(text, /^# HELP http_request_duration_seconds \S/m, 'a help line');
  t.match(text, /^# TYPE http_request_duration_seconds histogram$/m, 'typed as a histogram');
  const buckets = [...text.matchAll(new RegExp(`^http_request_duration_seconds_bucket\\{le="([^"]+)",${SERIES}\\} (\\d+)$`, 'gm'))];
  t.same(buckets.map((bucket) => bucket[1]), BOUNDS, 'one line per bound, in order, ending with +Inf');
  const counts = buckets.map((bucket) => Number(bucket[2]));
  t.ok(counts.every((count, i) => i === 0 || count >= counts[i - 1]!), `cumulative: ${counts.join(' ')}`);
  t.equal(counts.at(-1), 3, 'the +Inf bucket holds every observation');
  t.match(text, new RegExp(`^http_request_duration_seconds_count\\{${SERIES}\\} 3$`, 'm'), 'the count');
  const sum = Number(new RegExp(`^http_request_duration_seconds_sum\\{${SERIES}\\} (\\S+)$`, 'm').exec(text)?.[1]);
  t.ok(sum > 0, `the sum of the latencies in seconds: ${sum}`);
});

/** One request on a new connection, its answer read to the end; its status (0: the connection failed). */
function send(port: number, method: string, path: string): Promise<number> {
  return new Promise((resolve) => {
    const outgoing = request({ port, host: '127.0.0.1', method, path, agent: false }, (incoming) => {
      incoming.resume();
      incoming.on('end', () => resolve(incoming.statusCode ?? 0));
    });
    outgoing.on('error', () => resolve(0));
    outgoing.end();
  });
}

/** /metrics, plain, and the label sets of its request histogram's series. */
async function requestSeries(port: number): Promise<{ bytes: number; series: string[] }> {
  const text = await new Promise<string>((resolve, reject) => {
    request({ port, host: '127.0.0.1', path: '/metrics', agent: false }, (incoming) => {
      let body = '';
      incoming.setEncoding('utf8');
      incoming.on('data', (chunk: string) => (body += chunk));
      incoming.on('end', () => resolve(body));
    }).on('error', reject).end();
  });
  const series = [...text.matchAll(/^http_request_duration_seconds_count\{(.*)\} \d+$/gm)].map((match) => match[1]!);
  return { bytes: Buffer.byteLength(text), series: series.sort() };
}

t.test('/metrics does not grow with what anonymous clients send: methods no route serves fold into "other"', async (t) => {
  const { app } = await build(t);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const paths = ['/plants', '/plants/1', '/nowhere', '/metrics', '/plants?x=%zz'];
  // Every method a route serves (OPTIONS too: build() sets CORS_ORIGINS, whose preflights are
  // routed), and one it does not, on each path: the series that may exist.
  const routed = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS'];
  for (const method of [...routed, 'PROPFIND']) {
    for (const path of paths) t.not(await send(port, method, path), 0, `${method} ${path} answered`);
  }
  await requestSeries(port);
  const before = await requestSeries(port);

  // Every other method Node parses (CONNECT is not routed), on those paths and on new ones.
  const odd = METHODS.filter((method) => method !== 'CONNECT' && !routed.includes(method));
  for (const method of odd) {
    for (const path of [...paths, `/${method.toLowerCase()}/${Math.random()}`]) t.not(await send(port, method, path), 0, `${method} ${path} answered`);
  }
  const after = await requestSeries(port);
  t.same(after.series, before.series, `${odd.length} more methods add no series: /metrics ${before.bytes} bytes, then ${after.bytes}`);
  t.ok(after.series.some((labels) => labels.includes('method="other"')), 'they are counted, as "other"');
  t.notOk(after.series.some((labels) => /method="(?:PROPFIND|PATCH|MKCOL|QUERY)"/.test(labels)), 'under no method of their own');
});
