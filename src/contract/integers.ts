// Exact integers for validation: Ajv's numbers cannot hold every int64 nor tell `1000` from `1e3`, so each request
// schema's `type: integer` becomes `exactInteger` (BigInt against the format's exact range) and, in a body, where
// integer literals arrive as BigInt, `type: number` becomes `exactNumber`: a value is never stored as another.
import type { FuncKeywordDefinition, KeywordDefinition } from 'ajv';
import { INT64_MAX, INT64_MIN, INTEGER_TEXT } from '../int64.ts';

/** json: the value came from the JSON body parser (integers are BigInt); text: from a URL (strings). */
type IntegerSource = 'json' | 'text';

const FORMAT_RANGES: Record<string, [bigint, bigint]> = {
  int64: [INT64_MIN, INT64_MAX],
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
};
const DEFAULT_RANGE: [bigint, bigint] = [-BigInt(Number.MAX_SAFE_INTEGER), BigInt(Number.MAX_SAFE_INTEGER)];
const RANGE_KEYWORDS = ['type', 'format', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'];

type SchemaNode = Record<string, unknown>;
type DataValidateFunction = ReturnType<NonNullable<FuncKeywordDefinition['compile']>>;

/** A copy of a request schema with every integer rewritten to `exactInteger` (and, in a body, every number to `exactNumber`). */
export function withExactIntegers<T>(node: T, source: IntegerSource): T {
  if (Array.isArray(node)) return node.map((item: unknown) => withExactIntegers(item, source)) as T;
  if (typeof node !== 'object' || node === null) return node;
  const copy: SchemaNode = {};
  for (const [key, value] of Object.entries(node)) copy[key] = withExactIntegers(value, source);
  if (Array.isArray(copy.type) && copy.type.includes('integer')) {
    throw new Error('Request schemas with a type list that includes "integer" are not supported.');
  }
  if (source === 'json' && Array.isArray(copy.type) && copy.type.includes('number')) {
    // Ajv checks a type list before any keyword could turn the parser's BigInt into a Number.
    throw new Error('Request body schemas with a type list that includes "number" are not supported; write anyOf: [{type: number}, {type: "null"}] instead.');
  }
  if (source === 'json' && copy.type === 'number') {
    delete copy.type;
    copy.exactNumber = true;
    return copy as T;
  }
  if (copy.type !== 'integer') return copy as T;
  const spec = integerSpec(copy, source);
  for (const keyword of RANGE_KEYWORDS) delete copy[keyword];
  copy.exactInteger = spec;
  return copy as T;
}

function integerSpec(node: SchemaNode, source: IntegerSource) {
  const format = typeof node.format === 'string' ? node.format : undefined;
  let [min, max] = (format && FORMAT_RANGES[format]) || DEFAULT_RANGE;
  if (typeof node.minimum === 'number') min = bigMax(min, BigInt(Math.ceil(node.minimum)));
  if (typeof node.maximum === 'number') max = bigMin(max, BigInt(Math.floor(node.maximum)));
  if (typeof node.exclusiveMinimum === 'number') min = bigMax(min, BigInt(Math.floor(node.exclusiveMinimum)) + 1n);
  if (typeof node.exclusiveMaximum === 'number') max = bigMin(max, BigInt(Math.ceil(node.exclusiveMaximum)) - 1n);
  return { source, min: String(min), max: String(max), asBigInt: format === 'int64' };
}

const bigMax = (a: bigint, b: bigint): bigint => (a > b ? a : b);
const bigMin = (a: bigint, b: bigint): bigint => (a < b ? a : b);

// Compiled once per schema: the bounds stay strings in it (Ajv serializes schemas) and are parsed here, not per request.
function compileExactInteger({ source, min, max, asBigInt }: ReturnType<typeof integerSpec>): DataValidateFunction {
  const [low, high] = [BigInt(min), BigInt(max)];
  const validate: DataValidateFunction = (data, context) => {
    const value = toBigInt(data, source);
    if (value === undefined) {
      const noFraction = typeof data === 'number' ? ' written without fraction or exponent' : '';
      return refused(validate, 'exactInteger', `must be an integer${noFraction}`, { type: 'integer' });
    }
    if (value < low) return refused(validate, 'exactInteger', `must be >= ${min}`, { limit: min });
    if (value > high) return refused(validate, 'exactInteger', `must be <= ${max}`, { limit: max });
    return handOn(context, asBigInt ? value : Number(value));
  };
  return validate;
}

function handOn(context: Parameters<DataValidateFunction>[1], value: unknown): true {
  if (context?.parentData !== undefined && context.parentDataProperty !== undefined) {
    (context.parentData as Record<string | number, unknown>)[context.parentDataProperty] = value;
  }
  return true;
}

function refused(validate: DataValidateFunction, keyword: string, message: string, params: Record<string, unknown>): false {
  validate.errors = [{ keyword, message, params }];
  return false;
}

function toBigInt(data: unknown, source: IntegerSource): bigint | undefined {
  if (typeof data === 'bigint') return data;
  if (source === 'text' && typeof data === 'string' && INTEGER_TEXT.test(data)) return BigInt(data);
  // A number in a URL part is a schema default; in a JSON body it was written as 1.5, 1e3 or 5.0.
  if (source === 'text' && typeof data === 'number' && Number.isSafeInteger(data)) return BigInt(data);
  return undefined;
}

// Runs before Ajv's number keywords (they are grouped after the untyped ones) and before const and enum.
const validateExactNumber: DataValidateFunction = (data, context) => {
  if (typeof data === 'number') return true;
  if (typeof data !== 'bigint') return refused(validateExactNumber, 'exactNumber', 'must be number', { type: 'number' });
  const value = Number(data);
  // 9007199254740993 would become ...992: refused rather than stored as a number the client never sent.
  const stored = BigInt(value);
  if (stored !== data) return refused(validateExactNumber, 'exactNumber', `must be a number a double holds exactly; ${data} would be stored as ${stored}`, { limit: String(data) });
  return handOn(context, value);
};

const MODIFYING = { modifying: true, errors: true } as const;
export const exactNumberKeyword: KeywordDefinition = { ...MODIFYING, keyword: 'exactNumber', schemaType: 'boolean', before: 'const', compile: () => validateExactNumber };
export const exactIntegerKeyword: KeywordDefinition = { ...MODIFYING, keyword: 'exactInteger', schemaType: 'object', compile: compileExactInteger };
