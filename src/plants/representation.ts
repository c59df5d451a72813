// How a stored plant appears on the wire beyond its JSON shape (which the response schemas of
// openapi.yaml write from the record): its ETag. Its page cursor is contract/paging.ts's, keyed by id.
import { hash } from 'node:crypto';
import { exactJson } from '../int64.ts';
import { inKeyOrder, type PlantRecord } from '../store/types.ts';

/** A strong ETag of the plant's content: equal exactly when every field is. */
export function plantEtag(plant: PlantRecord): string {
  // Fields added after name and tag are hashed after them, only when present: existing ETags stay valid;
  // an int64 field added is hashed with all its digits.
  const fields: unknown[] = [String(plant.id), plant.name, plant.tag ?? null];
  const added = addedFields(plant);
  if (added !== undefined) fields.push(inKeyOrder(added));
  const content = exactJson(fields);
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
