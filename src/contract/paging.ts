// Keyset pages, as every listed collection answers them: `PageLimit`, `PageCursor`, ascending keys and `Link: rel="next"`.
import type { FastifyReply } from 'fastify';
import { INT64_MAX, INT64_MIN } from '../int64.ts';
import { HttpError } from './errors.ts';

interface PageRequest {
  /** Never absent here: Ajv fills in the default of the spec's `PageLimit` before the handler runs. */
  limit?: number;
  cursor?: string;
}

/** Reads up to `limit` items whose key is greater than `after` (from the first when undefined), in key order. */
type PageReader<Item> = (after: bigint | undefined, limit: number) => Promise<Item[]>;

/** The pages of the collection at `path`, ordered by `keyOf`: a page's items and, when more follow, a `Link` repeating `filters`. */
export function keysetPages<Item>(path: string, keyOf: (item: Item) => bigint) {
  return async function page(reply: FastifyReply, { limit: asked, cursor }: PageRequest, read: PageReader<Item>, filters: Record<string, string | undefined> = {}): Promise<Item[]> {
    const limit = asked!;
    const after = cursor === undefined ? undefined : decodeCursor(cursor);
    // One item more than asked tells whether a next page exists without a count query.
    const items = await read(after, limit + 1);
    if (items.length > limit) {
      items.length = limit;
      reply.header('link', `<${path}?limit=${limit}${filterParameters(filters)}&cursor=${encodeCursor(keyOf(items.at(-1)!))}>; rel="next"`);
    }
    return items;
  };
}

// Written out rather than through URLSearchParams: cursors are URL-safe and each filter is encoded.
function filterParameters(filters: Record<string, string | undefined>): string {
  let text = '';
  for (const [name, value] of Object.entries(filters)) if (value !== undefined) text += `&${name}=${encodeURIComponent(value)}`;
  return text;
}

const CURSOR_VERSION = 'p1';
const CURSOR_TEXT = /^p1:(-?(?:0|[1-9]\d{0,18}))$/;

export function encodeCursor(lastKey: bigint | number): string {
  return Buffer.from(`${CURSOR_VERSION}:${lastKey}`).toString('base64url');
}

function decodeCursor(cursor: string): bigint {
  const match = CURSOR_TEXT.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  const key = match ? BigInt(match[1]!) : undefined;
  // Re-encoding must give the cursor back: base64url decoding skips stray characters silently.
  if (key === undefined || key < INT64_MIN || key > INT64_MAX || encodeCursor(key) !== cursor) {
    throw new HttpError(400, 'The query parameter "cursor" is not a cursor this API gave out; start again without it.');
  }
  return key;
}
