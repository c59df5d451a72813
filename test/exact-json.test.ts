// parseJson, the body parser's core: every integer literal a BigInt, everything else as JSON.parse
// reads it. Bodies whose numbers are all plain integers take a path without a reviver; these
// cases pin that both paths give the same values and refuse the same texts.
import t from 'tap';
import { parseJson } from '../src/contract/json.ts';

t.test('integer literals become exact BigInts, on the fast path and off it', async (t) => {
  const cases: [string, unknown][] = [
    ['{"id":1,"name":"Monstera","tag":"aroid"}', { id: 1n, name: 'Monstera', tag: 'aroid' }],
    ['{"id":-9007199254740991}', { id: -9007199254740991n }],
    ['{"id":9007199254740993}', { id: 9007199254740993n }], // above 2^53: JSON.parse alone would round it
    ['{"id":9223372036854775807}', { id: 9223372036854775807n }],
    ['{"id":-0}', { id: 0n }],
    ['{"a":[1,{"b":2}],"c":null}', { a: [1n, { b: 2n }], c: null }],
    ['{"name":"1.5e3","id":7}', { name: '1.5e3', id: 7n }], // a dot or an e inside a string is no number
    ['{"name":"a\\"b.e","id":8}', { name: 'a"b.e', id: 8n }],
    ['{"ok":true,"id":9}', { ok: true, id: 9n }],
    ['{"name":"A4.","tag":"5e","id":10}', { name: 'A4.', tag: '5e', id: 10n }], // a digit before '.' or 'e' in a string
    ['{"name":"\\u00e9t\\u00e9","id":11}', { name: 'été', id: 11n }], // escapes, all well formed
  ];
  for (const [text, expected] of cases) t.strictSame(parseJson(text), expected, text);
});

t.test('numbers written with a fraction or an exponent stay numbers, so that integer fields refuse them', async (t) => {
  t.strictSame(parseJson('{"id":1.0}'), { id: 1 });
  t.strictSame(parseJson('{"id":1e3}'), { id: 1000 });
  t.strictSame(parseJson('{"id":5E0,"n":2}'), { id: 5, n: 2n });
});

t.test('lone surrogates and prototype keys are refused, whichever path the text takes', async (t) => {
  for (const text of ['{"name":"\\ud800","id":1}', '{"\\udc00":1}', '{"__proto__":{"id":1}}', '{"constructor":{"prototype":{"id":1}}}', '{"id":1']) {
    t.throws(() => parseJson(text), text);
  }
  t.throws(() => parseJson('{"name":"\\ud800","id":1}'), /lone surrogate/, 'with the message that names it');
  // Not only through a \u escape: a text that holds a lone surrogate itself is refused too.
  for (const text of ['{"name":"\ud800","id":1}', '{"\udc00x":1}', '{"a":["ok","\ud800"],"id":1}']) {
    t.throws(() => parseJson(text), /lone surrogate/, JSON.stringify(text));
  }
});
