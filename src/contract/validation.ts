// Request validation: strict for bodies, lenient for path and query strings, and messages that name the field.
import { Ajv2020, type ErrorObject, type Options, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler, FastifySchema } from 'fastify';
import { unescapePointer } from './operation-facts.ts';
import { exactIntegerKeyword, exactNumberKeyword, withExactIntegers } from './integers.ts';

function createAjv(options: Options = {}) {
  // OpenAPI schemas carry keywords Ajv does not know (example, xml); glue has checked them against OpenAPI's schema at boot.
  const ajv = new Ajv2020({ strict: false, validateSchema: false, useDefaults: true, ...options });
  return addFormats.default(ajv).addKeyword(exactIntegerKeyword).addKeyword(exactNumberKeyword);
}

const bodyAjv = createAjv();
const urlAjv = createAjv({ coerceTypes: 'array' });

export const validatorCompiler: FastifySchemaCompiler<FastifySchema> = ({ schema, httpPart }) => {
  if (httpPart === 'body') return bodyAjv.compile(withExactIntegers(schema, 'json')) as ValidateFunction;
  return urlAjv.compile(withExactIntegers(schema, 'text')) as ValidateFunction;
};

const PARTS: Record<string, { name: string; field: string }> = {
  body: { name: 'request body', field: 'request body field' },
  querystring: { name: 'query string', field: 'query parameter' },
  params: { name: 'path', field: 'path parameter' },
  headers: { name: 'request headers', field: 'header' },
};

/** One sentence naming the first offending field, e.g. `The request body field "id" must be an integer.` */
export function formatSchemaErrors(errors: ErrorObject[], dataVar: string): Error {
  // Fastify formats only a failed validation, which Ajv stops at its first error.
  const error = errors[0]!;
  const { name: part, field } = PARTS[dataVar]!;
  const path = fieldPath(error.instancePath);
  switch (error.keyword) {
    case 'required':
      return new Error(`The ${part} is missing the required field "${join(path, String(error.params.missingProperty))}".`);
    case 'unevaluatedProperties':
    case 'additionalProperties': {
      const name = String(error.params.unevaluatedProperty ?? error.params.additionalProperty);
      return new Error(`The ${part} has the unknown field "${join(path, name)}".`);
    }
  }
  const subject = path === '' ? `The ${part}` : `The ${field} "${path}"`;
  return new Error(`${subject} ${(error.keyword === 'pattern' && PATTERN_RULES[String(error.params.pattern)]) || error.message || 'is not valid'}.`);
}

// The spec's patterns as rules a person reads; Ajv would quote the regular expression.
const PATTERN_RULES: Record<string, string> = {
  '^[^\\u0000]*$': 'must not contain the NUL character (U+0000)',
};

// Ajv's instancePath is a JSON pointer ("/tags/0"); people read dotted paths ("tags.0").
function fieldPath(instancePath: string): string {
  return instancePath.split('/').slice(1).map(unescapePointer).join('.');
}

const join = (path: string, name: string): string => (path === '' ? name : `${path}.${name}`);
