// Logger options and request ids: JSON lines at the configured level, with credentials kept out of every line.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import pino, { type DestinationStream } from 'pino';
import type { Redact } from './redaction.ts';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export function loggerOptions(level: string, redact: Redact, stream?: DestinationStream): FastifyServerOptions['logger'] {
  return {
    level,
    // No header is written: Authorization never reaches a line.
    serializers: {
      // Host and the address come from headers a client may fill with a token; a client already gone leaves neither.
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: redact(request.url),
        host: request.host === undefined ? undefined : redact(request.host),
        remoteAddress: request.ip === undefined ? undefined : redact(request.ip),
      }),
      // A refusal's message may quote the client's input ("the unknown field …").
      reason: (reason: unknown) => (typeof reason === 'string' ? redact(reason) : reason),
      // A webhook target (the dispatcher's lines) is a subscriber's URL, which may carry a token.
      url: (url: unknown) => (typeof url === 'string' ? redact(url) : url),
    },
    stream: stream ?? standardOutput(),
  };
}

let stdout: DestinationStream | undefined;

/**
 * Where the process's JSON lines go: stdout, each line written as it is made, as Node writes stdout to files and pipes.
 * pino's asynchronous default writes at most 16 KB per turn of the loop: under load its backlog (in memory, lost in a
 * crash) grows without bound. A reader that stops reading holds the process back instead, as it would hold console.log.
 */
export function standardOutput(): DestinationStream {
  return (stdout ??= pino.destination({ dest: 1, sync: true }));
}

/** Fastify's genReqId: the client's X-Request-Id when a plain word holding no token (it is in every log line), else generated. */
export function requestIds(redact: Redact): (request: IncomingMessage) => string {
  return (request) => {
    const given = request.headers['x-request-id'];
    return typeof given === 'string' && SAFE_REQUEST_ID.test(given) && redact(given) === given ? given : randomUUID();
  };
}

/** Puts the request's id on its answer: as the request arrives (error answers keep the headers set before the error), or earlier. */
export function returnRequestId(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id);
}

/** Fastify's two request lines as one access line, written as the answer closes, with a refusal's reason; the arrival alone at debug. */
export class AccessLog extends LogController {
  /** Whether requests are logged at all: only then is an answer watched. */
  readonly #logsRequests: boolean;

  constructor(level: string) {
    super();
    this.#logsRequests = ['info', 'debug', 'trace'].includes(level);
  }

  override incomingRequest(request: FastifyRequest, reply: FastifyReply): void {
    request.log.debug({ req: request }, 'incoming request');
    // On close rather than Fastify's completion, which never comes below routing or for a client gone first (HAProxy's checks).
    if (!this.#logsRequests) return;
    reply.raw.once('close', () => reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime, reason: reply.refusal }, 'request completed'));
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) super.requestCompleted(error, request, reply);
  }
}

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];
/** The pino logger Fastify builds from loggerOptions, with pino's documented level check. */
type Pino = FastifyBaseLogger & { isLevelEnabled(level: Level): boolean };

/** Fastify's childLoggerFactory: the pino child is made on a request's first line; one that logs nothing pays for none. */
export function lazyChildLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildOptions): FastifyBaseLogger {
  return new LazyChild(logger as Pino, bindings, options);
}

class LazyChild implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;
  readonly #parent: Pino;
  readonly #bindings: Bindings;
  readonly #options: ChildOptions;

  constructor(parent: Pino, bindings: Bindings, options: ChildOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  get #made(): FastifyBaseLogger {
    return (this.#child ??= this.#parent.child(this.#bindings, this.#options));
  }

  get level(): string {
    return this.#made.level;
  }

  set level(level: string) {
    this.#made.level = level;
  }

  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.#made.child(bindings, options);
  }

  #write(level: Level, args: unknown[]): void {
    if (this.#child === undefined && !this.#parent.isLevelEnabled(level)) return;
    const made = this.#made;
    (made[level] as (...line: unknown[]) => void).apply(made, args);
  }

  fatal(...args: unknown[]): void {
    this.#write('fatal', args);
  }

  error(...args: unknown[]): void {
    this.#write('error', args);
  }

  warn(...args: unknown[]): void {
    this.#write('warn', args);
  }

  info(...args: unknown[]): void {
    this.#write('info', args);
  }

  debug(...args: unknown[]): void {
    this.#write('debug', args);
  }

  trace(...args: unknown[]): void {
    this.#write('trace', args);
  }

  silent(): void {}
}
