// The plant fields the store keeps, against those openapi.yaml declares, checked at start: a declared
// field that no column holds would be validated, echoed in the answer and then silently dropped.
import { PLANT_FIELD_MIGRATIONS } from './migrations.ts';
import { PLANT_FIELDS_IN_SQL } from './sql.ts';

/** openapi.yaml declares a plant field the store does not keep; the message names it and says what to do. */
export class UnkeptPlantFieldError extends Error {}

/** The schemas that hold a plant: what a request may send and what the store answers. */
const PLANT_SCHEMAS = ['Plant', 'NewPlant', 'StoredPlant'];

/** Every field a migration gives a column and the shared statements carry (`id` is the key of both). */
export function keptPlantFields(): Set<string> {
  const inSql = new Set(Object.keys(PLANT_FIELDS_IN_SQL));
  return new Set(['id', ...Object.keys(PLANT_FIELD_MIGRATIONS).filter((field) => inSql.has(field))]);
}

/** Throws UnkeptPlantFieldError for the first plant field the specification declares and the store does not keep. */
export function checkPlantFields(specification: Record<string, unknown>): void {
  const kept = keptPlantFields();
  for (const schema of PLANT_SCHEMAS) {
    for (const field of declaredFields(specification, schemaNamed(specification, schema))) {
      if (kept.has(field)) continue;
      throw new UnkeptPlantFieldError(
        `openapi.yaml declares the plant field "${field}" (in ${schema}) but the store does not keep it: give it a column, ` +
          'a migration and its place in the statements (docs/development.md, "Adding a field, end to end"), or remove it from openapi.yaml.',
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
