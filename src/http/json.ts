// The application/json body parser. Every integer literal becomes a BigInt so int64 values
// survive exactly (JSON.parse would round above 2^53) and so `1e3` or `5.0` stay numbers that
// an integer field can tell apart and refuse. Prototype poisoning keys are refused.
import type { FastifyInstance } from 'fastify';
import secureJson from 'secure-json-parse';
import { HttpError } from './errors.ts';

const INTEGER_LITERAL = /^-?(?:0|[1-9]\d*)$/;

interface ReviverContext {
  source?: string;
}

class MalformedTextError extends Error {}

function exactIntegers(this: unknown, key: string, value: unknown, context?: ReviverContext): unknown {
  // A lone surrogate (\ud800) is valid JSON but not Unicode; SQLite would store it as U+FFFD.
  if (!key.isWellFormed() || (typeof value === 'string' && !value.isWellFormed())) {
    throw new MalformedTextError(`the field "${key.toWellFormed()}" holds a lone surrogate, which is not valid Unicode`);
  }
  if (typeof value === 'number' && context?.source !== undefined && INTEGER_LITERAL.test(context.source)) {
    return BigInt(context.source);
  }
  return value;
}

export function parseJson(text: string): unknown {
  return secureJson.parse(text, exactIntegers as (key: string, value: unknown) => unknown, {
    protoAction: 'error',
    constructorAction: 'error',
  });
}

/** Replaces Fastify's body parsers: JSON is the only media type the contract accepts. */
export function useExactJsonBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    if (text.trim() === '') {
      // Clients often label a body-less DELETE as JSON; only an operation that takes a body needs one.
      const expectsBody = request.routeOptions.schema?.body !== undefined;
      done(expectsBody ? new HttpError(400, 'The request body is empty; send a JSON object.') : null, undefined);
      return;
    }
    try {
      done(null, parseJson(text));
    } catch (error) {
      done(new HttpError(400, `The request body is not valid JSON: ${describeJsonError(error)}.`), undefined);
    }
  });
}

function describeJsonError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof MalformedTextError) return message;
  if (/prototype/i.test(message)) return 'it contains a forbidden "__proto__" or "constructor.prototype" key';
  return message.replace(/\.$/, '');
}
