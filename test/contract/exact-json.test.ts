// parseJson, the body parser's core: every integer literal a BigInt, everything else as JSON.parse reads it.
import t from 'tap';
import type { ErrorObject } from 'ajv';
import { parseJson } from '../../src/contract/json.ts';
import { formatSchemaErrors, validatorCompiler } from '../../src/contract/validation.ts';

t.test('integer literals become exact BigInts', async (t) => {
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

t.test('lone surrogates and prototype keys are refused', async (t) => {
  for (const text of ['{"name":"\\ud800","id":1}', '{"\\udc00":1}', '{"__proto__":{"id":1}}', '{"constructor":{"prototype":{"id":1}}}', '{"id":1']) {
    t.throws(() => parseJson(text), text);
  }
  t.throws(() => parseJson('{"name":"\\ud800","id":1}'), /lone surrogate/, 'with the message that names it');
  // Not only through a \u escape: a text that holds a lone surrogate itself is refused too.
  for (const text of ['{"name":"\ud800","id":1}', '{"\udc00x":1}', '{"a":["ok","\ud800"],"id":1}']) {
    t.throws(() => parseJson(text), /lone surrogate/, JSON.stringify(text));
  }
});

/** A body validator for `schema`, as the routes compile one, answering the value it hands on or the 400 message. */
function bodyValidator(schema: Record<string, unknown>): (text: string) => unknown {
  const validate = validatorCompiler({ schema, httpPart: 'body', method: 'POST', url: '/plants' }) as unknown as
    ((data: unknown) => boolean) & { errors?: ErrorObject[] };
  return (text) => {
    const data = parseJson(text);
    return validate(data) ? data : formatSchemaErrors(validate.errors ?? [], 'body').message;
  };
}

t.test('every type a field may have reads exactly from a body: number, boolean, string, arrays and objects beside int64', async (t) => {
  const check = bodyValidator({
    type: 'object',
    properties: {
      id: { type: 'integer', format: 'int64' },
      price: { type: 'number', minimum: 0 },
      grams: { type: 'integer' },
      organic: { type: 'boolean' },
      tags: { type: 'array', items: { type: 'string' } },
      sizes: { type: 'array', items: { type: 'number' } },
      pot: { type: 'object', properties: { litres: { type: 'number', enum: [1, 2.5] } } },
    },
  });
  t.strictSame(check('{"id":9007199254740993,"price":1250}'), { id: 9007199254740993n, price: 1250 }, 'an integer literal in a number field is a Number');
  t.strictSame(check('{"id":7,"price":12.5,"grams":300}'), { id: 7n, price: 12.5, grams: 300 }, 'a fraction');
  t.strictSame(check('{"id":7,"price":1.25e3}'), { id: 7n, price: 1250 }, 'an exponent');
  t.strictSame(check('{"price":9007199254740994}'), { price: 9007199254740994 }, 'large, but a double holds it exactly');
  t.strictSame(check('{"organic":false,"tags":["a"],"sizes":[1,2.5],"pot":{"litres":1}}'), { organic: false, tags: ['a'], sizes: [1, 2.5], pot: { litres: 1 } });
  t.equal(check('{"price":-1}'), 'The request body field "price" must be >= 0.', "Ajv's number keywords still apply");
  t.equal(check('{"price":"12"}'), 'The request body field "price" must be number.');
  t.equal(check('{"pot":{"litres":3}}'), 'The request body field "pot.litres" must be equal to one of the allowed values.');
  t.equal(check('{"organic":1}'), 'The request body field "organic" must be boolean.');
  // A double cannot hold 2^53 + 1: refused, naming the field, rather than stored as 9007199254740992.
  t.equal(check('{"price":9007199254740993}'), 'The request body field "price" must be a number a double holds exactly; 9007199254740993 would be stored as 9007199254740992.');
  t.equal(check('{"sizes":[1,9007199254740993]}'), 'The request body field "sizes.1" must be a number a double holds exactly; 9007199254740993 would be stored as 9007199254740992.');
});
