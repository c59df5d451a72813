// A Prometheus histogram for the request path, exposed through a prom-client registry like any
// other metric. prom-client's own observe() validates the labels, rebuilds the series key from them
// and finds the bucket through number-keyed properties (a number-to-string conversion each) on
// every call: 1.5 µs of a 34 µs get in a profile. Here a label set is resolved to its series once
// and an observation is a bucket search and two additions. The text it produces is prom-client's
// (test/series-histogram.test.ts compares the two).
import type { Registry } from 'prom-client';

export interface SeriesHistogramOptions<Label extends string> {
  name: string;
  help: string;
  labelNames: readonly Label[];
  /** Upper bounds in seconds, ascending; +Inf is implied. */
  buckets: readonly number[];
  registers: Registry[];
}

/** Records one observation, in seconds, into one series. */
export type Observe = (seconds: number) => void;

interface Series {
  labels: Record<string, string>;
  /** Per bucket, not cumulative; the last one is +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
}

export class SeriesHistogram<Label extends string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #labelNames: readonly Label[];
  readonly #buckets: readonly number[];
  readonly #series = new Map<string, { series: Series; observe: Observe }>();

  constructor(options: SeriesHistogramOptions<Label>) {
    this.name = options.name;
    this.help = options.help;
    this.#labelNames = options.labelNames;
    this.#buckets = options.buckets;
    for (const registry of options.registers) registry.registerMetric(this as never);
  }

  /** The observer of the series with these label values, in labelNames order; created on first use. */
  series(...values: string[]): Observe {
    const key = values.join('\u0000');
    const known = this.#series.get(key);
    if (known) return known.observe;
    const labels = Object.fromEntries(this.#labelNames.map((name, index) => [name, values[index]!]));
    const series: Series = { labels, counts: new Float64Array(this.#buckets.length + 1), sum: 0, count: 0 };
    const buckets = this.#buckets;
    const observe: Observe = (seconds) => {
      let bucket = 0;
      while (bucket < buckets.length && seconds > buckets[bucket]!) bucket++;
      series.counts[bucket]!++;
      series.sum += seconds;
      series.count++;
    };
    this.#series.set(key, { series, observe });
    return observe;
  }

  /** What prom-client's registry reads to expose the metric: cumulative buckets, sum and count per series. */
  get() {
    const values = [];
    for (const { series } of this.#series.values()) {
      let cumulative = 0;
      for (let bucket = 0; bucket <= this.#buckets.length; bucket++) {
        cumulative += series.counts[bucket]!;
        const le = bucket < this.#buckets.length ? this.#buckets[bucket]! : '+Inf';
        values.push({ labels: { le, ...series.labels }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels: series.labels, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: series.labels, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}
