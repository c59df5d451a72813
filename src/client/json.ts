// JSON both ways with int64 exact: a bigint is written as a plain JSON integer, and an integer
// under an int64 key is read back as a bigint (JSON.parse alone rounds anything above 2^53).
import type { components } from '../generated/openapi.ts';
import { INTEGER_TEXT } from '../int64.ts';

/**
 * The keys whose values the contract declares int64: every other integer (`error`, `attempts`…)
 * is an int32 and stays a number. test/client-json.test.ts fails when openapi.yaml adds an int64
 * under another name.
 */
export const INT64_KEYS: ReadonlySet<string> = new Set(['id']);

interface ReviverContext {
  source?: string;
}

// JSON.rawJSON is in Node 24 but not yet in TypeScript's lib; declared here so the client needs no global.
const { rawJSON } = JSON as unknown as { rawJSON: (text: string) => unknown };

function exactInt64(key: string, value: unknown, context?: ReviverContext): unknown {
  if (typeof value !== 'number' || !INT64_KEYS.has(key)) return value;
  const source = context?.source;
  return source !== undefined && INTEGER_TEXT.test(source) ? BigInt(source) : value;
}

/** JSON.parse, with each int64 field (`id`) as an exact bigint. */
export function parseExactJson(text: string): unknown {
  return JSON.parse(text, exactInt64 as (key: string, value: unknown) => unknown);
}

/** JSON.stringify, writing each bigint as a plain JSON integer, digit for digit. */
export function stringifyJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => (typeof item === 'bigint' ? rawJSON(item.toString()) : item));
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
