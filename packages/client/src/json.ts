// JSON both ways with int64 exact on every runtime: lossless-json reads each number as its text, so
// an integer under an int64 key becomes a bigint digit for digit, any other number becomes a number
// only when that is exact, and a bigint is written as a plain JSON integer. No JSON.parse source
// access or JSON.rawJSON, which Node 20 and older browsers lack.
import { isInteger, isLosslessNumber, isSafeNumber, parse, stringify } from 'lossless-json';
import { INT64_FIELDS } from './int64-fields.ts';
import type { components } from './openapi.ts';

/**
 * The keys whose values the contract declares int64, as `npm run generate` read them from openapi.yaml:
 * every other integer (`error`, `attempts`…) is an int32 and stays a number.
 */
export const INT64_KEYS: ReadonlySet<string> = new Set(INT64_FIELDS);

/** A number's text as a bigint (int64 keys) or a number; throws rather than round. */
function exactNumber(key: string, text: string): bigint | number {
  if (INT64_KEYS.has(key) && isInteger(text)) return BigInt(text);
  if (isSafeNumber(text)) return Number(text);
  throw new RangeError(`The JSON number ${text} under "${key}" cannot be represented exactly as a JavaScript number.`);
}

function revive(key: string, value: unknown): unknown {
  return isLosslessNumber(value) ? exactNumber(key, value.toString()) : value;
}

/** JSON.parse, with each int64 field (INT64_KEYS) as an exact bigint; throws a RangeError rather than round any number. */
export function parseExactJson(text: string): unknown {
  return parse(text, revive);
}

/** JSON.stringify, writing each bigint as a plain JSON integer, digit for digit. */
export function stringifyJson(value: unknown): string {
  const text = stringify(value);
  if (text === undefined) throw new TypeError('The value has no JSON form.');
  return text;
}

export type StoredPlant = components['schemas']['StoredPlant'];

/**
 * A plant's JSON (an answer body, or a webhook payload once its signature is verified) with its
 * int64 `id` exact. Throws a TypeError when the text is not a plant.
 */
export function parsePlantJson(text: string): StoredPlant {
  const value = parseExactJson(text);
  if (!isPlant(value)) throw new TypeError('The JSON is not a plant: it needs an integer "id" and a string "name".');
  return value;
}

function isPlant(value: unknown): value is StoredPlant {
  if (typeof value !== 'object' || value === null) return false;
  const { id, name, tag } = value as Record<string, unknown>;
  return typeof id === 'bigint' && typeof name === 'string' && (tag === undefined || typeof tag === 'string');
}
