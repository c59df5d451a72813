// The int64 range and how an integer is written: shared by parsing, validation, cursors and paging.
export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

/** An integer written plainly: an optional minus, no leading zeros, no fraction, no exponent. */
export const INTEGER_TEXT = /^-?(?:0|[1-9]\d*)$/;

/** JSON.stringify, writing each bigint as a plain JSON integer, digit for digit. */
export function exactJson(value: unknown, space?: number): string {
  return JSON.stringify(value, (_key, item: unknown) => (typeof item === 'bigint' ? JSON.rawJSON(String(item)) : item), space);
}
