// A malformed percent-encoding in the query string is a 400 naming its parameter, as in the path: Fastify's parser
// (fast-querystring) keeps such an escape as text, so the hook below reads the query string as sent.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { HttpError } from './errors.ts';

export function refuseMalformedQueries(app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    const start = request.url.indexOf('?');
    const text = request.url.slice(start + 1);
    // Without a '%' nothing is percent-encoded, so nothing can be malformed: the common case pays one scan.
    // Only an operation has query parameters: an unknown path stays a 404, CORS's OPTIONS gets what CORS answers.
    if (start === -1 || !text.includes('%') || decodes(text) || !isOperation(request)) return done();
    const parameter = offendingParameter(text);
    const subject = parameter === undefined ? 'A query parameter name' : `The query parameter "${parameter}"`;
    done(new HttpError(400, `${subject} is not valid: it contains a malformed percent-encoding.`));
  });
}

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

// The text does not decode, so one of its pairs does not: that pair's name, undefined when the name itself does not.
function offendingParameter(text: string): string | undefined {
  const name = text.split('&').find((pair) => !decodes(pair))!.split('=', 1)[0]!.replaceAll('+', ' ');
  return decodes(name) ? decodeURIComponent(name) : undefined;
}
