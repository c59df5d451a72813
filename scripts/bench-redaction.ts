// What the token redaction costs each logged request (npm run bench:redaction). Times, in-process,
// the rule the logs apply to a request's url, host and address (src/observability/redaction.ts),
// with 1 to 1,000 tokens in API_TOKENS, against JSON.stringify of the same three fields measured in
// the same run (the least pino does with them). BENCH_BEFORE=<another checkout> adds that checkout's
// rule (its createRedaction, or the redactTokens of before API_TOKENS were known) as a column. Then a
// URL percent-encoded as deep as its length allows, at growing lengths: decoding to the end must cost
// time in proportion to the length, not to the depth.
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createRedaction, type Redact } from '../src/observability/redaction.ts';
import { generateToken } from '../src/tokens/format.ts';
import { integerSetting } from '../test/harness/settings.ts';

const ROUNDS = integerSetting('BENCH_ROUNDS', 5, 1);
const CALLS = integerSetting('BENCH_CALLS', 200_000, 1);

const REQUESTS: { name: string; url: string; host: string; address: string }[] = [
  { name: 'GET /plants/7', url: '/plants/7', host: '127.0.0.1:3000', address: '127.0.0.1' },
  { name: 'a page with a cursor', url: '/plants?limit=100&tag=aroid&cursor=eyJpZCI6IjEyMzQ1Njc4OSJ9', host: 'plants.example.com', address: '10.1.2.3' },
  { name: 'a query with %-encoding', url: '/plants?tag=house%20plants&limit=50', host: 'plants.example.com', address: '2001:db8::1' },
  { name: 'an encoded token (redacted)', url: `/plants?q=${encodeURIComponent(encodeURIComponent(generateToken()))}`, host: 'plants.example.com', address: '10.1.2.3' },
];

/** Nanoseconds per call of `work`, the median of ROUNDS rounds. */
function nsPerCall(work: () => unknown, calls = CALLS): number {
  const rounds: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const started = process.hrtime.bigint();
    for (let call = 0; call < calls; call++) work();
    rounds.push(Number(process.hrtime.bigint() - started) / calls);
  }
  return rounds.sort((a, b) => a - b)[Math.floor(rounds.length / 2)]!;
}

function staticTokens(count: number): string[] {
  return Array.from({ length: count }, (_, index) => `static-token-${index}-${generateToken().slice(4, 28)}`);
}

/** The rule of the BENCH_BEFORE checkout, for one token. */
async function ruleBefore(tokens: string[]): Promise<Redact | undefined> {
  if (!process.env.BENCH_BEFORE) return undefined;
  const before = (await import(pathToFileURL(join(resolve(process.env.BENCH_BEFORE), 'src/observability/redaction.ts')).href)) as {
    createRedaction?: typeof createRedaction;
    redactTokens?: Redact;
  };
  return before.createRedaction?.(tokens) ?? before.redactTokens;
}

let sink = 0;
const consume = (text: string) => (sink += text.length);

console.log(`Redaction of one request's url, host and address, ns per request (median of ${ROUNDS} rounds of ${CALLS.toLocaleString('en')})`);
const counts = [1, 10, 100, 1000];
const rules = new Map<number, Redact>(counts.map((count) => [count, createRedaction(staticTokens(count))]));
const before = await ruleBefore(staticTokens(1));
const columns = ['JSON.stringify', ...(before ? ['before, 1 token'] : []), ...counts.map((count) => `${count} token${count > 1 ? 's' : ''}`)];
console.log(`${'request'.padEnd(30)}${columns.map((column) => column.padStart(17)).join('')}`);
for (const request of REQUESTS) {
  const redacting = (redact: Redact) => () => consume(redact(request.url) + redact(request.host) + redact(request.address));
  const figures = [
    nsPerCall(() => consume(JSON.stringify({ method: 'GET', url: request.url, host: request.host, remoteAddress: request.address }))),
    ...(before ? [nsPerCall(redacting(before))] : []),
    ...counts.map((count) => nsPerCall(redacting(rules.get(count)!))),
  ];
  console.log(`${request.name.padEnd(30)}${figures.map((ns) => ns.toFixed(0).padStart(17)).join('')}`);
}

console.log(`\nA URL nested as deep as its length allows (%2525…41), 1 token; µs per call${before ? ' (before: 4 rounds at most)' : ''}`);
for (const length of [1_000, 4_000, 16_000, 64_000]) {
  const url = `/p?q=%${'25'.repeat((length - 8) / 2)}41`;
  const calls = Math.max(10, Math.round(2_000_000 / length));
  const figures = [...(before ? [before] : []), rules.get(1)!].map((redact) => nsPerCall(() => consume(redact(url)), calls) / 1000);
  console.log(`${`${length.toLocaleString('en')} characters`.padEnd(30)}${figures.map((us) => us.toFixed(1).padStart(17)).join('')}`);
}
