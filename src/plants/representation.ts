// How a stored plant appears on the wire beyond its JSON shape (which the response schemas of
// openapi.yaml write from the record): its ETag and its page cursor.
import { hash } from 'node:crypto';
import { HttpError } from '../contract/errors.ts';
import { INT64_MAX, INT64_MIN } from '../int64.ts';
import { inKeyOrder, type PlantRecord } from '../store/types.ts';

/** A strong ETag of the plant's content: equal exactly when every field is. */
export function plantEtag(plant: PlantRecord): string {
  // Fields added after name and tag are hashed after them, only when present: existing ETags stay valid.
  const fields: unknown[] = [String(plant.id), plant.name, plant.tag ?? null];
  const added = addedFields(plant);
  if (added !== undefined) fields.push(inKeyOrder(added));
  const content = JSON.stringify(fields);
  return `"${hash('sha256', content, 'base64url').slice(0, 27)}"`;
}

/** The fields with a value beyond id, name and tag, or undefined when there are none (no object built then). */
function addedFields(plant: PlantRecord): Record<string, unknown> | undefined {
  let added: Record<string, unknown> | undefined;
  for (const key in plant) {
    const value: unknown = plant[key as keyof PlantRecord];
    if (key !== 'id' && key !== 'name' && key !== 'tag' && value !== undefined) (added ??= {})[key] = value;
  }
  return added;
}

const CURSOR_VERSION = 'p1';
const CURSOR_TEXT = /^p1:(-?(?:0|[1-9]\d{0,18}))$/;

/** An opaque cursor meaning "the plants after this id". */
export function encodeCursor(lastId: bigint | number): string {
  return Buffer.from(`${CURSOR_VERSION}:${lastId}`).toString('base64url');
}

export function decodeCursor(cursor: string): bigint {
  const match = CURSOR_TEXT.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  const id = match ? BigInt(match[1]!) : undefined;
  // Re-encoding must give the cursor back: base64url decoding skips stray characters silently.
  if (id === undefined || id < INT64_MIN || id > INT64_MAX || encodeCursor(id) !== cursor) {
    throw new HttpError(400, 'The query parameter "cursor" is not a cursor this API gave out; start again without it.');
  }
  return id;
}
