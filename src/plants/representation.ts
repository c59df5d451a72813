// A stored plant's ETag: what the wire shows of it beyond the JSON the response schemas write.
import { hash } from 'node:crypto';
import { exactJson } from '../int64.ts';
import { inKeyOrder, type PlantRecord } from '../store/types.ts';

/** A strong ETag of the plant's content: equal exactly when every field is. */
export function plantEtag(plant: PlantRecord): string {
  // Fields added after name and tag are hashed after them, only when present, so that existing ETags stay valid.
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
