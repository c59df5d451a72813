// Property-based hostile-input testing with fast-check against a live app (app.inject on a real
// store). Every generated request must get an answer openapi.yaml documents, never a 5xx, with the
// published Error body on every failure; every write must be all or nothing. test/contract/fuzz.test.ts
// runs it with a fixed seed and a small budget, scripts/fuzz.ts (`npm run fuzz`) with a large one.
import type { FastifyInstance, LightMyRequestResponse as LightResponse } from 'fastify';
import fc from 'fast-check';
import type { Test } from 'tap';
import { parseJson } from '../../src/contract/json.ts';
import { plantEtag } from '../../src/plants/handlers.ts';
import { WEBHOOK_EVENTS, type PlantContent, type PlantStore } from '../../src/store/types.ts';
import { hashToken, tokenHint } from '../../src/tokens/format.ts';
import { contractProblems, spec } from './contract.ts';
import { AUTH, TOKEN, build } from './helper.ts';

// ---------------------------------------------------------------------------------------------
// Fixed credentials. Tokens without the `pst_` prefix skip the checksum, so they can be constants.

export const TOKENS = {
  all: TOKEN,
  read: 'fuzz-read-token-0123456789abcdef',
  write: 'fuzz-write-token-0123456789abcdef',
  webhooks: 'fuzz-webhooks-token-0123456789abcdef',
  expired: 'fuzz-expired-token-0123456789abcdef',
  revoked: 'fuzz-revoked-token-0123456789abcdef',
};

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Ids that requests aim at, so reads, replaces, deletes and conflicts hit existing plants. */
export const ID_POOL: readonly bigint[] = [
  ...Array.from({ length: 13 }, (_, index) => BigInt(index - 2)),
  INT64_MIN,
  INT64_MAX,
  2n ** 53n + 1n,
];

/** Replaced, when the request is sent, by the current ETag of the plant the URL names. */
export const CURRENT_ETAG = '<current-etag>';

// ---------------------------------------------------------------------------------------------
// Requests

export const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'] as const;
export type Method = (typeof METHODS)[number];

export interface FuzzRequest {
  method: Method;
  url: string;
  headers: Record<string, string | string[]>;
  payload?: string | Buffer;
  /** The input classes the request was built from, for statistics: `body:deep-nesting`, ... */
  classes: string[];
}

/** A short description for counterexample reports (payloads can be 64 KiB). */
export function describeRequest(request: FuzzRequest): string {
  const { payload } = request;
  let body = 'no body';
  if (payload !== undefined) {
    const text = Buffer.isBuffer(payload) ? `<Buffer ${payload.subarray(0, 120).toString('hex')}>` : JSON.stringify(payload.slice(0, 300).toWellFormed());
    body = `${Buffer.isBuffer(payload) ? 'bytes' : 'text'} (${Buffer.byteLength(payload)} bytes) ${text}${Buffer.byteLength(payload) > 300 ? '…' : ''}`;
  }
  const url = request.url.length > 300 ? `${request.url.slice(0, 300)}… (${request.url.length} chars)` : request.url;
  const headers = JSON.stringify(request.headers, (_key, value: unknown) =>
    typeof value === 'string' && value.length > 200 ? `${value.slice(0, 200)}… (${value.length} chars)` : value,
  );
  return `${request.method} ${JSON.stringify(url)} headers=${headers} ${body} [${request.classes.join(', ')}]`;
}

const labelled = <T>(arbitrary: fc.Arbitrary<T>, label: string): fc.Arbitrary<[T, string]> => arbitrary.map((value) => [value, label]);

// --- text building blocks ---------------------------------------------------------------------

/** Characters a header value can carry over HTTP/1.1: visible ASCII, space, tab and obs-text. */
const headerChar = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0x20, max: 0x7e }) },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }) },
  { weight: 1, arbitrary: fc.constant(0x09) },
).map((code) => String.fromCharCode(code));
export const headerText = fc.string({ unit: headerChar, maxLength: 40 });

/** Any string, lone surrogates included (`binary`), or readable Unicode, or plain ASCII. */
export const anyText = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
);

/** encodeURIComponent, but lone surrogates become their (invalid) CESU-8 bytes instead of throwing. */
export function percentEncode(text: string): string {
  let out = '';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (code >= 0xd800 && code <= 0xdfff) {
      out += `%${(0xe0 | (code >> 12)).toString(16)}%${(0x80 | ((code >> 6) & 0x3f)).toString(16)}%${(0x80 | (code & 0x3f)).toString(16)}`.toUpperCase();
    } else {
      out += encodeURIComponent(char);
    }
  }
  return out;
}

// --- ids and path segments --------------------------------------------------------------------

/** Decimal texts of ids: pool ids, any int64, far outside int64, and integer look-alikes. */
export const idText: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...ID_POOL).map(String) },
  { weight: 2, arbitrary: fc.bigInt({ min: INT64_MIN, max: INT64_MAX }).map(String) },
  { weight: 1, arbitrary: fc.bigInt({ min: -(10n ** 60n), max: 10n ** 60n }).map(String) },
  { weight: 1, arbitrary: fc.integer({ min: 19, max: 400 }).map((digits) => '9'.repeat(digits)) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '9223372036854775808', '-9223372036854775809', '-0', '+1', '01', '00', '1.0', '1.5', '1e3', '1E+2', '0x1F',
      ' 1', '1 ', 'NaN', 'Infinity', '-', '', '١', '１', '1_000', '1,5',
    ),
  },
);

const PERCENT_PIECES = ['%', '%0', '%zz', '%00', '%2F', '%2f', '%5C', '%E0%A4%A', '%ED%A0%80', '%C0%AF', '%C0%80', '%FF', '%25', '%2e', '%2E%2E', '%20', '%0A', '%3F', '%23'];

export const pathSegment: fc.Arbitrary<[string, string]> = fc.oneof(
  { weight: 8, arbitrary: labelled(idText.map(percentEncode), 'segment:id') },
  { weight: 1, arbitrary: labelled(idText.map((text) => [...text].map((char) => `%${char.charCodeAt(0).toString(16).padStart(2, '0')}`).join('')), 'segment:percent-encoded-digits') },
  { weight: 2, arbitrary: labelled(anyText.map(percentEncode), 'segment:unicode-encoded') },
  { weight: 1, arbitrary: labelled(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }), 'segment:raw-unicode') },
  { weight: 2, arbitrary: labelled(fc.array(fc.constantFrom(...PERCENT_PIECES), { minLength: 1, maxLength: 4 }).map((pieces) => pieces.join('')), 'segment:percent-garbage') },
  { weight: 1, arbitrary: labelled(fc.constantFrom('.', '..', '%2e', '%2e%2e', '.%2e', '...', ''), 'segment:dot') },
  { weight: 1, arbitrary: labelled(fc.integer({ min: 90, max: 300 }).map((length) => '1'.repeat(length)), 'segment:long') },
);

/** Known paths with hostile segments, near misses, and random paths. */
export const path: fc.Arbitrary<[string, string]> = fc.oneof(
  { weight: 4, arbitrary: labelled(fc.constantFrom('/plants', '/webhooks', '/healthz', '/readyz', '/openapi.json', '/openapi.yaml'), 'path:known') },
  { weight: 8, arbitrary: pathSegment.map(([segment, label]): [string, string] => [`/plants/${segment}`, label]) },
  { weight: 2, arbitrary: pathSegment.map(([segment, label]): [string, string] => [`/webhooks/${segment}`, label]) },
  { weight: 2, arbitrary: pathSegment.map(([segment, label]): [string, string] => [`/webhooks/${segment}/deliveries`, label]) },
  {
    weight: 2,
    arbitrary: labelled(
      fc.constantFrom(
        '/plants/', '//plants', '/plants//1', '/plants/1/', '/Plants/1', '/PLANTS', '/plants/1/leaves', '/plants/./1',
        '/plants/../healthz', '/plants/1/..', '/webhooks/', '/webhooks/1/deliveries/1', '/healthz/', '/', '/docs',
        '/docs/static/../../package.json', '/docs/json', '/plants%2F1', '/plants;1', '/plants/1;x', '/%70lants/1',
      ),
      'path:near-miss',
    ),
  },
  {
    weight: 2,
    arbitrary: labelled(
      fc.array(pathSegment.map(([segment]) => segment), { minLength: 1, maxLength: 4 }).map((segments) => `/${segments.join('/')}`),
      'path:random',
    ),
  },
);

// --- query strings ----------------------------------------------------------------------------

const cursorText = fc.oneof(
  fc.bigInt({ min: INT64_MIN - 10n, max: INT64_MAX + 10n }).map((id) => Buffer.from(`p1:${id}`).toString('base64url')),
  fc.constantFrom(...ID_POOL).map((id) => Buffer.from(`p1:${id}`).toString('base64url')),
  fc.constantFrom('cDE6MQ', 'cDE6MQ==', 'cDE6MQ.', 'cDE6', 'p1:1', 'cDI6MQ', 'cDE6MDE', 'cDE6LTA', '%00', 'x'.repeat(65)),
  fc.string({ maxLength: 80 }).map((text) => Buffer.from(text).toString('base64url')),
);

export const queryValue: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: -5, max: 1005 }).map(String) },
  { weight: 2, arbitrary: idText.map(percentEncode) },
  { weight: 2, arbitrary: anyText.map(percentEncode) },
  { weight: 1, arbitrary: anyText },
  { weight: 2, arbitrary: cursorText },
  { weight: 1, arbitrary: fc.array(fc.constantFrom(...PERCENT_PIECES), { minLength: 1, maxLength: 3 }).map((pieces) => pieces.join('')) },
  { weight: 1, arbitrary: fc.constantFrom('', '2147483648', '-2147483649', '1e2', '0x10', 'true', '[]', 'a'.repeat(300)) },
);

const queryKey = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('limit', 'tag', 'cursor') },
  { weight: 1, arbitrary: fc.constant('access_token') },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'limit[]', 'tag[0]', 'LIMIT', '', 'limit%00', 'hasOwnProperty', '__proto__[x]') },
  { weight: 1, arbitrary: anyText.map(percentEncode) },
);

/** `?k=v&...` with repeated keys, keys without `=`, empty pairs, and raw (unencoded) text. */
export const queryString: fc.Arbitrary<[string, string]> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<[string, string]>(['', 'query:none']) },
  {
    weight: 5,
    arbitrary: fc
      .array(
        fc.oneof(
          { weight: 8, arbitrary: fc.tuple(queryKey, queryValue).map(([key, value]) => `${key}=${value}`) },
          { weight: 1, arbitrary: queryKey },
          { weight: 1, arbitrary: fc.constantFrom('', '=', '&', '?', '==1') },
        ),
        { minLength: 1, maxLength: 5 },
      )
      .map((pairs): [string, string] => [`?${pairs.join('&')}`, 'query:random']),
  },
  { weight: 1, arbitrary: fc.constantFrom<[string, string]>(['?', 'query:empty'], ['?#x', 'query:fragment'], ['?limit=1#frag', 'query:fragment']) },
);

// --- headers ----------------------------------------------------------------------------------

export const authorization: fc.Arbitrary<[string | string[] | undefined, string]> = fc.oneof(
  { weight: 12, arbitrary: fc.constant<[string, string]>([`Bearer ${TOKENS.all}`, 'auth:valid']) },
  {
    weight: 2,
    arbitrary: labelled(
      fc.constantFrom(`bearer ${TOKENS.all}`, `BEARER ${TOKENS.all}`, `Bearer  ${TOKENS.all}`, `Bearer ${TOKENS.all} `, ` Bearer ${TOKENS.all}`, `Bearer\t${TOKENS.all}`),
      'auth:valid-variant',
    ),
  },
  {
    weight: 3,
    arbitrary: labelled(
      fc.constantFrom(TOKENS.read, TOKENS.write, TOKENS.webhooks, TOKENS.expired, TOKENS.revoked).map((token) => `Bearer ${token}`),
      'auth:scoped-expired-revoked',
    ),
  },
  { weight: 3, arbitrary: fc.constant<[undefined, string]>([undefined, 'auth:missing']) },
  {
    weight: 3,
    arbitrary: labelled(
      fc.constantFrom(
        '', ' ', 'Bearer', 'Bearer ', 'Basic dXNlcjpwYXNz', 'Token abc', 'Digest x', 'Negotiate', 'Bearer a b', `Bearer ${TOKENS.all}, Bearer ${TOKENS.all}`,
        `Bearer ${TOKENS.all},x`, `Bearer ${TOKENS.all} ${TOKENS.read}`, `Bearer pst_${'A'.repeat(49)}`, `Bearer ${'x'.repeat(5000)}`, 'Bearer "quoted"',
        `Bearer=${TOKENS.all}`, `${TOKENS.all}`, `Bearer ${TOKENS.all}\u00e9`,
      ),
      'auth:malformed',
    ),
  },
  { weight: 2, arbitrary: labelled(headerText.map((text) => `Bearer ${text}`), 'auth:random-token') },
  { weight: 1, arbitrary: labelled(headerText, 'auth:random') },
  {
    weight: 1,
    arbitrary: labelled(
      fc.constantFrom<string[]>([`Bearer ${TOKENS.all}`, `Bearer ${TOKENS.all}`], [`Bearer ${TOKENS.all}`, 'Bearer other'], ['', `Bearer ${TOKENS.all}`]),
      'auth:several-headers',
    ),
  },
);

export const contentType: fc.Arbitrary<[string | undefined, string]> = fc.oneof(
  { weight: 10, arbitrary: fc.constant<[string, string]>(['application/json', 'ct:json']) },
  { weight: 3, arbitrary: fc.constant<[undefined, string]>([undefined, 'ct:missing']) },
  {
    weight: 3,
    arbitrary: labelled(
      fc.constantFrom(
        'application/json; charset=utf-8', 'application/json;charset=UTF-8', 'application/json; charset="utf-8"', 'APPLICATION/JSON',
        'Application/Json; Charset=utf-8', 'application/json; charset=latin1', 'application/json; charset=utf-16le', 'application/json ; x=y',
        'application/json;', 'application/json; boundary=x',
      ),
      'ct:json-variant',
    ),
  },
  {
    weight: 3,
    arbitrary: labelled(
      fc.constantFrom(
        'text/plain', 'text/json', 'application/jsonx', 'application/json-patch+json', 'application/merge-patch+json', 'application/problem+json',
        'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'application/octet-stream', '*/*', '', ';', 'json',
        'application/', '/json', 'application/json/x', 'application\\json',
      ),
      'ct:other',
    ),
  },
  { weight: 1, arbitrary: labelled(headerText, 'ct:random') },
);

const entityTags = fc.constantFrom('*', '"x"', 'W/"x"', '', ',', '"a", "b"', 'garbage', '"unterminated', CURRENT_ETAG, `W/${CURRENT_ETAG}`, `"x", ${CURRENT_ETAG}`, ` ${CURRENT_ETAG} `);

export const extraHeaders: fc.Arbitrary<Record<string, string>> = fc.record(
  {
    'if-match': entityTags,
    'if-none-match': entityTags,
    accept: fc.constantFrom('application/json', '*/*', 'text/html', 'application/xml', ''),
    'content-length': fc.integer({ min: 0, max: 100 }).map(String),
    'x-forwarded-for': fc.constantFrom('1.2.3.4', 'garbage', ''),
    'x-random': headerText,
  },
  { requiredKeys: [] },
).map((headers) => {
  // A wrong Content-Length is rare on purpose: it only ever tests one thing.
  if (headers['content-length'] !== undefined && Number(headers['content-length']) % 10 !== 0) delete headers['content-length'];
  return headers;
});

// --- bodies -----------------------------------------------------------------------------------

type Payload = string | Buffer;
type Entry = [keyText: string, valueText: string];
const quote = (text: string) => JSON.stringify(text);
const render = (entries: Entry[]) => `{${entries.map(([key, value]) => `${key}:${value}`).join(',')}}`;

/** JSON texts of ids, exact int64 digits included (JSON.stringify cannot write them). */
export const idJson: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: idText.filter((text) => /^-?(?:0|[1-9]\d*)$/.test(text)) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '1.0', '1.5', '1e3', '1E+2', '-0', '-0.0', '1e309', '-1e309', '1e-400', '0.1e1', '123456789012345678901234567890', '9223372036854775808',
      '"1"', 'true', 'null', '[1]', '{}', '01', '+1', '.5', '0x10', 'NaN', 'Infinity', '1e999999999', `1${'0'.repeat(1000)}`, `0.${'0'.repeat(1000)}1`,
    ),
  },
);

/** Names and tags are up to 256 characters (Unicode code points, as Ajv counts them). */
const validName = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', minLength: 200, maxLength: 256 }) },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom('🌵', 'é', 'e\u0301', '\u0000', 'x', '\u{10FFFF}'), minLength: 1, maxLength: 256 }) },
).filter((name) => name.length > 0 && [...name].length <= 256);
const validTag = fc.oneof({ weight: 3, arbitrary: fc.constantFrom('even', 'aroid', '') }, { weight: 3, arbitrary: validName });
/** JSON texts for `name` and `tag`: valid strings mostly, then edges, NULs, lone surrogates, wrong types. */
const textJson = (valid: fc.Arbitrary<string>) =>
  fc.oneof(
    { weight: 8, arbitrary: valid.map(quote) },
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        '""', quote('x'.repeat(256)), quote('x'.repeat(257)), quote('🌵'.repeat(256)), quote('a\u0000b'), '"\\u0000"', '"a\\u0000"', '"\\ud800"',
        '"a\\udfffb"', '"\\udc00\\ud800"', '"\\ud83c\\udf35"', '"🌵"', '"\\n\\t\\"\\\\"', '"a\u0001b"', '"a\nb"', '"\u2028\u2029"', '"\\uFEFF"',
        '"\\uFFFF"', '5', 'null', '[]', '{}', 'true', '["x"]', '{"name":"x"}', '"__proto__"', '"\\u0000\\u0000"', `"${'\\u0000'.repeat(300)}"`,
      ),
    },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }).map(quote) },
  );
const nameJson = textJson(validName);
const tagJson = textJson(validTag);

const PROTO_ENTRIES: Entry[] = [
  ['"__proto__"', '{"polluted":true}'],
  ['"__proto__"', 'null'],
  ['"\\u005f_proto__"', '{"polluted":true}'],
  ['"__\\u0070roto__"', '{}'],
  ['"constructor"', '{"prototype":{"polluted":true}}'],
  ['"constructor"', '{"prototype":null}'],
  ['"\\u0063onstructor"', '{"\\u0070rototype":{"polluted":true}}'],
  ['"constructor"', '1'],
  ['"prototype"', '{}'],
  ['"tag"', '{"__proto__":{"polluted":true}}'],
  ['"name"', '[{"constructor":{"prototype":{"polluted":true}}}]'],
];

interface Mutation {
  kind: 'drop' | 'duplicate' | 'unknown' | 'proto' | 'key-variant' | 'reorder';
  at: number;
  value: string;
  key: string;
  proto: Entry;
}

const mutation: fc.Arbitrary<Mutation> = fc.record({
  kind: fc.constantFrom('drop', 'duplicate', 'duplicate', 'unknown', 'proto', 'key-variant', 'reorder'),
  at: fc.nat(),
  value: fc.oneof(idJson, nameJson),
  key: fc.oneof(fc.constantFrom('"ID"', '"Name"', '"id\\u0000"', '"\\ud800"', '"id "', '""', '"tags"', '"secret"', '"url"'), anyText.map(quote)),
  proto: fc.constantFrom(...PROTO_ENTRIES),
});

function mutate(entries: Entry[], mutations: Mutation[]): Entry[] {
  const result = [...entries];
  for (const change of mutations) {
    const index = result.length === 0 ? 0 : change.at % result.length;
    const insertAt = change.at % (result.length + 1);
    switch (change.kind) {
      case 'drop':
        result.splice(index, 1);
        break;
      case 'duplicate':
        // The same key again with another value, before or after the original: which one wins?
        if (result[index]) result.splice(insertAt, 0, [result[index]![0], change.value]);
        break;
      case 'unknown':
        result.splice(insertAt, 0, [change.key, change.value]);
        break;
      case 'proto':
        result.splice(insertAt, 0, change.proto);
        break;
      case 'key-variant':
        // The same key written with escapes: "\u0069d" is "id" to every JSON parser.
        if (result[index]) result[index] = [quote(JSON.parse(result[index]![0]) as string).replace(/^"(.)/, (_, char: string) => `"\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`), result[index]![1]];
        break;
      case 'reorder':
        result.reverse();
        break;
    }
  }
  return result;
}

const wrapper = fc.constantFrom<[(text: string) => string, string]>(
  [(text) => text, ''],
  [(text) => `\uFEFF${text}`, 'bom'],
  [(text) => ` \n\t${text}\r\n `, 'whitespace'],
  [(text) => `${text},`, 'trailing-comma'],
  [(text) => `${text}${text}`, 'twice'],
  [(text) => `[${text}]`, 'in-array'],
  [(text) => text.slice(0, -1), 'truncated'],
  [(text) => `${text}\u0000`, 'trailing-nul'],
);

/** A NewPlant (POST /plants) or Plant (PUT) body: valid, or valid with mutations applied. */
export function plantBody(withId: boolean): fc.Arbitrary<[Payload, string]> {
  const entries = fc
    .tuple(idJson, nameJson, fc.option(tagJson, { nil: undefined }))
    .map(([id, name, tag]): Entry[] => [...(withId ? [['"id"', id] as Entry] : []), ['"name"', name], ...(tag === undefined ? [] : [['"tag"', tag] as Entry])]);
  const clean = fc
    .tuple(
      fc.oneof(fc.constantFrom(...ID_POOL), fc.bigInt({ min: INT64_MIN, max: INT64_MAX })),
      validName,
      fc.option(validTag, { nil: undefined }),
    )
    .map(([id, name, tag]): [Payload, string] => [
      render([...(withId ? [['"id"', String(id)] as Entry] : []), ['"name"', quote(name)], ...(tag === undefined ? [] : [['"tag"', quote(tag)] as Entry])]),
      'body:plant-valid',
    ]);
  return fc.oneof(
    { weight: 4, arbitrary: clean },
    { weight: 3, arbitrary: entries.map((list): [Payload, string] => [render(list), 'body:plant']) },
    {
      weight: 5,
      arbitrary: fc
        .tuple(entries, fc.array(mutation, { minLength: 1, maxLength: 3 }), wrapper)
        .map(([list, mutations, [wrap, how]]): [Payload, string] => [
          wrap(render(mutate(list, mutations))),
          `body:plant-mutated(${[...new Set(mutations.map((change) => change.kind))].join('+')}${how && `,${how}`})`,
        ]),
    },
    { weight: 1, arbitrary: invalidUtf8Body(withId) },
  );
}

const INVALID_UTF8: number[][] = [
  [0xff], [0xfe], [0x80], [0xc0, 0x80], [0xc1, 0xbf], [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xe2, 0x82], [0xf0, 0x9f, 0x8c],
  [0xf8, 0x88, 0x80, 0x80, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe0, 0x80, 0xaf], [0xc3], [0xa9],
];

/** Bytes that are not UTF-8 inside a string value, a key, or between tokens. */
export function invalidUtf8Body(withId: boolean): fc.Arbitrary<[Payload, string]> {
  return fc
    .tuple(fc.constantFrom(...ID_POOL), fc.constantFrom(...INVALID_UTF8), fc.constantFrom('name', 'tag', 'key', 'between'))
    .map(([id, bytes, where]): [Payload, string] => {
      const bad = Buffer.from(bytes);
      const start = withId ? `{"id":${id},` : '{';
      const parts: Buffer[] = {
        name: [Buffer.from(`${start}"name":"ab`), bad, Buffer.from('cd"}')],
        tag: [Buffer.from(`${start}"name":"ok","tag":"`), bad, Buffer.from('"}')],
        key: [Buffer.from(`${start}"name":"ok","`), bad, Buffer.from('":1}')],
        between: [Buffer.from(`${start}"name":"ok"`), bad, Buffer.from('}')],
      }[where]!;
      return [Buffer.concat(parts), `body:invalid-utf8(${where})`];
    });
}

/** A NewWebhook body. Targets never resolve to a public address: no request leaves the machine. */
export const webhookBody: fc.Arbitrary<[Payload, string]> = fc
  .tuple(
    fc.oneof(
      fc.constantFrom(
        'http://127.0.0.1/x', 'http://localhost:8080/', 'http://[::1]/', 'http://10.0.0.1/', 'http://169.254.169.254/latest/meta-data',
        'http://[::ffff:127.0.0.1]/', 'http://2130706433/', 'http://0x7f.0.0.1/', 'http://0/', 'http://192.168.1.1/', 'http://unresolvable.invalid/',
        'http://ü.invalid/', 'ftp://example.com/', 'javascript:alert(1)', 'file:///etc/passwd', 'http://user:pass@10.0.0.1/', 'not a url', '', '/relative',
        'http://exa mple.com', `http://127.0.0.1/${'a'.repeat(2048)}`, 'http://\u0000.invalid/', 'gopher://127.0.0.1:6379/_INFO',
      ).map(quote),
      fc.constantFrom('"http://\\ud800.invalid/"', '1', 'null', '[]', '{}', '"http://127.0.0.1/\\u0000"'),
    ),
    fc.option(
      fc.constantFrom('[]', '["plant.created"]', '["plant.created","plant.created"]', '["nope"]', '"plant.created"', '[1]', '[null]', JSON.stringify(WEBHOOK_EVENTS), '["plant.created\\u0000"]'),
      { nil: undefined },
    ),
    fc.array(mutation, { maxLength: 2 }),
  )
  .map(([url, events, mutations]): [Payload, string] => {
    const entries: Entry[] = [['"url"', url], ...(events === undefined ? [] : [['"events"', events] as Entry])];
    return [render(mutate(entries, mutations)), 'body:webhook'];
  });

const nested = (depth: number, open: string, close: string, inner = '') => `${open.repeat(depth)}${inner}${close.repeat(depth)}`;

/** Bodies no client should send: deep nesting, huge numbers, NULs, poisoning, random bytes, ... */
export const hostileBody: fc.Arbitrary<[Payload, string]> = fc.oneof(
  { weight: 2, arbitrary: labelled<Payload>(fc.json({ maxDepth: 4 }), 'body:random-json') },
  { weight: 2, arbitrary: labelled<Payload>(fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value) ?? 'null'), 'body:random-json-value') },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.integer({ min: 1_000, max: 32_000 }), fc.constantFrom('arrays', 'objects', 'in-tag', 'in-unknown-field', 'unbalanced', 'mixed'))
      .map(([depth, how]): [Payload, string] => {
        const text = {
          arrays: nested(depth, '[', ']'),
          objects: nested(Math.min(depth, 10_000), '{"a":', '}', '1'),
          'in-tag': `{"id":1,"name":"x","tag":${nested(depth, '[', ']')}}`,
          'in-unknown-field': `{"id":1,"name":"x","deep":${nested(Math.min(depth, 10_000), '{"a":', '}', '1')}}`,
          unbalanced: '['.repeat(depth),
          mixed: nested(Math.min(depth, 12_000), '[{"a":', '}]', '1'),
        }[how]!;
        return [text, `body:deep-nesting(${how})`];
      }),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.integer({ min: 20, max: 60_000 }), fc.constantFrom('integer', 'negative', 'fraction', 'exponent', 'as-id', 'as-name', 'bare'))
      .map(([digits, how]): [Payload, string] => {
        const big = `9${'0'.repeat(digits - 1)}`;
        const text = {
          integer: `{"id":${big},"name":"x"}`,
          negative: `{"id":-${big},"name":"x"}`,
          fraction: `{"id":0.${big},"name":"x"}`,
          exponent: `{"id":1e${big.slice(0, 400)},"name":"x"}`,
          'as-id': `{"id":${big.slice(0, 25)},"name":"x"}`,
          'as-name': `{"id":1,"name":${big}}`,
          bare: big,
        }[how]!;
        return [text, `body:huge-number(${how})`];
      }),
  },
  {
    weight: 1,
    arbitrary: labelled<Payload>(
      fc.constantFrom(
        '{"id":1,"id":2,"name":"x"}', '{"id":"x","id":1,"name":"n"}', '{"id":1,"name":"","name":"ok"}', '{"id":1,"name":"ok","name":""}',
        '{"id":1,"name":"x","tag":"a","tag":null}', '{"id":1,"name":"x","id":1.5}', '{"id":3,"name":"a","name":"b","name":"c"}',
      ),
      'body:duplicate-keys',
    ),
  },
  {
    weight: 1,
    arbitrary: labelled<Payload>(
      fc.constantFrom(
        '{"id":1,"name":"a\\u0000b"}', '{"id":1,"name":"x","tag":"\\u0000"}', '{"id":1,"name":"a\u0000b"}', '\u0000', '{"id":1,"name":"x"}\u0000',
        '{"id\\u0000":1,"name":"x"}', '{"id":1\u0000,"name":"x"}',
      ),
      'body:nul',
    ),
  },
  {
    weight: 1,
    arbitrary: labelled<Payload>(
      fc.constantFrom(
        '{"__proto__":{"polluted":true}}', '{"id":1,"name":"x","__proto__":{"polluted":true}}', '{"id":1,"name":"x","constructor":{"prototype":{"polluted":true}}}',
        '[{"__proto__":{"polluted":true}}]', '{"a":[{"b":{"__proto__":{"polluted":true}}}]}', '{"\\u005f\\u005fproto\\u005f\\u005f":{"polluted":true}}',
        '{"id":1,"name":"x","tag":"__proto__"}', '{"constructor":{"prototype":{"polluted":true}},"url":"http://10.0.0.1/"}',
      ),
      'body:prototype-poisoning',
    ),
  },
  { weight: 1, arbitrary: labelled<Payload>(fc.constantFrom('"\\ud800"', '{"\\udfff":1}', '{"id":1,"name":"\\ud800\\ud800"}', '["\\udbff"]'), 'body:lone-surrogate') },
  { weight: 2, arbitrary: labelled<Payload>(fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes)), 'body:random-bytes') },
  { weight: 1, arbitrary: labelled<Payload>(fc.string({ unit: 'binary', maxLength: 100 }), 'body:random-text') },
  {
    weight: 1,
    arbitrary: labelled<Payload>(
      fc.constantFrom(
        `{"id":1,"name":"x","tag":"${'t'.repeat(64 * 1024)}"}`, `{"id":1,"name":"x","tag":"${'t'.repeat(64 * 1024 - 34)}"}`, ' '.repeat(64 * 1024 + 1),
        '', ' ', '\r\n', 'null', '{}', '[]', '""', '0', 'true',
      ),
      'body:size-and-trivia',
    ),
  },
);

export const anyBody: fc.Arbitrary<[Payload | undefined, string]> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<[undefined, string]>([undefined, 'body:none']) },
  { weight: 3, arbitrary: plantBody(true) },
  { weight: 1, arbitrary: plantBody(false) },
  { weight: 1, arbitrary: webhookBody },
  { weight: 4, arbitrary: hostileBody },
);

// --- whole requests ---------------------------------------------------------------------------

interface Parts {
  method: Method;
  url: [string, string];
  query: [string, string];
  auth: [string | string[] | undefined, string];
  type: [string | undefined, string];
  extra: Record<string, string>;
  body: [Payload | undefined, string];
}

function assemble({ method, url, query, auth, type, extra, body }: Parts): FuzzRequest {
  const headers: Record<string, string | string[]> = { ...extra };
  if (auth[0] !== undefined) headers.authorization = auth[0];
  if (type[0] !== undefined) headers['content-type'] = type[0];
  const request: FuzzRequest = {
    method,
    url: `${url[0]}${query[0]}`,
    headers,
    ...(body[0] !== undefined && { payload: body[0] }),
    classes: [`method:${method}`, url[1], query[1], auth[1], type[1], body[1], ...Object.keys(extra).map((name) => `header:${name}`)],
  };
  // Counterexamples print through this: a 64 KiB payload is shown by its start and its length.
  Object.defineProperty(request, fc.toStringMethod, { value: () => describeRequest(request), enumerable: false });
  return request;
}

const poolSegment = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...ID_POOL).map(String) }, { weight: 1, arbitrary: pathSegment.map(([segment]) => segment) });

/** Mostly the ids of the seeded subscriptions (the store numbers them from 1). */
const webhookSegment = fc.oneof({ weight: 4, arbitrary: fc.constantFrom('1', '2', '3', '4', '5') }, { weight: 1, arbitrary: poolSegment });

/** Requests aimed at the operations, with mostly valid credentials, so they get past the outer layers. */
export const plausibleRequest: fc.Arbitrary<FuzzRequest> = fc
  .oneof(
    { weight: 5, arbitrary: fc.record({ method: fc.constant<Method>('POST'), url: fc.constant<[string, string]>(['/plants', 'path:known']), body: fc.oneof({ weight: 3, arbitrary: plantBody(true) }, { weight: 1, arbitrary: hostileBody }) }) },
    { weight: 3, arbitrary: fc.record({ method: fc.constant<Method>('PUT'), url: poolSegment.map((segment): [string, string] => [`/plants/${segment}`, 'path:plant']), body: fc.oneof({ weight: 3, arbitrary: plantBody(false) }, { weight: 1, arbitrary: hostileBody }) }) },
    { weight: 2, arbitrary: fc.record({ method: fc.constantFrom<Method>('GET', 'HEAD', 'DELETE'), url: poolSegment.map((segment): [string, string] => [`/plants/${segment}`, 'path:plant']), body: anyBody }) },
    { weight: 2, arbitrary: fc.record({ method: fc.constantFrom<Method>('GET', 'HEAD'), url: fc.constant<[string, string]>(['/plants', 'path:known']), body: anyBody }) },
    { weight: 1, arbitrary: fc.record({ method: fc.constant<Method>('POST'), url: fc.constant<[string, string]>(['/webhooks', 'path:known']), body: fc.oneof({ weight: 3, arbitrary: webhookBody }, { weight: 1, arbitrary: hostileBody }) }) },
    {
      weight: 1,
      arbitrary: fc.record({
        method: fc.constantFrom<Method>('GET', 'DELETE'),
        url: fc
          .oneof(fc.constant('/webhooks'), webhookSegment.map((segment) => `/webhooks/${segment}`), webhookSegment.map((segment) => `/webhooks/${segment}/deliveries`))
          .map((url): [string, string] => [url, 'path:webhook']),
        body: anyBody,
      }),
    },
  )
  .chain(({ method, url, body }) =>
    fc.record({
      method: fc.constant(method),
      url: fc.constant(url),
      body: fc.constant(body),
      query: queryString,
      auth: fc.oneof({ weight: 4, arbitrary: fc.constant<[string, string]>([`Bearer ${TOKENS.all}`, 'auth:valid']) }, { weight: 1, arbitrary: authorization }),
      type: fc.oneof({ weight: 4, arbitrary: fc.constant<[string, string]>(['application/json', 'ct:json']) }, { weight: 1, arbitrary: contentType }),
      extra: extraHeaders,
    }),
  )
  .map((parts) => assemble({ ...parts, body: parts.body as [Payload | undefined, string] }));

/** Anything at all: any method, any path, any headers, any body. */
export const wildRequest: fc.Arbitrary<FuzzRequest> = fc
  .record({ method: fc.constantFrom(...METHODS), url: path, query: queryString, auth: authorization, type: contentType, extra: extraHeaders, body: anyBody })
  .map(assemble);

export const fuzzRequest: fc.Arbitrary<FuzzRequest> = fc.oneof({ weight: 3, arbitrary: plausibleRequest }, { weight: 2, arbitrary: wildRequest });

// ---------------------------------------------------------------------------------------------
// Invariants

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed YAML or JSON walked by key: its shape is what this code checks
type Json = Record<string, any>;

/**
 * The operation of openapi.yaml that method and URL name, found the way the service finds it:
 * light-my-request resolves the URL (dot segments), the router decodes the path with decodeURI
 * (`/%70lants/1` is `/plants/1`; `%2F` stays inside its segment), and a path parameter may be
 * empty (`/plants/`: the templated route, whose validation answers 400). `contractUrl` is a URL
 * test/harness/contract.ts finds the same operation by.
 */
export function operationOf(method: string, url: string): { path: string; operationId: string; responses: Json; contractUrl: string } | undefined {
  const routed = routerPath(url);
  if (routed === undefined) return undefined;
  for (const [path, item] of Object.entries<Json>(spec.paths)) {
    const operation = item[method.toLowerCase()];
    if (!operation || !templatePattern(path).test(routed)) continue;
    return { path, operationId: operation.operationId, responses: operation.responses, contractUrl: `${path.replace(/\{[^}]+\}/g, '_')}${injectedUrl(url).search}` };
  }
  return undefined;
}

const templatePattern = (template: string) => new RegExp(`^${template.replace(/\{[^}]+\}/g, '([^/]*)')}$`);

/** The URL as light-my-request hands it to the server (it resolves `//x` and dot segments first). */
function injectedUrl(url: string): URL {
  return url.startsWith('//') ? new URL(`http://localhost${url}`) : new URL(url, 'http://localhost');
}

/** The path the router matches; undefined when its percent-encoding is malformed (a 400 before routing). */
function routerPath(url: string): string | undefined {
  try {
    return decodeURI(injectedUrl(url).pathname);
  } catch {
    return undefined;
  }
}

function pathnameOf(url: string): string {
  return injectedUrl(url).pathname;
}

interface Answer {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
  rawPayload: Buffer;
}

export interface IssueContext {
  request: FuzzRequest;
  operationId: string | undefined;
  answer: Answer;
}

/**
 * Problems that are known, each with a todo regression test in test/contract/hostile-input.test.ts. A
 * problem one of them excuses is counted, not failed, so the suite stays green while they are
 * open; FUZZ_STRICT=1 makes `npm run fuzz` fail on them too. A 5xx, an inconsistent store or a
 * malformed Error body never matches one.
 */
export const KNOWN_ISSUES: { name: string; excuses: (problem: string, context: IssueContext) => boolean }[] = [];
const LONE_SURROGATE_MESSAGE = 'the Error message holds a lone surrogate';
const ENGINE_ERROR_MESSAGE = 'the Error message passes on a JavaScript engine error';
const INVALID_UTF8_STORED = 'a body that is not UTF-8 was stored';

// Fastify refuses a path parameter over 100 characters while routing, before it knows the method.
function hasOverlongSegment(pathname: string): boolean {
  return pathname.split('/').some((segment) => segment.length > 100);
}

/** What the response must be, whatever the request: the contract, the Error body, no 5xx. */
export function responseProblems(request: FuzzRequest, answer: Answer): { problems: string[]; operationId: string | undefined } {
  const problems: string[] = [];
  const { method, url } = request;
  const { statusCode, body } = answer;
  const operation = operationOf(method, url);
  const asGet = method === 'HEAD' ? operationOf('GET', url) : undefined;
  const pathname = pathnameOf(url);
  const routed = routerPath(url) ?? pathname;
  const isDocs = routed === '/docs' || routed.startsWith('/docs/');
  if (statusCode >= 500) problems.push(`answered ${statusCode}: ${body.slice(0, 300)}`);
  if (operation) {
    problems.push(...contractProblems(method, operation.contractUrl, withWellFormedMessage(answer)));
  } else if (asGet) {
    // Fastify answers HEAD for every GET route: the GET's status and headers, without a body.
    if (!(String(statusCode) in asGet.responses)) problems.push(`HEAD ${asGet.path} answered ${statusCode}, which GET ${asGet.path} does not document`);
    if (body !== '') problems.push('a HEAD answer has a body');
  } else if (!isDocs && statusCode !== 404 && !(statusCode === 400 && (routerPath(url) === undefined || hasOverlongSegment(pathname)))) {
    // A path that cannot be decoded, or whose segment is too long to route, is refused before routing: 400 is fine too.
    problems.push(`${method} ${pathname} is no operation of openapi.yaml, yet answered ${statusCode} instead of 404`);
  }
  if (statusCode >= 400 && method !== 'HEAD') problems.push(...errorBodyProblems(answer));
  if (statusCode >= 400 && method === 'HEAD' && body !== '') problems.push('a HEAD answer has a body');
  return { problems, operationId: operation?.operationId ?? asGet?.operationId };
}

/** The answer with its Error message made well-formed, so contract.ts (whose parser refuses lone surrogates) can judge the rest. */
function withWellFormedMessage(answer: Answer): Answer {
  try {
    const body = JSON.parse(answer.body) as unknown;
    if (typeof body === 'object' && body !== null && typeof (body as Json).message === 'string' && !(body as Json).message.isWellFormed()) {
      return { ...answer, body: JSON.stringify({ ...body, message: (body as Json).message.toWellFormed() }) };
    }
  } catch {
    // not JSON: contract.ts says so
  }
  return answer;
}

/** The published Error shape: exactly {error: <the status>, message: <a sentence>}, as application/json. */
function errorBodyProblems(answer: Answer): string[] {
  const mediaType = String(answer.headers['content-type'] ?? '').split(';')[0]!.trim();
  if (mediaType !== 'application/json') return [`a ${answer.statusCode} answer is ${JSON.stringify(mediaType)}, not application/json`];
  let body: unknown;
  try {
    body = JSON.parse(answer.body);
  } catch {
    return [`a ${answer.statusCode} answer is not JSON: ${answer.body.slice(0, 200)}`];
  }
  const problems: string[] = [];
  const shape = body as Json;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [`a ${answer.statusCode} answer is not an Error object`];
  if (shape.error !== answer.statusCode) problems.push(`a ${answer.statusCode} answer has error ${JSON.stringify(shape.error)}`);
  if (typeof shape.message !== 'string' || shape.message.trim() === '') problems.push(`a ${answer.statusCode} answer has no message`);
  const extra = Object.keys(shape).filter((key) => key !== 'error' && key !== 'message');
  if (extra.length > 0) problems.push(`a ${answer.statusCode} answer has extra fields ${extra.join(', ')}`);
  if (/\bat \S+\.ts:\d+|node_modules|SQLITE|sqlite/i.test(String(shape.message))) problems.push(`a ${answer.statusCode} message leaks internals: ${shape.message}`);
  if (typeof shape.message === 'string' && !shape.message.isWellFormed()) problems.push(`${LONE_SURROGATE_MESSAGE}: ${JSON.stringify(shape.message)}`);
  if (/Maximum call stack size exceeded|RangeError|TypeError|Cannot read propert/.test(String(shape.message))) problems.push(`${ENGINE_ERROR_MESSAGE}: ${shape.message}`);
  return problems;
}

// --- the store model --------------------------------------------------------------------------

type Plants = Map<bigint, PlantContent>;

async function snapshot(store: PlantStore): Promise<Plants> {
  const plants: Plants = new Map();
  for (const plant of await store.plants.listPlants({ limit: 1_000_000 })) plants.set(plant.id, plant.tag === undefined ? { name: plant.name } : { name: plant.name, tag: plant.tag });
  return plants;
}

const sameContent = (a: PlantContent | undefined, b: PlantContent | undefined) =>
  a !== undefined && b !== undefined && a.name === b.name && (a.tag ?? null) === (b.tag ?? null);
const show = (content: PlantContent | undefined) => (content === undefined ? 'absent' : JSON.stringify(content));

/** The plant id a /plants/{id} URL names, as the server reads it; undefined when it reads none. */
function urlPlantId(url: string): bigint | undefined {
  const match = /^\/plants\/([^/]+)$/.exec(routerPath(url) ?? '');
  if (!match) return undefined;
  try {
    const text = decodeURIComponent(match[1]!);
    return /^-?(?:0|[1-9]\d*)$/.test(text) ? BigInt(text) : undefined;
  } catch {
    return undefined;
  }
}

/** The body the server decoded: bytes as UTF-8, lone surrogates of a JS string already U+FFFD. */
function bodyObject(payload: Buffer): Json | undefined {
  try {
    const value = parseJson(payload.toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Applies a successful write to the model after checking it against the request and the answer;
 * answers what is wrong. Every other answer must leave the store as it was.
 */
function applyWrite(model: Plants, request: FuzzRequest, operationId: string | undefined, answer: Answer, etag: string | undefined): string[] {
  const problems = conditionProblems(model, request, operationId, answer, etag);
  const success = answer.statusCode >= 200 && answer.statusCode < 300;
  if (!success || request.method === 'GET' || request.method === 'HEAD') return problems;
  const sent = bodyObject(answer.rawPayload);
  if (answer.rawPayload.length > 0 && !isWellFormedUtf8(answer.rawPayload) && (operationId === 'createPlant' || operationId === 'replacePlant')) {
    problems.push(`${INVALID_UTF8_STORED} (as U+FFFD) instead of refused: ${operationId} answered ${answer.statusCode}`);
  }
  return [...problems, ...applySuccess(model, request, operationId, answer, sent)];
}

const ENTITY_TAG = /^(W\/)?"[\x21\x23-\x7e\x80-\xff]*"$/;

/**
 * PUT and DELETE on a plant: 404 exactly when the plant is missing; with If-Match (RFC 9110,
 * strong comparison), a write only while the header names the plant's ETag (`etag`, the store's before the write), 412 otherwise.
 */
function conditionProblems(model: Plants, request: FuzzRequest, operationId: string | undefined, answer: Answer, etag: string | undefined): string[] {
  if (operationId !== 'replacePlant' && operationId !== 'deletePlant') return [];
  const id = urlPlantId(request.url);
  const stored = id === undefined ? undefined : model.get(id);
  const status = answer.statusCode;
  if (status === 404 && stored !== undefined) return [`${request.method} ${request.url} answered 404 for a stored plant`];
  if (stored === undefined || etag === undefined || (status !== 412 && (status < 200 || status >= 300))) return [];
  const header = request.headers['if-match'];
  if (typeof header !== 'string') return status === 412 ? [`${request.method} ${request.url} answered 412 without If-Match`] : [];
  // A #entity-tag list (RFC 9110 §5.6.1): empty elements do not count, so "" and "," name no tag.
  const tags = header.trim() === '*' ? '*' : header.split(',').map((tag) => tag.trim()).filter((tag) => tag !== '');
  if (tags !== '*' && tags.some((tag) => !ENTITY_TAG.test(tag))) return [`${request.method} ${request.url} answered ${status} to the malformed If-Match ${JSON.stringify(header)}`];
  const matches = tags === '*' || tags.includes(etag);
  if (matches && status === 412) return [`${request.method} ${request.url} answered 412 though If-Match ${JSON.stringify(header)} names ${etag}`];
  if (!matches && status !== 412) return [`${request.method} ${request.url} answered ${status} though If-Match ${JSON.stringify(header)} does not name ${etag}`];
  if (status === 412 && answer.headers.etag !== etag) return [`${request.method} ${request.url} answered 412 with ETag ${String(answer.headers.etag)}, not ${etag}`];
  return [];
}

function applySuccess(model: Plants, request: FuzzRequest, operationId: string | undefined, answer: Answer, sent: Json | undefined): string[] {
  const content = (source: Json | undefined): PlantContent | undefined =>
    source === undefined ? undefined : source.tag === undefined ? { name: source.name } : { name: source.name, tag: source.tag };
  switch (operationId) {
    case 'createPlant': {
      if (!sent || typeof sent.id !== 'bigint') return [`createPlant answered ${answer.statusCode} to a body without an integer id`];
      const answered = content(parseJson(answer.body) as Json);
      const stored = model.get(sent.id);
      const problems: string[] = [];
      if (!sameContent(answered, content(sent))) problems.push(`createPlant answered ${show(answered)} for a request of ${show(content(sent))}`);
      if (stored !== undefined && !sameContent(stored, answered)) problems.push(`createPlant answered ${answer.statusCode} over a different stored plant ${show(stored)}`);
      model.set(sent.id, answered!);
      return problems;
    }
    case 'replacePlant': {
      const answered = parseJson(answer.body) as Json;
      const id = urlPlantId(request.url);
      const problems: string[] = [];
      if (id === undefined || answered.id !== id) problems.push(`replacePlant answered id ${answered.id} for ${request.url}`);
      if (!model.has(answered.id)) problems.push(`replacePlant answered ${answer.statusCode} for a plant that did not exist`);
      if (!sameContent(content(answered), content(sent))) problems.push(`replacePlant answered ${show(content(answered))} for a request of ${show(content(sent))}`);
      model.set(answered.id, content(answered)!);
      return problems;
    }
    case 'deletePlant': {
      const id = urlPlantId(request.url);
      if (id === undefined || !model.has(id)) return [`deletePlant answered ${answer.statusCode} for ${request.url}, which named no stored plant`];
      model.delete(id);
      return [];
    }
    case 'createWebhook':
    case 'deleteWebhook':
      return [];
    default:
      return [`${request.method} ${request.url} answered ${answer.statusCode}, a success no write operation gave`];
  }
}

function isWellFormedUtf8(bytes: Buffer): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

function storeProblems(model: Plants, stored: Plants): string[] {
  const problems: string[] = [];
  for (const id of new Set([...model.keys(), ...stored.keys()])) {
    if (!sameContent(model.get(id), stored.get(id))) problems.push(`plant ${id}: expected ${show(model.get(id))}, the store holds ${show(stored.get(id))}`);
  }
  return problems;
}

/** Reads must answer what the store holds. */
function readProblems(model: Plants, request: FuzzRequest, operationId: string | undefined, answer: Answer, etag: string | undefined): string[] {
  if (request.method !== 'GET') return [];
  if (operationId === 'getPlant') return plantReadProblems(model, request, answer, etag);
  if (operationId === 'listPlants' && answer.statusCode === 200) return pageProblems(model, request.url, answer);
  return [];
}

/** GET /plants/{id}: the stored content, its ETag (`etag`, the store's); 304 only when If-None-Match names that ETag. */
function plantReadProblems(model: Plants, request: FuzzRequest, answer: Answer, etag: string | undefined): string[] {
  const id = urlPlantId(request.url);
  const stored = id === undefined ? undefined : model.get(id);
  if (answer.statusCode === 404 && stored !== undefined) return [`GET ${request.url} answered 404 for a stored plant`];
  if (answer.statusCode !== 200 && answer.statusCode !== 304) return [];
  const problems: string[] = [];
  if (stored === undefined) return [`GET ${request.url} answered ${answer.statusCode} for a plant the store does not hold`];
  if (answer.headers.etag !== etag) problems.push(`GET ${request.url} answered ETag ${String(answer.headers.etag)}, the plant's is ${etag}`);
  const ifNoneMatch = request.headers['if-none-match'];
  if (answer.statusCode === 304 && !(typeof ifNoneMatch === 'string' && (ifNoneMatch.trim() === '*' || ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag)))) {
    problems.push(`GET ${request.url} answered 304 though If-None-Match ${JSON.stringify(ifNoneMatch)} does not name ${etag}`);
  }
  if (answer.statusCode === 200) {
    const plant = parseJson(answer.body) as Json;
    const answered = plant.tag === undefined ? { name: plant.name } : { name: plant.name, tag: plant.tag };
    if (plant.id !== id || !sameContent(stored, answered)) problems.push(`GET ${request.url} answered ${show(answered)} (id ${plant.id}), the store holds ${show(stored)}`);
  }
  return problems;
}

/**
 * The query string as the service parses it (fast-querystring): `+` is a space. A percent-encoding
 * that is not UTF-8 is answered 400 before any page (contract/query.ts); it stays as written here.
 */
function serverQuery(search: string): Map<string, string[]> {
  const decode = (text: string) => {
    const spaced = text.replaceAll('+', ' ');
    try {
      return decodeURIComponent(spaced);
    } catch {
      return spaced;
    }
  };
  const query = new Map<string, string[]>();
  for (const pair of search.replace(/^\?/, '').split('&')) {
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const key = decode(equals === -1 ? pair : pair.slice(0, equals));
    query.set(key, [...(query.get(key) ?? []), equals === -1 ? '' : decode(pair.slice(equals + 1))]);
  }
  return query;
}

/**
 * GET /plants 200: exactly the stored plants after the cursor, with the tag, in id order, at most
 * `limit` of them, with a Link to the next page exactly when more follow.
 */
function pageProblems(model: Plants, url: string, answer: Answer): string[] {
  const page = parseJson(answer.body) as Json[];
  const problems: string[] = [];
  const at = `GET ${url}`;
  page.forEach((plant, index) => {
    const answered = plant.tag === undefined ? { name: plant.name } : { name: plant.name, tag: plant.tag };
    if (!sameContent(model.get(plant.id), answered)) problems.push(`${at} listed ${plant.id} as ${show(answered)}, the store holds ${show(model.get(plant.id))}`);
    if (index > 0 && !(page[index - 1]!.id < plant.id)) problems.push(`${at} is not in ascending id order`);
  });
  const query = serverQuery(injectedUrl(url).search);
  const single = (name: string) => (query.get(name)?.length === 1 ? query.get(name)![0] : undefined);
  if (['limit', 'tag', 'cursor'].some((name) => (query.get(name)?.length ?? 0) > 1)) return problems;
  const limit = single('limit') === undefined ? 100 : Number(single('limit'));
  const tag = single('tag');
  let after: bigint | undefined;
  const cursor = single('cursor');
  if (cursor !== undefined) {
    const match = /^p1:(-?\d+)$/.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
    if (!match) return [...problems, `${at} accepted a cursor this API never gives out`];
    after = BigInt(match[1]!);
  }
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) return [...problems, `${at} answered 200 to limit ${JSON.stringify(single('limit'))}`];
  const matching = [...model.entries()]
    .filter(([id, plant]) => (after === undefined || id > after) && (tag === undefined || plant.tag === tag))
    .map(([id]) => id)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const expected = matching.slice(0, limit);
  if (page.map((plant) => String(plant.id)).join() !== expected.join()) {
    problems.push(`${at} listed ids [${page.map((plant) => plant.id).join(', ')}], expected [${expected.join(', ')}]`);
  }
  const link = answer.headers.link;
  if ((typeof link === 'string') !== matching.length > limit) problems.push(`${at} has ${link === undefined ? 'no' : 'a'} Link, but ${matching.length - expected.length} plants follow the page`);
  return problems;
}

// ---------------------------------------------------------------------------------------------
// The runner

export interface FuzzOptions {
  seed: number;
  numRuns: number;
  /** Called every 1,000 requests, for progress output. */
  onProgress?: (requests: number) => void;
  /** Fail on known issues too instead of counting them. */
  strict?: boolean;
}

export interface FuzzSummary {
  seed: number;
  numRuns: number;
  /** Requests sent, shrinking included. */
  requests: number;
  elapsedMs: number;
  /** fast-check's report of the smallest counterexample, undefined when every run held. */
  failure: string | undefined;
  /** Problems of the final walk over every page of GET /plants. */
  finalProblems: string[];
  statuses: Map<string, number>;
  classes: Map<string, number>;
  knownIssues: Map<string, { count: number; example: string }>;
  plants: number;
}

export interface FuzzTarget {
  app: FastifyInstance;
  store: PlantStore;
}

/** Failed authentications allowed per address and minute; the clock jumps a minute every CLOCK_STEP requests. */
const AUTH_FAILURES_PER_MINUTE = 30;
const CLOCK_STEP = 60;

export interface FuzzSession extends FuzzTarget {
  /** Sends the request and answers every invariant it breaks (empty when it held). */
  check(request: FuzzRequest): Promise<string[]>;
  requests: () => number;
  statuses: Map<string, number>;
  classes: Map<string, number>;
  knownIssues: Map<string, { count: number; example: string }>;
  /** Stops watching the process for uncaught errors. */
  end(): void;
}

/**
 * The app on a fresh store through build(t) (`t` only needs testdir and teardown), seeded with
 * tokens of every kind, webhook subscriptions and plants, and a checker for requests against it.
 */
export async function openSession(t: Pick<Test, 'testdir' | 'teardown'>, { strict = false }: { strict?: boolean } = {}): Promise<FuzzSession> {
  let clockOffset = 0;
  const clock = () => Date.now() + clockOffset;
  const { app, store } = await build(t as Test, { AUTH_FAILURES_PER_MINUTE }, { clock });
  await seed({ app, store });

  const statuses = new Map<string, number>();
  const classes = new Map<string, number>();
  const knownIssues = new Map<string, { count: number; example: string }>();
  const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  let model = await snapshot(store);
  let requests = 0;
  const crashes: unknown[] = [];
  const onCrash = (error: unknown) => crashes.push(error);
  process.on('unhandledRejection', onCrash);
  process.on('uncaughtException', onCrash);

  async function check(request: FuzzRequest): Promise<string[]> {
    try {
      return await checkOrThrow(request);
    } catch (error) {
      return [`checking the answer threw ${String((error as Error)?.stack ?? error)}`, `request: ${describeRequest(request)}`];
    }
  }

  async function checkOrThrow(request: FuzzRequest): Promise<string[]> {
    requests++;
    if (requests % CLOCK_STEP === 0) clockOffset += 61_000; // the failure limiter's window passes
    if (requests % 200 === 0 && (await store.webhooks.listSubscriptions({ limit: 1000 })).length === 0) await subscribe(store, requests);
    const etag = await storedEtag(store, request.url);
    const sent = withCurrentEtag(request, etag);
    const response = await app.inject({
      method: sent.method,
      url: sent.url,
      headers: sent.headers,
      ...(sent.payload !== undefined && { payload: sent.payload }),
    });
    const answer: Answer = {
      statusCode: response.statusCode,
      headers: response.headers,
      body: response.body,
      rawPayload: sent.payload === undefined ? Buffer.alloc(0) : Buffer.from(sent.payload),
    };
    const { problems: contract, operationId } = responseProblems(sent, answer);
    count(statuses, `${operationId ?? (sent.method === 'HEAD' ? 'HEAD (no route)' : 'no route')} ${answer.statusCode}`);
    for (const label of sent.classes) count(classes, label);

    const found = [...contract, ...readProblems(model, sent, operationId, answer, etag)];
    if (sent.method !== 'GET' && sent.method !== 'HEAD') {
      const before = model.size;
      const content = urlPlantId(sent.url) === undefined ? undefined : model.get(urlPlantId(sent.url)!);
      found.push(...applyWrite(model, sent, operationId, answer, etag));
      if (operationId === 'replacePlant' && answer.statusCode === 200) found.push(...replacedEtagProblems(sent, answer, content, etag, await storedEtag(store, sent.url)));
      const stored = await snapshot(store);
      const drift = storeProblems(model, stored);
      if (drift.length > 0) {
        found.push(...drift.map((problem) => `after ${sent.method} answered ${answer.statusCode}: ${problem} (${before} plants before)`));
        model = stored; // resynchronise, so shrinking judges each candidate on its own
      }
    }
    if (crashes.length > 0) found.push(`the process saw ${crashes.length} uncaught error(s): ${String(crashes.splice(0)[0])}`);
    if (Object.hasOwn(Object.prototype, 'polluted')) found.push('Object.prototype was polluted');
    const problems: string[] = [];
    const context: IssueContext = { request: sent, operationId, answer };
    for (const problem of found) {
      const known = answer.statusCode < 500 && !strict ? KNOWN_ISSUES.find((issue) => issue.excuses(problem, context)) : undefined;
      if (!known) {
        problems.push(problem);
        continue;
      }
      const entry = knownIssues.get(known.name) ?? { count: 0, example: `${describeRequest(sent)} → ${answer.statusCode} ${answer.body.slice(0, 200)}` };
      entry.count++;
      knownIssues.set(known.name, entry);
    }
    if (problems.length === 0) return [];
    return [...problems, `request: ${describeRequest(sent)}`, `answer: ${answer.statusCode} ${JSON.stringify(answer.headers)} ${answer.body.slice(0, 500)}`];
  }

  return {
    app,
    store,
    check,
    requests: () => requests,
    statuses,
    classes,
    knownIssues,
    end() {
      process.off('unhandledRejection', onCrash);
      process.off('uncaughtException', onCrash);
    },
  };
}

/** Runs the property: every generated request must hold every invariant; then walks the store. */
export async function runFuzz(t: Pick<Test, 'testdir' | 'teardown'>, options: FuzzOptions): Promise<FuzzSummary> {
  const session = await openSession(t, { strict: options.strict ?? false });
  const started = performance.now();
  const property = fc.asyncProperty(fuzzRequest, async (request) => {
    const problems = await session.check(request);
    if (options.onProgress && session.requests() % 1000 === 0) options.onProgress(session.requests());
    if (problems.length > 0) throw new Error(problems.join('\n'));
  });
  let failure: string | undefined;
  try {
    const details = await fc.check(property, { seed: options.seed, numRuns: options.numRuns, includeErrorInReport: true });
    failure = details.failed ? (fc.defaultReportMessage(details) ?? 'failed') : undefined;
  } finally {
    session.end();
  }
  const finalProblems = await walkStore(session);
  return {
    seed: options.seed,
    numRuns: options.numRuns,
    requests: session.requests(),
    elapsedMs: performance.now() - started,
    failure,
    finalProblems,
    statuses: session.statuses,
    classes: session.classes,
    knownIssues: session.knownIssues,
    plants: (await snapshot(session.store)).size,
  };
}

/** The ETag of the plant a /plants/{id} URL names, as the store holds it now; undefined when it holds none (or no int64 id). */
async function storedEtag(store: PlantStore, url: string): Promise<string | undefined> {
  const id = urlPlantId(url);
  const stored = id === undefined || id < INT64_MIN || id > INT64_MAX ? undefined : await store.plants.getPlant(id);
  return stored && plantEtag(stored.version);
}

/** A PUT answers the ETag the store now holds: a new one when the content changed, the same one when it did not. */
function replacedEtagProblems(request: FuzzRequest, answer: Answer, before: PlantContent | undefined, etagBefore: string | undefined, etagAfter: string | undefined): string[] {
  const sent = bodyObject(answer.rawPayload);
  const content = sent && (sent.tag === undefined ? { name: sent.name } : { name: sent.name, tag: sent.tag });
  const problems: string[] = [];
  if (answer.headers.etag !== etagAfter) problems.push(`PUT ${request.url} answered ETag ${String(answer.headers.etag)}, the store holds ${String(etagAfter)}`);
  const unchanged = sameContent(before, content as PlantContent | undefined);
  if (unchanged !== (etagBefore === etagAfter)) problems.push(`PUT ${request.url} ${unchanged ? 'changed the ETag of an unchanged' : 'kept the ETag of a changed'} plant`);
  return problems;
}

function withCurrentEtag(request: FuzzRequest, etag: string | undefined): FuzzRequest {
  const headers = { ...request.headers };
  for (const name of ['if-match', 'if-none-match']) {
    const value = headers[name];
    if (typeof value === 'string' && value.includes(CURRENT_ETAG)) headers[name] = value.replaceAll(CURRENT_ETAG, etag ?? '"no-such-plant"');
  }
  return { ...request, headers };
}

/**
 * A subscription the fuzzer cannot create itself (registration refuses private targets): the
 * dispatcher refuses its loopback target at every attempt too, so nothing is ever sent.
 */
async function subscribe(store: PlantStore, index: number): Promise<void> {
  await store.webhooks.createSubscription({ url: `http://127.0.0.1:9/fuzz/${index}`, events: [...WEBHOOK_EVENTS], secret: `whsec_${Buffer.alloc(32, index % 256).toString('base64')}` }, 100);
}

/** Tokens of every kind, subscriptions (whose loopback target deliveries refuse), and plants. */
async function seed({ app, store }: FuzzTarget): Promise<void> {
  const token = (name: string, value: string, scopes: string[], expiresAt?: string) =>
    store.tokens.createToken({ name, hash: hashToken(value), hint: tokenHint(value), scopes, ...(expiresAt && { expiresAt }) });
  await token('fuzz-read', TOKENS.read, ['plants:read']);
  await token('fuzz-write', TOKENS.write, ['plants:write']);
  await token('fuzz-webhooks', TOKENS.webhooks, ['webhooks:manage']);
  await token('fuzz-expired', TOKENS.expired, ['*'], '2001-01-01T00:00:00.000Z');
  await token('fuzz-revoked', TOKENS.revoked, ['*']);
  await store.tokens.revokeToken('fuzz-revoked');
  for (let index = 0; index < 3; index++) await subscribe(store, index);
  for (const id of ID_POOL.filter((_, index) => index % 2 === 0)) {
    const response = await app.inject({
      method: 'POST',
      url: '/plants',
      headers: { ...AUTH, 'content-type': 'application/json' },
      payload: `{"id":${id},"name":"seed ${id}"${id % 4n === 0n ? ',"tag":"even"' : ''}}`,
    });
    if (response.statusCode !== 200) throw new Error(`seeding plant ${id} answered ${response.statusCode}: ${response.body}`);
  }
}

/**
 * After the run: walking every page of GET /plants (and of each tag) yields exactly the stored
 * plants, once each, in order, and each reads back by GET /plants/{id} with the same content.
 */
export async function walkStore({ app, store }: FuzzTarget): Promise<string[]> {
  const problems: string[] = [];
  const stored = await snapshot(store);
  const walk = async (first: string): Promise<Json[]> => {
    const seen: Json[] = [];
    let url: string | undefined = first;
    for (let pages = 0; url !== undefined; pages++) {
      if (pages > 10_000) throw new Error(`GET ${first} never ends`);
      const response: LightResponse = await app.inject({ method: 'GET', url, headers: AUTH });
      const contract = contractProblems('GET', url, response);
      if (response.statusCode !== 200 || contract.length > 0) {
        problems.push(`GET ${url} answered ${response.statusCode}: ${contract.join('; ')} ${response.body.slice(0, 200)}`);
        return seen;
      }
      problems.push(...pageProblems(stored, url, { statusCode: response.statusCode, headers: response.headers, body: response.body, rawPayload: Buffer.alloc(0) }));
      seen.push(...(parseJson(response.body) as Json[]));
      const link: unknown = response.headers.link;
      url = typeof link === 'string' ? /^<([^>]+)>; rel="next"$/.exec(link)?.[1] : undefined;
    }
    return seen;
  };
  const listed = await walk('/plants?limit=7');
  const ids = listed.map((plant) => plant.id as bigint);
  if (new Set(ids).size !== ids.length) problems.push('walking GET /plants yields a plant twice');
  if (ids.some((id, index) => index > 0 && !(ids[index - 1]! < id))) problems.push('walking GET /plants is not in ascending id order');
  const expectedIds = [...stored.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (ids.join() !== expectedIds.join()) problems.push(`walking GET /plants lists ${ids.length} plants, the store holds ${expectedIds.length}`);
  for (const plant of listed) {
    const response = await app.inject({ method: 'GET', url: `/plants/${plant.id}`, headers: AUTH });
    const contract = contractProblems('GET', `/plants/${plant.id}`, response);
    const read = response.statusCode === 200 ? (parseJson(response.body) as Json) : undefined;
    if (contract.length > 0 || !read || read.id !== plant.id || read.name !== plant.name || read.tag !== plant.tag) {
      problems.push(`plant ${plant.id} is listed as ${JSON.stringify({ ...plant, id: String(plant.id) })} but reads back as ${response.statusCode} ${response.body.slice(0, 200)}`);
    }
  }
  // The empty tag is a valid Plant.tag but no valid `tag` filter (minLength 1), so it cannot be walked.
  const tags = [...new Set([...stored.values()].flatMap((plant) => (plant.tag === undefined || plant.tag === '' ? [] : [plant.tag])))].slice(0, 10);
  for (const tag of tags) {
    const tagged = await walk(`/plants?limit=3&tag=${encodeURIComponent(tag)}`);
    const expected = expectedIds.filter((id) => stored.get(id)!.tag === tag);
    if (tagged.map((plant) => plant.id).join() !== expected.join()) problems.push(`walking GET /plants?tag=${JSON.stringify(tag)} lists ${tagged.length} plants, ${expected.length} have the tag`);
  }
  const health = await app.inject({ method: 'GET', url: '/readyz' });
  if (health.statusCode !== 200) problems.push(`GET /readyz answered ${health.statusCode} after the run`);
  return problems;
}

/** A few lines for people: status counts per operation, input classes, known issues. */
export function formatSummary(summary: FuzzSummary): string {
  const lines = [
    `fuzz: seed ${summary.seed}, ${summary.numRuns} runs, ${summary.requests} requests in ${(summary.elapsedMs / 1000).toFixed(1)} s (${Math.round((summary.requests / summary.elapsedMs) * 1000)} req/s), ${summary.plants} plants stored at the end`,
    'answers by operation:',
    ...[...summary.statuses].sort(([a], [b]) => a.localeCompare(b)).map(([key, value]) => `  ${key.padEnd(34)} ${value}`),
    'input classes (top 60):',
    ...[...summary.classes].sort(([, a], [, b]) => b - a).slice(0, 60).map(([key, value]) => `  ${key.padEnd(60)} ${value}`),
    `known issues (each has a todo test in test/contract/hostile-input.test.ts):${summary.knownIssues.size === 0 ? ' none seen' : ''}`,
    ...[...summary.knownIssues].map(([name, { count, example }]) => `  ${count} × ${name}\n      e.g. ${example}`),
    `final walk of GET /plants: ${summary.finalProblems.length === 0 ? 'consistent' : summary.finalProblems.join('; ')}`,
    summary.failure === undefined ? 'every property held' : `COUNTEREXAMPLE:\n${summary.failure}`,
  ];
  return lines.join('\n');
}
