// The copy Swagger UI draws, which would show NewPlant (allOf: [$ref Plant, {id}]) as "(any & object)": each component
// titled by its name, and an allOf of plain objects merged into one object. The published document is untouched.
import { resolve } from '../contract/operation-facts.ts';

type Schema = Record<string, unknown>;

const SCHEMA_REF = '#/components/schemas/';
const PLAIN_OBJECT_KEYWORDS = new Set(['type', 'title', 'description', 'properties', 'required']);

export function documentForUi(document: object): object {
  const copy = structuredClone(document) as Schema & { components?: { schemas?: Record<string, Schema> } };
  const schemas = copy.components?.schemas ?? {};
  for (const [name, schema] of Object.entries(schemas)) schema.title ??= name;
  // Components first, so a body or response merges the components' merged forms.
  for (const [name, schema] of Object.entries(schemas)) schemas[name] = mergeAll(schema, copy) as Schema;
  return mergeAll(copy, copy) as object;
}

/** `value` with every allOf merged; `document` holds the components already merged, which $refs name. */
function mergeAll(value: unknown, document: Schema): unknown {
  if (Array.isArray(value)) return value.map((item) => mergeAll(item, document));
  if (!isObject(value)) return value;
  const walked = Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mergeAll(item, document)]));
  return Array.isArray(walked.allOf) ? mergeAllOf(walked, document) : walked;
}

/** `{allOf: [A, B], ...rest}` as one object schema, when A and B are plain objects; else as it is. */
function mergeAllOf(schema: Schema, document: Schema): Schema {
  const { allOf, ...outer } = schema as Schema & { allOf: unknown[] };
  const parts = allOf.map((part) => resolve(document, part));
  if (!parts.every(isPlainObjectSchema)) return schema;
  const onlyRef = allOf.length === 1 ? refName(allOf[0]) : undefined;
  return {
    ...(onlyRef === undefined ? {} : { title: onlyRef }),
    ...outer,
    type: 'object',
    properties: Object.assign({}, ...parts.map((part) => part.properties), outer.properties),
    required: [...new Set([...parts, outer].flatMap((part) => (part.required as string[] | undefined) ?? []))],
  };
}

function refName(part: unknown): string | undefined {
  const ref = isObject(part) ? part.$ref : undefined;
  return typeof ref === 'string' && ref.startsWith(SCHEMA_REF) ? ref.slice(SCHEMA_REF.length) : undefined;
}

function isPlainObjectSchema(value: unknown): value is Schema {
  return isObject(value) && value.type === 'object' && Object.keys(value).every((key) => PLAIN_OBJECT_KEYWORDS.has(key));
}

function isObject(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
