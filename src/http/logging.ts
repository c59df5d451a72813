// Logger options: JSON lines at the configured level, with credentials kept out of every line.
import type { FastifyBaseLogger, FastifyLogFn, FastifyRequest, FastifyServerOptions } from 'fastify';

type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildLoggerOptions = NonNullable<Parameters<FastifyBaseLogger['child']>[1]>;

const ISSUED_TOKEN = /pst_[0-9A-Za-z]{20,}/g;
const SEPARATOR = /([&;])/;

/**
 * The URL as logs may show it: the value of every query parameter whose name spells
 * access_token (in any case, percent-encoded any number of times, `+` for a space) is replaced,
 * and so is anything shaped like an issued token, wherever it appears in the query.
 */
export function redactUrl(url: string): string {
  const start = url.indexOf('?');
  if (start === -1) return url;
  const query = url.slice(start + 1).split(SEPARATOR).map(redactParameter).join('');
  return `${url.slice(0, start + 1)}${query}`.replace(ISSUED_TOKEN, 'pst_[redacted]');
}

function redactParameter(parameter: string): string {
  const equals = parameter.indexOf('=');
  const name = equals === -1 ? parameter : parameter.slice(0, equals);
  return equals !== -1 && isAccessTokenName(name) ? `${name}=[redacted]` : parameter;
}

function isAccessTokenName(name: string): boolean {
  let decoded = name.replaceAll('+', ' ');
  for (let rounds = 0; rounds < 4 && decoded.includes('%'); rounds++) decoded = percentDecode(decoded);
  return decoded.trim().toLowerCase() === 'access_token';
}

// decodeURIComponent throws on a stray %; the logs must still be written.
function percentDecode(text: string): string {
  return text.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

export function loggerOptions(level: string, stream?: NodeJS.WritableStream): FastifyServerOptions['logger'] {
  return {
    level,
    redact: { paths: ['req.headers.authorization'], censor: '[redacted]' },
    serializers: {
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: redactUrl(request.url),
        host: request.host,
        remoteAddress: request.ip,
      }),
    },
    ...(stream && { stream }),
  };
}

// pino's levels, by their numbers: a line is written when its level's is at least the logger's.
const LEVEL_VALUES = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity } as const;
type Level = Exclude<keyof typeof LEVEL_VALUES, 'silent'>;
const LEVELS = Object.keys(LEVEL_VALUES).filter((level): level is Level => level !== 'silent');

/**
 * Fastify's childLoggerFactory: a request's logger that becomes pino's child (with the request id)
 * only when a line is written. Fastify built that child for every request, at every level: 0.5 µs
 * of a 16 µs 401 in a profile, at LOG_LEVEL=warn, where nearly no request ever writes a line.
 */
export function requestLoggerFactory(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  // A route's own level or serializers: pino's child at once, as Fastify would make it.
  if (Object.keys(options).length > 0) return logger.child(bindings, options);
  return new RequestLogger(logger, bindings);
}

class RequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  #child: FastifyBaseLogger | undefined;
  declare fatal: FastifyLogFn;
  declare error: FastifyLogFn;
  declare warn: FastifyLogFn;
  declare info: FastifyLogFn;
  declare debug: FastifyLogFn;
  declare trace: FastifyLogFn;
  declare silent: FastifyLogFn;

  constructor(parent: FastifyBaseLogger, bindings: Bindings) {
    this.#parent = parent;
    this.#bindings = bindings;
  }

  get level(): string {
    return this.#child?.level ?? this.#parent.level;
  }

  set level(level: string) {
    this.#logger().level = level;
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger().child(bindings, options);
  }

  /** Writes through pino's child, made now; a line below the level is dropped without it. */
  write(level: Level, args: unknown[]): void {
    const threshold = LEVEL_VALUES[(this.#child ?? this.#parent).level as keyof typeof LEVEL_VALUES] ?? 0;
    if (LEVEL_VALUES[level] < threshold) return;
    (this.#logger()[level] as (...args: unknown[]) => void)(...args);
  }

  #logger(): FastifyBaseLogger {
    return (this.#child ??= this.#parent.child(this.#bindings));
  }
}

for (const level of LEVELS) {
  Object.defineProperty(RequestLogger.prototype, level, {
    value: function (this: RequestLogger, ...args: unknown[]) {
      this.write(level, args);
    },
  });
}
RequestLogger.prototype.silent = () => undefined;
