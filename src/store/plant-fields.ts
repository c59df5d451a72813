// The plant fields the store keeps; the start checks openapi.yaml against them, as a field no column holds would be silently dropped.
import { SpecificationError } from '../spec-path.ts';
import { PLANT_FIELD_MIGRATIONS } from './migrations.ts';
import type { EveryPlantField, PlantContent } from './types.ts';

/** Per kind of field: the PostgreSQL array type of batched creates, and how its column reads back (int64 as the exact BigInt). */
export const COLUMN_KINDS = {
  text: { pgArray: 'text[]', read: (value: unknown) => value },
  number: { pgArray: 'float8[]', read: (value: unknown) => value },
  integer: { pgArray: 'int8[]', read: (value: unknown) => Number(value) },
  int64: { pgArray: 'int8[]', read: (value: unknown) => value },
} as const;

export type ColumnKind = keyof typeof COLUMN_KINDS;

/** Every field of a plant but its id, in column order, each column named as its field; a field added to openapi.yaml fails the type check here. */
export const PLANT_FIELDS: EveryPlantField<ColumnKind> = { name: 'text', tag: 'text' };

/** The fields in column order. */
export const PLANT_FIELD_NAMES = Object.keys(PLANT_FIELDS) as (keyof PlantContent)[];

/** openapi.yaml declares a plant field the store does not keep; the message names it and says what to do. */
export class UnkeptPlantFieldError extends SpecificationError {}

/** The schemas that hold a plant: what a request may send and what the store answers. */
const PLANT_SCHEMAS = ['Plant', 'NewPlant', 'StoredPlant'];

/** Every field the statements carry and a migration gives a column (`id` is the key of both). */
export function keptPlantFields(): Set<string> {
  const migrated = new Set(Object.keys(PLANT_FIELD_MIGRATIONS));
  return new Set(['id', ...PLANT_FIELD_NAMES.filter((field) => migrated.has(field))]);
}

/** Throws UnkeptPlantFieldError for the first plant field the specification declares and the store does not keep. */
export function checkPlantFields(specification: Record<string, unknown>): void {
  const kept = keptPlantFields();
  for (const schema of PLANT_SCHEMAS) {
    for (const field of declaredFields(specification, schemaNamed(specification, schema))) {
      if (kept.has(field)) continue;
      throw new UnkeptPlantFieldError(
        `openapi.yaml declares the plant field "${field}" (in ${schema}) but the store does not keep it: list it in ` +
          'PLANT_FIELDS and give it a migration (docs/development.md, "Adding a field, end to end"), or remove it from openapi.yaml.',
      );
    }
  }
}

type Schema = Record<string, unknown>;

function schemaNamed(specification: Schema, name: string): unknown {
  return ((specification.components as Schema | undefined)?.schemas as Schema | undefined)?.[name];
}

/** The property names a schema declares, through local $refs and allOf/anyOf/oneOf. */
function declaredFields(specification: Schema, schema: unknown, seen = new Set<unknown>()): string[] {
  if (typeof schema !== 'object' || schema === null || seen.has(schema)) return [];
  seen.add(schema);
  const node = schema as Schema;
  const fields = Object.keys((node.properties as Schema | undefined) ?? {});
  if (typeof node.$ref === 'string' && node.$ref.startsWith('#/components/schemas/')) {
    fields.push(...declaredFields(specification, schemaNamed(specification, node.$ref.slice('#/components/schemas/'.length)), seen));
  }
  for (const list of [node.allOf, node.anyOf, node.oneOf]) {
    if (Array.isArray(list)) for (const part of list) fields.push(...declaredFields(specification, part, seen));
  }
  return fields;
}
