// The request latency histogram as /metrics shows it (prom-client's Histogram): one series per
// operation, method and status, with every bucket bound, cumulative counts, a sum and a count.
import t from 'tap';
import { api, build } from './helper.ts';

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
