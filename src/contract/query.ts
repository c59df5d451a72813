// The query string parser: fast-querystring (Fastify's default), but a malformed percent-encoding is a 400, as in the
// path. It runs inside the router, where a throw would escape every handler: a hook turns its MalformedQuery into the 400.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import querystring from 'fast-querystring';
import { HttpError } from './errors.ts';

/** What the parser answers for a query string with a malformed percent-encoding; no parameter is read from it. */
export class MalformedQuery {
  // Shaped as a parsed query, as the router expects; none of its keys is a parameter.
  [key: string]: unknown;
  readonly parameter: string | undefined;

  constructor(parameter: string | undefined) {
    this.parameter = parameter;
  }
}

export function parseQueryString(text: string): Record<string, unknown> {
  // Without a '%' nothing is percent-encoded, so nothing can be malformed: the common case pays one scan.
  if (text.includes('%') && !decodes(text)) return new MalformedQuery(offendingParameter(text));
  return querystring.parse(text);
}

/** Answers 400 for a malformed query string before authentication, as the router does for a malformed path. */
export function refuseMalformedQueries(app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    const query: unknown = request.query;
    // Only an operation has query parameters: an unknown path stays a 404, CORS's OPTIONS gets what CORS answers.
    if (!(query instanceof MalformedQuery) || !isOperation(request)) return done();
    const subject = query.parameter === undefined ? 'A query parameter name' : `The query parameter "${query.parameter}"`;
    done(new HttpError(400, `${subject} is not valid: it contains a malformed percent-encoding.`));
  });
}

/** Whether the request's route is one of openapi.yaml's operations, rather than a 404, the docs or CORS's OPTIONS route. */
function isOperation(request: FastifyRequest): boolean {
  return (request.routeOptions.schema as { operationId?: string } | undefined)?.operationId !== undefined;
}

// Whole or piece by piece, the same answer: '&' and '=' are never part of an escape.
function decodes(text: string): boolean {
  try {
    decodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
}

/** The name of the first parameter whose name or value does not decode; undefined when the name itself does not. */
function offendingParameter(text: string): string | undefined {
  for (const pair of text.split('&')) {
    if (decodes(pair)) continue;
    const equals = pair.indexOf('=');
    const name = (equals === -1 ? pair : pair.slice(0, equals)).replaceAll('+', ' ');
    return decodes(name) ? decodeURIComponent(name) : undefined;
  }
  return undefined;
}
