// The redaction rule on its own (src/observability/redaction.ts): the cases a URL, a header or a
// message can take that the server tests (otel.test.ts, token-access.test.ts) do not each spell out.
import t from 'tap';
import { createRedaction } from '../../src/observability/redaction.ts';
import { generateToken } from '../../src/tokens/format.ts';

const PLAIN = 'static-Token-0123456789abcdef';
const issued = generateToken();

function everyByteEncoded(text: string): string {
  return [...text].map((char) => `%${char.charCodeAt(0).toString(16).padStart(2, '0')}`).join('');
}

function encodedTimes(text: string, times: number): string {
  let encoded = text;
  for (let round = 0; round < times; round++) encoded = round === 0 ? everyByteEncoded(encoded) : encodeURIComponent(encoded);
  return encoded;
}

t.test('a configured token is redacted wherever it stands, and the rest of the text is kept', async (t) => {
  const redact = createRedaction([PLAIN]);
  t.equal(redact(`/plants/${PLAIN}`), '/plants/[redacted]');
  t.equal(redact(`/plants?q=${PLAIN}`), '/plants?q=[redacted]');
  t.equal(redact(`/plants?x=${PLAIN}&y=1`), '/plants?x=[redacted]&y=1');
  t.equal(redact(`/plants?x=1&${PLAIN}`), '/plants?x=1&[redacted]', 'as a name');
  t.equal(redact(`There is no GET /p/${PLAIN} in this API.`), 'There is no GET /p/[redacted] in this API.');
  t.equal(redact(`${PLAIN}:3000`), '[redacted]:3000', 'in a Host header');
  t.equal(redact(`/a/${PLAIN}/b/${PLAIN}`), '/a/[redacted]/b/[redacted]', 'every occurrence');
});

t.test('a token percent-encoded any number of times, in any case of hex, is redacted with exactly its encoded stretch', async (t) => {
  const redact = createRedaction([PLAIN]);
  for (const times of [1, 2, 5, 12]) {
    const encoded = encodedTimes(PLAIN, times);
    t.equal(redact(`/plants?q=${encoded}&limit=5`), '/plants?q=[redacted]&limit=5', `${times} times`);
    t.equal(redact(`/plants?q=${encoded.toUpperCase()}`), '/plants?q=[redacted]', `${times} times, upper-case hex`);
  }
  t.equal(redact(`/p/static-Token-%30123456789abc%2564ef`), '/p/[redacted]', 'partly encoded, at different depths');
  t.equal(redact(`/p/ab${encodeURIComponent(`%${PLAIN}`)}cd`), '/p/ab%25[redacted]cd', 'next to a % that decodes to nothing');
  const hexFirst = '1bcdefghijklmnopq';
  t.equal(createRedaction([hexFirst])(`/p/%4${hexFirst}`), '/p/%4[redacted]', 'as sent, though a % before it would decode its first character');
});

t.test('decoding goes on until nothing is left to decode, however deep: no fixed number of rounds', async (t) => {
  const redact = createRedaction([PLAIN]);
  for (const times of [5, 50, 1000]) {
    t.equal(redact(`/p?q=${encodedTimes(issued, times)}&r=1`), '/p?q=[redacted]&r=1', `an issued token, ${times} times`);
  }
  t.equal(redact(`/p?q=${encodedTimes(PLAIN, 300)}`), '/p?q=[redacted]', 'a static token, 300 times');
});

t.test('issued tokens are redacted by their shape, static ones only when configured', async (t) => {
  const redact = createRedaction([]);
  t.equal(redact(`/plants/${issued}`), '/plants/[redacted]');
  t.equal(redact(`/plants/${PLAIN}`), `/plants/${PLAIN}`, 'an unconfigured text of 29 characters is kept');
  t.equal(redact(`/plants?access_token=${PLAIN}`), '/plants?access_token=[redacted]', 'an access_token parameter is redacted whatever its value');
  t.equal(redact(`/plants?%2561ccess%255Ftoken=${PLAIN}`), '/plants?%2561ccess%255Ftoken=[redacted]', 'however its name is encoded');
});

t.test('the characters a URL or a pattern treats specially are matched as themselves', async (t) => {
  const tricky = 'Tr1cky+/=&?%41;t0ken';
  const special = 'a.b*c(d)[e]{f}|g^h$i\\j';
  const redact = createRedaction([tricky, special]);
  t.equal(redact(`/p?q=${tricky}`), '/p?q=[redacted]', 'as sent, delimiters and all');
  t.equal(redact(`/p?q=${encodeURIComponent(tricky)}`), '/p?q=[redacted]', 'encoded once: its %41 decodes to A too');
  t.equal(redact(`/p?q=${encodedTimes(tricky, 4)}`), '/p?q=[redacted]', 'encoded four times');
  // The query parser reads + as a space, so a refusal may quote the token with one.
  t.equal(redact(`The value "${tricky.replace('+', ' ')}" is not valid.`), 'The value "[redacted]" is not valid.');
  t.equal(redact(`/p?q=${special}`), '/p?q=[redacted]');
  t.equal(redact('/p?q=aXbbcccdd[e]{f}|g^h$i\\j'), '/p?q=aXbbcccdd[e]{f}|g^h$i\\j', 'pattern characters do not match other text');
});

t.test('a token that contains another is redacted whole', async (t) => {
  const short = 'abcdefghijklmnop';
  const long = `${short}-and-more`;
  for (const redact of [createRedaction([short, long]), createRedaction([long, short])]) {
    t.equal(redact(`/p/${long}/q/${short}`), '/p/[redacted]/q/[redacted]');
  }
});

t.test('with a thousand tokens of different lengths, each is found wherever it stands, first and last characters included', async (t) => {
  const tokens = Array.from({ length: 1000 }, (_, index) => `token-${index}-${'x'.repeat(10 + (index % 37))}`);
  const redact = createRedaction(tokens);
  for (const token of [tokens[0]!, tokens[1]!, tokens[36]!, tokens[500]!, tokens[999]!]) {
    t.equal(redact(token), '[redacted]', `alone: ${token}`);
    t.equal(redact(`/p/${token}?q=${encodeURIComponent(everyByteEncoded(token))}&r=${token}`), '/p/[redacted]?q=[redacted]&r=[redacted]', `three times: ${token}`);
  }
  t.equal(redact('/p/token-1000-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'), '/p/token-1000-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx', 'a text like them is kept');
});

t.test('a text that holds no token is returned as it is', async (t) => {
  const redact = createRedaction([PLAIN, 'Tr1cky+/=&?%41;t0ken']);
  for (const text of ['/plants/7', '/plants?limit=50&tag=a%20b+c', '127.0.0.1:3000', '/p?q=%25%2', '%%%41%4', 'pst_short', '/plants/%E2%9C%93']) {
    t.equal(redact(text), text);
  }
});
