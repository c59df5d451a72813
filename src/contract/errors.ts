// Every failure, from any layer, leaves as the published Error body: {"error": status, "message": "..."}.
import createError from '@fastify/error';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { components } from '../generated/openapi.ts';

declare module 'fastify' {
  interface FastifyReply {
    /** Why the request was refused: written on its access line as `reason`. */
    refusal: string | undefined;
  }
}

// An answer, not a fault: @fastify/error builds it without capturing a stack, which no one would read.
const Refusal = createError<'PLANT_STORE_REFUSAL', number>('PLANT_STORE_REFUSAL', '%s', 500, Error, false);

/** Throw this from handlers and hooks: its status, message and headers reach the client as they are. */
export class HttpError extends Refusal {
  override readonly statusCode: number;
  readonly headers: Record<string, string>;
  #body: string | undefined;

  constructor(statusCode: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.statusCode = statusCode;
    this.headers = headers;
  }

  /** The Error body's JSON text, made once: a message may quote the client's input, half a surrogate pair included. */
  get body(): string {
    return (this.#body ??= JSON.stringify({ error: this.statusCode, message: this.message.toWellFormed() } satisfies components['schemas']['Error']));
  }
}

const INTERNAL_ERROR = 'The service failed to handle this request; it has been logged.';
const UNAVAILABLE = 'The service cannot reach its store right now; retry shortly.';

export function installErrorHandling(app: FastifyInstance): void {
  app.decorateReply('refusal', undefined);
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const failure = toHttpError(error, request);
    if (failure.statusCode < 500) return refuse(reply, failure);
    request.log.error({ err: error }, 'request failed');
    return sendError(reply, failure);
  });
  app.setNotFoundHandler((request, reply) => sendError(reply, notFound(request)));
}

/** Answers a client's fault as the error handler would (its reason on the access line), from a hook that need not throw. */
export function refuse(reply: FastifyReply, failure: HttpError): FastifyReply {
  reply.refusal = failure.message;
  return sendError(reply, failure);
}

function notFound(request: FastifyRequest): HttpError {
  return new HttpError(404, `There is no ${request.method} ${request.url.split('?')[0]} in this API.`);
}

/** Fastify's `frameworkErrors` option: failures found before routing (a malformed URL). */
export function frameworkErrorHandler(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  sendError(reply, FRAMEWORK_ERRORS[error.code] ?? new HttpError(500, INTERNAL_ERROR));
}

const FRAMEWORK_ERRORS: Record<string, HttpError> = {
  FST_ERR_BAD_URL: new HttpError(400, 'The URL is not valid: it contains a malformed percent-encoding.'),
  // Fastify's own answer is 414; no parameter of this API is near 100 characters, so it is plain bad input.
  FST_ERR_MAX_PARAM_LENGTH: new HttpError(400, 'A path parameter of the URL is too long.'),
};

function sendError(reply: FastifyReply, failure: HttpError): FastifyReply {
  // Text of a named JSON type is written as it is: no serializer, no preSerialization step.
  return reply.code(failure.statusCode).headers(failure.headers).type('application/json; charset=utf-8').send(failure.body);
}

function toHttpError(error: FastifyError, request: FastifyRequest): HttpError {
  // The not-found route parses a body before its handler runs; the route's absence is the answer.
  if (request.is404) return notFound(request);
  if (error instanceof HttpError) return error;
  // A dependency that may come back (the store's StoreUnavailableError): retry, not a fault of the service.
  if (error.statusCode === 503) return new HttpError(503, UNAVAILABLE, { 'retry-after': '1' });
  if (error.validation) return new HttpError(400, error.message);
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new HttpError(415, `The Content-Type "${request.headers['content-type'] ?? ''}" is not supported; send application/json.`);
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new HttpError(413, `The request body is larger than the limit of ${request.routeOptions.bodyLimit} bytes.`);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new HttpError(400, 'The Content-Length header does not match the body.');
  }
  const status = error.statusCode ?? 500;
  return status >= 400 && status < 500 ? new HttpError(status, sentence(error.message)) : new HttpError(500, INTERNAL_ERROR);
}

function sentence(message: string): string {
  const trimmed = message.trim() || 'The request was refused';
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}
