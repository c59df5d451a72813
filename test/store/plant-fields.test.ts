// The start-up check of src/store/plant-fields.ts: every plant field openapi.yaml declares, through
// $refs and allOf, is one the store keeps; the first that is not is named with its schema.
import t from 'tap';
import { checkPlantFields, keptPlantFields, UnkeptPlantFieldError } from '../../src/store/plant-fields.ts';
import { readSpecification } from '../../src/spec-path.ts';

type Schema = Record<string, unknown>;

/** A copy of openapi.yaml with `field` added to the schema at `path` under components.schemas. */
function specWith(path: (string | number)[], field: string): Schema {
  const spec = structuredClone(readSpecification());
  let node = (spec.components as Schema).schemas as Schema;
  for (const step of path) node = (node as Record<string | number, Schema>)[step]!;
  (node.properties as Schema)[field] = { type: 'number' };
  return spec;
}

t.test('openapi.yaml as it is declares only fields the store keeps', async (t) => {
  t.doesNotThrow(() => checkPlantFields(readSpecification()));
  t.same([...keptPlantFields()], ['id', 'name', 'tag']);
});

t.test('a field the store does not keep is named with the schema that declares it, wherever it is declared', async (t) => {
  const cases: [(string | number)[], string][] = [
    [['Plant'], 'Plant'],
    [['NewPlant', 'allOf', 1], 'NewPlant'], // inline, beside the $ref to Plant
    [['StoredPlant', 'allOf', 0], 'StoredPlant'],
  ];
  for (const [path, schema] of cases) {
    t.throws(() => checkPlantFields(specWith(path, 'price')), new UnkeptPlantFieldError(
      `openapi.yaml declares the plant field "price" (in ${schema}) but the store does not keep it: list it in PLANT_FIELDS and give it a migration (docs/development.md, "Adding a field, end to end"), or remove it from openapi.yaml.`,
    ), path.join('.'));
  }
});
