// The request histograms are our own (series-histogram.ts, for speed); what /metrics shows must be
// exactly what prom-client's Histogram shows for the same observations.
import t from 'tap';
import { Histogram, Registry } from 'prom-client';
import { SeriesHistogram } from '../src/http/series-histogram.ts';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const OBSERVATIONS: [string[], number][] = [
  [['getPlant', 'GET', '200'], 0.0003],
  [['getPlant', 'GET', '200'], 0.0005], // on a bound: counted in that bucket
  [['getPlant', 'GET', '200'], 0.00051],
  [['createPlant', 'POST', '401'], 0.02],
  [['getPlant', 'GET', '304'], 3], // above every bound: +Inf only
  [['getPlant', 'GET', '200'], 2.5],
  [['listPlants', 'GET', '200'], 0],
];

t.test('the text exposition equals prom-client Histogram for the same observations', async (t) => {
  const expected = new Registry();
  const reference = new Histogram({ name: 'latency_seconds', help: 'A help text', labelNames: ['operation', 'method', 'status'], buckets: BUCKETS, registers: [expected] });
  const actual = new Registry();
  const ours = new SeriesHistogram({ name: 'latency_seconds', help: 'A help text', labelNames: ['operation', 'method', 'status'], buckets: BUCKETS, registers: [actual] });
  for (const [[operation, method, status], seconds] of OBSERVATIONS) {
    reference.observe({ operation: operation!, method: method!, status: status! }, seconds);
    ours.series(operation!, method!, status!)(seconds);
  }
  t.equal(await actual.metrics(), await expected.metrics(), 'the same text, line for line');
  t.match(await actual.metrics(), /latency_seconds_count\{operation="getPlant",method="GET",status="200"\} 4\n/, 'four observations of one series');
});

t.test('a series is resolved once: the same observer for the same labels', async (t) => {
  const ours = new SeriesHistogram({ name: 'x_seconds', help: 'x', labelNames: ['a', 'b'], buckets: BUCKETS, registers: [] });
  t.equal(ours.series('1', '2'), ours.series('1', '2'));
  t.not(ours.series('1', '2'), ours.series('12', ''), 'label values are not merely concatenated');
});
