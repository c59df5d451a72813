// The application/json body parser: each integer literal a BigInt (int64 exact; `1e3` stays a number an integer field
// refuses), prototype poisoning keys, duplicate keys and lone surrogates refused.
import { MIMEType } from 'node:util';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { INTEGER_TEXT } from '../int64.ts';
import { HttpError } from './errors.ts';

/** Text that JSON.parse reads but the body parser refuses; its message is the reason, for a person. */
class RefusedJsonError extends Error {}

function exactIntegers(this: unknown, key: string, value: unknown, context?: { source?: string }): unknown {
  // A lone surrogate (\ud800) is valid JSON but not Unicode; SQLite would store it as U+FFFD.
  if (!key.isWellFormed() || (typeof value === 'string' && !value.isWellFormed())) {
    throw new RefusedJsonError(`The request body is not valid JSON: the field "${key.toWellFormed()}" holds a lone surrogate, which is not valid Unicode.`);
  }
  if (typeof value === 'number' && context?.source !== undefined && INTEGER_TEXT.test(context.source)) {
    return BigInt(context.source);
  }
  return value;
}

// In safe mode a forbidden key makes the answer null, which otherwise only the text `null` itself is.
const SAFE = { safe: true } as const;
const NULL_TEXT = /^\uFEFF?\s*null\s*$/;

/** JSON text as a value, integers as BigInt; throws a RefusedJsonError, a SyntaxError (not JSON) or a RangeError (nested too deeply). */
export function parseJson(text: string): unknown {
  // secure-json-parse ignores a leading BOM, as RFC 8259 allows, and walks the value only when the text names a suspect key.
  const value: unknown = secureJson.parse(text, exactIntegers as (key: string, value: unknown) => unknown, SAFE);
  if (value === null && !NULL_TEXT.test(text)) {
    throw new RefusedJsonError('The request body is not valid JSON: it contains a forbidden "__proto__" or "constructor.prototype" key.');
  }
  refuseDuplicateKeys(text);
  return value;
}

/** Walks text already known to be valid JSON, and throws on the first object that names a key twice. */
function refuseDuplicateKeys(text: string): void {
  // One entry per open container: the keys seen so far in an object, null for an array.
  const open: (Set<string> | null)[] = [];
  let expectingKey = false;
  for (let at = 0; at < text.length; at++) {
    const char = text[at];
    if (char === '"') {
      const end = stringEnd(text, at);
      const keys = open.at(-1);
      if (expectingKey && keys) {
        const key = JSON.parse(text.slice(at, end + 1)) as string;
        if (keys.has(key)) throw new RefusedJsonError(`The request body gives the key ${JSON.stringify(key)} more than once in one object; each key may appear once.`);
        keys.add(key);
      }
      expectingKey = false;
      at = end;
    } else if (char === '{') {
      open.push(new Set());
      expectingKey = true;
    } else if (char === '[') {
      open.push(null);
    } else if (char === '}' || char === ']') {
      open.pop();
    } else if (char === ',') {
      expectingKey = open.at(-1) != null;
    }
  }
}

function stringEnd(text: string, start: number): number {
  let at = start + 1;
  while (text[at] !== '"') at += text[at] === '\\' ? 2 : 1;
  return at;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Replaces Fastify's body parsers: JSON is the only media type the contract accepts. */
export function useExactJsonBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    try {
      done(null, readBody(request, body as Buffer));
    } catch (error) {
      done(refusalOf(error), undefined);
    }
  });
}

function readBody(request: FastifyRequest, body: Buffer): unknown {
  // The parser is only chosen for a Content-Type naming application/json, which MIMEType reads.
  const charset = new MIMEType(request.headers['content-type']!).params.get('charset')?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new HttpError(415, `JSON bodies are UTF-8 (RFC 8259); the charset "${charset}" is not supported.`);
  }
  // Decoded strictly: a stray byte is refused, never stored as U+FFFD.
  const text = UTF8.decode(body);
  if (text.trim() !== '') return parseJson(text);
  // Clients often label a body-less DELETE as JSON; only an operation that takes a body needs one.
  if (request.routeOptions.schema?.body === undefined) return undefined;
  throw new HttpError(400, 'The request body is empty; send a JSON object.');
}

function refusalOf(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if ((error as NodeJS.ErrnoException).code === 'ERR_ENCODING_INVALID_ENCODED_DATA') {
    return new HttpError(400, 'The request body is not valid UTF-8.');
  }
  if (error instanceof RefusedJsonError) return new HttpError(400, error.message);
  // The reviver recurses per level: past a few thousand levels the stack ends before the text.
  if (error instanceof RangeError) return new HttpError(400, 'The request body is nested too deeply to read.');
  const reason = String((error as Error).message).replace(/\.$/, '');
  return new HttpError(400, `The request body is not valid JSON: ${reason}.`);
}
