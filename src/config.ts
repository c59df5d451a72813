// Environment -> typed, validated configuration: each variable declared once (type, default, meaning), checked by env-schema.
import type { ErrorObject, KeywordDefinition } from 'ajv';
import envSchema, { type EnvSchemaOpt } from 'env-schema';
import ipaddr from 'ipaddr.js';
import type { ExtendedJSONSchema, FromExtendedSchema } from 'json-schema-to-ts';
import { parseDuration } from './duration.ts';

export class ConfigError extends Error {}

/** How a variable declared with `parse` is read (undefined: refused), and what an operator is told then. */
const PARSERS = {
  duration: { read: parseDuration, takes: 'takes a duration such as 250ms, 5s, 5m, 2h or 1d' },
  schedule: { read: parseSchedule, takes: 'takes durations such as 250ms, 5s, 5m, 2h or 1d, comma-separated for a schedule' },
  deadline: { read: parseDeadline, takes: 'takes a duration from 1ms to 1d, such as 250ms or 5s' },
  tokens: { read: listOf((token) => STATIC_TOKEN.test(token)), takes: 'must be comma-separated tokens of at least 16 printable characters without spaces' },
  trustProxy: {
    read: parseTrustProxy,
    takes: 'takes false, true, a hop count, or comma-separated proxy addresses and CIDRs (e.g. 10.0.0.0/8,loopback)',
  },
  origins: {
    read: listOf(isSerializedOrigin),
    takes: 'must be comma-separated origins such as https://app.example.com (scheme, host and port only, no path or trailing slash)',
  },
  httpUrl: {
    read: (text: string) => (/^https?:$/.test(URL.parse(text)?.protocol ?? '') ? text : undefined),
    takes: 'must be an http:// or https:// URL, such as http://localhost:4318',
  },
  redisUrl: { read: (text: string) => (/^rediss?:\/\//.test(text) ? text : undefined), takes: 'must be a redis:// or rediss:// URL, such as redis://localhost:6379' },
};
type Parser = keyof typeof PARSERS;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const TRACES_SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;

export const ENVIRONMENT = {
  type: 'object',
  additionalProperties: false,
  properties: {
    HOST: { type: 'string', default: '127.0.0.1', description: 'the interface to listen on' },
    PORT: { type: 'integer', minimum: 0, maximum: 65535, default: 3000, description: 'the TCP port to listen on' },
    DATABASE_URL: { type: 'string', default: 'sqlite:./data/plants.db', description: 'sqlite:<path> or postgres://user:password@host:5432/database' },
    DATABASE_POOL_SIZE: { type: 'integer', minimum: 1, maximum: 1000, default: 10, description: 'connections each instance keeps to PostgreSQL' },
    DATABASE_STARTUP_TIMEOUT: { type: 'string', parse: 'duration', default: '20s', description: 'how long a start keeps retrying an unreachable PostgreSQL' },
    DATABASE_QUERY_TIMEOUT: { type: 'string', parse: 'deadline', default: '5s', description: 'the longest one wait on PostgreSQL (a connection, an answer) lasts; then 503' },
    API_TOKENS: { type: 'string', parse: 'tokens', default: '', description: 'static bearer tokens, with every scope' },
    LOG_LEVEL: { type: 'string', enum: LOG_LEVELS, default: 'info', description: 'the pino log level' },
    RATE_LIMIT_PER_MINUTE: { type: 'integer', minimum: 1, description: 'requests per minute per token; unset: no limit' },
    REDIS_URL: { type: 'string', parse: 'redisUrl', description: 'where instances share the rate-limit budget' },
    AUTH_FAILURES_PER_MINUTE: { type: 'integer', minimum: 0, default: 100, description: 'failed authentications per minute per address before 429; 0: no limit' },
    TRUST_PROXY: { type: 'string', parse: 'trustProxy', default: 'false', description: "Fastify's trustProxy: whose X-Forwarded-For gives the client address" },
    CORS_ORIGINS: { type: 'string', parse: 'origins', default: '', description: 'origins whose pages may call the API from a browser; empty: none' },
    DOCS_PERSIST_AUTHORIZATION: { type: 'boolean', default: false, description: "Swagger UI keeps the token given to Authorize in the browser's localStorage" },
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: { type: 'boolean', default: false, description: 'webhook targets may be loopback, private or link-local addresses' },
    WEBHOOK_RETRY_SCHEDULE: { type: 'string', parse: 'schedule', default: '5s,5m,30m,2h,5h,10h,14h,20h,24h', description: 'delays between delivery attempts' },
    WEBHOOK_TIMEOUT: { type: 'string', parse: 'duration', default: '10s', description: 'the time limit of one delivery attempt' },
    WEBHOOK_RETENTION: { type: 'string', parse: 'duration', default: '1h', description: 'how long delivered deliveries stay listed before they are pruned' },
    // Bounded so that the limit stays a 32-bit integer, as the statement that checks it casts it.
    WEBHOOK_SUBSCRIPTIONS_MAX: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 100, description: 'the most subscriptions the store holds; past it, 409' },
    REQUEST_TIMEOUT: { type: 'string', parse: 'duration', default: '30s', description: 'a whole request, headers and body, must arrive within this' },
    HEADERS_TIMEOUT: { type: 'string', parse: 'duration', default: '10s', description: 'the headers must arrive within this: cuts off slow-loris clients' },
    KEEP_ALIVE_TIMEOUT: { type: 'string', parse: 'duration', default: '65s', description: 'an idle keep-alive connection is closed after this' },
    SHUTDOWN_DELAY: { type: 'string', parse: 'duration', default: '5s', description: 'on SIGTERM, how long readiness fails while serving goes on' },
    SHUTDOWN_TIMEOUT: { type: 'string', parse: 'duration', default: '10s', description: 'a stop not finished by then (after SHUTDOWN_DELAY) exits 1' },
    REDIS_TIMEOUT: { type: 'string', parse: 'duration', default: '100ms', description: 'the longest a request waits for Redis; then it is served unlimited' },
    COMPRESSION_CONCURRENCY: { type: 'integer', minimum: 0, maximum: 1000, default: 4, description: 'answers over 64 KiB compressed at once; 0: none' },
    MAX_CONNECTIONS: { type: 'integer', minimum: 2, default: 1000, description: 'open connections; past it the one idle the longest is closed' },
    PAGE_READS_AT_ONCE: { type: 'integer', minimum: 0, maximum: 1000, default: 4, description: 'list reads worked on at once; 0: no turns' },
    // A waiting read holds only its request: unset, the queue holds what the connection limit already admits.
    PAGE_READS_QUEUED: { type: 'integer', minimum: 1, description: 'list reads that may wait for a turn; past it, 503; unset: MAX_CONNECTIONS' },
    MAX_EVENT_LOOP_DELAY: { type: 'string', parse: 'duration', default: '500ms', description: 'mean event-loop delay past which requests get 503; 0s: not checked' },
    MAX_HEAP_USED_PERCENT: { type: 'integer', minimum: 0, maximum: 100, default: 90, description: "heap used, in percent of V8's limit, past which requests get 503" },
    OTEL_SDK_DISABLED: { type: 'boolean', default: false, description: 'true: no traces, whatever the endpoint' },
    OTEL_EXPORTER_OTLP_ENDPOINT: { type: 'string', parse: 'httpUrl', description: 'the OTLP collector; set (or the next), traces are on' },
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: { type: 'string', parse: 'httpUrl', description: 'the full traces URL, instead of the base above' },
    // The SDK reads these itself; declared so that a value it would only warn about stops the start.
    OTEL_EXPORTER_OTLP_PROTOCOL: { type: 'string', enum: ['http/json'], default: 'http/json', description: 'spans are sent as OTLP/HTTP JSON' },
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: { type: 'string', enum: ['http/json'], default: 'http/json', description: 'spans are sent as OTLP/HTTP JSON' },
    OTEL_TRACES_SAMPLER: { type: 'string', enum: TRACES_SAMPLERS, default: 'parentbased_always_on', description: 'which traces are sampled' },
    OTEL_TRACES_SAMPLER_ARG: { type: 'number', minimum: 0, maximum: 1, default: 1, description: 'the ratio of the traceidratio samplers' },
  },
} as const satisfies ExtendedJSONSchema<{ parse: Parser }>;

// Replaces the text with what its parser reads, as env-schema's own `separator` keyword does for lists.
const parseKeyword: KeywordDefinition = {
  keyword: 'parse',
  type: 'string',
  modifying: true,
  errors: false,
  compile: (parser: Parser) => (text: string, place) => {
    const value = PARSERS[parser].read(text);
    if (value !== undefined && place) place.parentData[place.parentDataProperty] = value;
    return value !== undefined;
  },
};

type Reads<P extends Parser> = { pattern: { parse: P }; output: NonNullable<ReturnType<(typeof PARSERS)[P]['read']>> };
export type Config = FromExtendedSchema<{ parse: Parser }, typeof ENVIRONMENT, {
  deserialize: [Reads<'duration'>, Reads<'deadline'>, Reads<'schedule'>, Reads<'tokens'>, Reads<'origins'>, Reads<'trustProxy'>];
}>;

// Traces are on once an OTLP endpoint is set, as the OpenTelemetry SDK reads it, unless OTEL_SDK_DISABLED.
export function tracingOf(config: Config) {
  if (config.OTEL_SDK_DISABLED || (config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? config.OTEL_EXPORTER_OTLP_ENDPOINT) === undefined) return undefined;
  return { dbSystem: databaseOf(config.DATABASE_URL) ?? 'sqlite' };
}

/** The database DATABASE_URL names, by its scheme, as OpenTelemetry's db.system spells it; undefined for any other scheme. */
export function databaseOf(databaseUrl: string): 'sqlite' | 'postgresql' | undefined {
  if (databaseUrl.startsWith('sqlite:')) return 'sqlite';
  return /^postgres(ql)?:\/\//.test(databaseUrl) ? 'postgresql' : undefined;
}

export function storeOptions(config: Config) {
  return { poolSize: config.DATABASE_POOL_SIZE, startupTimeoutMs: config.DATABASE_STARTUP_TIMEOUT, queryTimeoutMs: config.DATABASE_QUERY_TIMEOUT };
}

// Ajv options as env-schema's README documents them; test/config.test.ts checks the schema itself, not each start.
const AJV_OPTIONS = { customOptions: { validateSchema: false, keywords: [envSchema.keywords.separator, parseKeyword] } } as unknown as EnvSchemaOpt['ajv'];

/** Reads and validates the environment; throws a ConfigError naming each variable that is wrong and what it takes. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable (RATE_LIMIT_PER_MINUTE=) means "not set", as operators expect from .env files.
  const data = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  try {
    return envSchema<Config>({ schema: ENVIRONMENT, data, env: false, ajv: AJV_OPTIONS });
  } catch (error) {
    const { errors } = error as { errors?: ErrorObject[] };
    if (errors === undefined) throw error;
    throw new ConfigError(`Invalid configuration: ${[...new Set(errors.map((each) => each.instancePath.slice(1)))].map(expected).join('; ')}`);
  }
}

type Declaration = { type?: string; enum?: readonly string[]; parse?: Parser; minimum?: number; maximum?: number; default?: unknown };

// Ajv says "/PORT must be <= 65535"; an operator needs the variable and what it takes, which its declaration says.
function expected(variable: string): string {
  const declared = ENVIRONMENT.properties[variable as keyof typeof ENVIRONMENT.properties] as Declaration;
  const example = declared.default === undefined ? '' : `, e.g. ${variable}=${String(declared.default)}`;
  if (declared.parse) return `${variable} ${PARSERS[declared.parse].takes}`;
  if (declared.enum?.length === 1) return `${variable} must be ${declared.enum[0]}`;
  if (declared.enum) return `${variable} must be one of ${declared.enum.slice(0, -1).join(', ')} or ${declared.enum.at(-1)}`;
  if (declared.type === 'boolean') return `${variable} takes true or false${example}`;
  // Only numbers are left: a plain string cannot be wrong.
  const kind = declared.type === 'integer' ? 'a whole number' : 'a number';
  const { minimum, maximum } = declared;
  const range = minimum === undefined ? '' : maximum === undefined ? ` of at least ${minimum}` : ` from ${minimum} to ${maximum}`;
  return `${variable} takes ${kind}${range}${example}`;
}

// A comma-separated list, spaces trimmed and empty entries ignored; refused if any entry is not valid.
function listOf(valid: (entry: string) => boolean): (list: string) => string[] | undefined {
  return (list) => {
    const entries = list.split(',').map((entry) => entry.trim()).filter(Boolean);
    return entries.every(valid) ? entries : undefined;
  };
}

function parseSchedule(list: string): number[] | undefined {
  const delays = list.split(',').map(parseDuration);
  return delays.every((ms) => ms !== undefined) ? delays : undefined;
}

// Zero would mean no deadline to pg, and past 24.8 days Node's timers fire at once.
function parseDeadline(text: string): number | undefined {
  const ms = parseDuration(text);
  return ms !== undefined && ms >= 1 && ms <= 86_400_000 ? ms : undefined;
}

// Short or space-laden tokens are almost always a paste mistake; refuse them at boot.
const STATIC_TOKEN = /^[\x21-\x7e]{16,}$/;

// proxy-addr (behind Fastify's trustProxy) also knows these names for the private ranges.
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

function parseTrustProxy(text: string): boolean | number | string[] | undefined {
  const value = text.trim();
  if (/^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
  if (/^\d+$/.test(value)) return Number(value);
  const entries = value.split(',').map((entry) => entry.trim());
  return entries.every((entry) => NAMED_RANGES.has(entry) || isAddressOrCidr(entry)) ? entries : undefined;
}

// ipaddr.js, as proxy-addr reads them, but strict dotted quads: not the '10.1' shorthands its plain parser accepts.
function isAddressOrCidr(entry: string): boolean {
  const { IPv4, IPv6 } = ipaddr;
  return IPv4.isValidFourPartDecimal(entry) || IPv4.isValidCIDRFourPartDecimal(entry) || IPv6.isValid(entry) || IPv6.isValidCIDR(entry);
}

// A DNS name or an IP address: WHATWG URLs also take hosts such as *.example.com, no origin a browser sends.
const ORIGIN_HOST = /^([a-z0-9-]+\.)*[a-z0-9-]+$|^\[[0-9a-f:.]+\]$/;

// Origins are matched exactly as browsers serialize them (URL.origin): an entry that never could match is refused.
function isSerializedOrigin(text: string): boolean {
  const url = URL.parse(text);
  return (url?.protocol === 'https:' || url?.protocol === 'http:') && url.origin === text && ORIGIN_HOST.test(url.hostname);
}
