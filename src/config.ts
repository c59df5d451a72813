// Environment -> typed, validated configuration. Fails at boot with a message naming the variable.
import { isIP } from 'node:net';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import { parseDuration } from './duration.ts';

export interface Config {
  host: string;
  port: number;
  databaseUrl: string;
  /** Connections each instance keeps to PostgreSQL. */
  databasePoolSize: number;
  /** How long a start keeps retrying an unreachable PostgreSQL before it gives up. */
  databaseStartupMs: number;
  /** The longest any one wait on PostgreSQL may last (a connection, a statement's answer); then 503. */
  databaseQueryMs: number;
  apiTokens: string[];
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Requests per minute per token; undefined: no limit. */
  rateLimitPerMinute?: number;
  /** Shares the rate-limit budget between instances when set. */
  redisUrl?: string;
  /** Failed authentications per minute per address before 429; 0: no limit. */
  authFailuresPerMinute: number;
  /** Fastify's trustProxy: which peers' X-Forwarded-For to believe for the client address. */
  trustProxy: boolean | number | string[];
  /** Origins (scheme://host[:port]) whose pages may call the API from a browser; empty: none. */
  corsOrigins: string[];
  /** Swagger UI at /docs keeps the token given to "Authorize" in the browser's localStorage; off when absent. */
  docsPersistAuthorization?: boolean;
  webhooks: WebhookConfig;
  timeouts: TimeoutConfig;
  limits: LimitsConfig;
  /** OpenTelemetry traces, when an OTLP endpoint is configured; undefined: off, nothing loaded. */
  tracing?: TracingConfig;
}

export const TRACES_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

export interface TracingConfig {
  /** Where spans are POSTed (OTLP/HTTP, JSON), e.g. http://collector:4318/v1/traces. */
  tracesUrl: string;
  serviceName: string;
  sampler: (typeof TRACES_SAMPLERS)[number];
  /** The ratio of the *traceidratio samplers, 0 to 1. */
  samplerRatio: number;
  /** How long finished spans wait to be sent in one batch. */
  batchDelayMs: number;
  /** The database the store spans name (db.system.name). */
  dbSystem: 'sqlite' | 'postgresql';
}

export interface TimeoutConfig {
  /** A whole request, headers and body, must arrive within this. */
  requestMs: number;
  /** The headers must arrive within this: cuts off slow-loris clients. */
  headersMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveMs: number;
  /** On SIGTERM, how long readiness fails while serving goes on, before the stop begins. */
  shutdownDelayMs: number;
  /** A stop that has not finished by then (counted after SHUTDOWN_DELAY) exits 1. */
  shutdownMs: number;
  /** The longest a request waits for Redis (the shared rate limit); then it is served unlimited. */
  redisMs: number;
}

/** What one instance takes on at once, whatever clients do (docs/operations.md, "Limits under load"). */
export interface LimitsConfig {
  /** Answers over 64 KiB compressed at once; past it they are sent uncompressed. 0: none compressed. */
  compressions: number;
  /** Open connections; past it the connection idle the longest is closed to admit the new one. */
  connections: number;
  /** List reads worked on at once; the others wait their turn. 0: no turns. */
  pageReadsAtOnce: number;
  /** List reads that may wait for a turn; past it, 503. */
  pageReadsQueued: number;
  /** Mean event-loop delay (ms) past which requests get 503; 0: not checked. */
  maxEventLoopDelayMs: number;
  /** Heap used, in percent of V8's heap limit, past which requests get 503; 0: not checked. */
  maxHeapUsedPercent: number;
}

export interface WebhookConfig {
  allowPrivateNetworks: boolean;
  /** Delays between delivery attempts, in milliseconds. */
  retryScheduleMs: number[];
  timeoutMs: number;
  /** How long delivered deliveries stay listed before they are pruned. */
  retentionMs: number;
  /** The most subscriptions the store holds; past it, POST /webhooks answers 409. */
  subscriptionsMax: number;
}

interface RawEnv {
  HOST: string;
  PORT: number;
  DATABASE_URL: string;
  DATABASE_POOL_SIZE: number;
  DATABASE_STARTUP_TIMEOUT: string;
  DATABASE_QUERY_TIMEOUT: string;
  API_TOKENS: string;
  LOG_LEVEL: Config['logLevel'];
  RATE_LIMIT_PER_MINUTE?: number;
  REDIS_URL?: string;
  AUTH_FAILURES_PER_MINUTE: number;
  TRUST_PROXY: string;
  CORS_ORIGINS: string;
  DOCS_PERSIST_AUTHORIZATION: boolean;
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: boolean;
  WEBHOOK_RETRY_SCHEDULE: string;
  WEBHOOK_TIMEOUT: string;
  WEBHOOK_RETENTION: string;
  WEBHOOK_SUBSCRIPTIONS_MAX: number;
  REQUEST_TIMEOUT: string;
  HEADERS_TIMEOUT: string;
  KEEP_ALIVE_TIMEOUT: string;
  SHUTDOWN_DELAY: string;
  SHUTDOWN_TIMEOUT: string;
  REDIS_TIMEOUT: string;
  COMPRESSION_CONCURRENCY: number;
  MAX_CONNECTIONS: number;
  PAGE_READS_AT_ONCE: number;
  PAGE_READS_QUEUED: number;
  MAX_EVENT_LOOP_DELAY: string;
  MAX_HEAP_USED_PERCENT: number;
  OTEL_SDK_DISABLED: boolean;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_PROTOCOL?: string;
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?: string;
  OTEL_SERVICE_NAME: string;
  OTEL_TRACES_SAMPLER: string;
  OTEL_TRACES_SAMPLER_ARG?: number;
  OTEL_BSP_SCHEDULE_DELAY: number;
}

const schema = {
  type: 'object',
  // Unknown variables are dropped from the copy that is validated, not refused: the environment holds many.
  additionalProperties: false,
  properties: {
    HOST: { type: 'string', minLength: 1, default: '127.0.0.1' },
    PORT: { type: 'integer', minimum: 0, maximum: 65535, default: 3000 },
    DATABASE_URL: { type: 'string', minLength: 1, default: 'sqlite:./data/plants.db' },
    DATABASE_POOL_SIZE: { type: 'integer', minimum: 1, maximum: 1000, default: 10 },
    DATABASE_STARTUP_TIMEOUT: { type: 'string', default: '20s' },
    DATABASE_QUERY_TIMEOUT: { type: 'string', default: '5s' },
    API_TOKENS: { type: 'string', default: '' },
    LOG_LEVEL: {
      type: 'string',
      enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      default: 'info',
    },
    RATE_LIMIT_PER_MINUTE: { type: 'integer', minimum: 1 },
    REDIS_URL: { type: 'string', pattern: '^rediss?://' },
    AUTH_FAILURES_PER_MINUTE: { type: 'integer', minimum: 0, default: 100 },
    TRUST_PROXY: { type: 'string', default: 'false' },
    CORS_ORIGINS: { type: 'string', default: '' },
    DOCS_PERSIST_AUTHORIZATION: { type: 'boolean', default: false },
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: { type: 'boolean', default: false },
    WEBHOOK_RETRY_SCHEDULE: { type: 'string', default: '5s,5m,30m,2h,5h,10h,14h,20h,24h' },
    WEBHOOK_TIMEOUT: { type: 'string', default: '10s' },
    WEBHOOK_RETENTION: { type: 'string', default: '1h' },
    // Bounded so that the limit stays a 32-bit integer, as the statement that checks it casts it.
    WEBHOOK_SUBSCRIPTIONS_MAX: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 100 },
    REQUEST_TIMEOUT: { type: 'string', default: '30s' },
    HEADERS_TIMEOUT: { type: 'string', default: '10s' },
    KEEP_ALIVE_TIMEOUT: { type: 'string', default: '65s' },
    SHUTDOWN_DELAY: { type: 'string', default: '5s' },
    SHUTDOWN_TIMEOUT: { type: 'string', default: '10s' },
    REDIS_TIMEOUT: { type: 'string', default: '100ms' },
    COMPRESSION_CONCURRENCY: { type: 'integer', minimum: 0, maximum: 1000, default: 4 },
    MAX_CONNECTIONS: { type: 'integer', minimum: 2, default: 1000 },
    PAGE_READS_AT_ONCE: { type: 'integer', minimum: 0, maximum: 1000, default: 4 },
    PAGE_READS_QUEUED: { type: 'integer', minimum: 1, default: 64 },
    MAX_EVENT_LOOP_DELAY: { type: 'string', default: '500ms' },
    MAX_HEAP_USED_PERCENT: { type: 'integer', minimum: 0, maximum: 100, default: 90 },
    OTEL_SDK_DISABLED: { type: 'boolean', default: false },
    OTEL_EXPORTER_OTLP_ENDPOINT: { type: 'string' },
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: { type: 'string' },
    OTEL_EXPORTER_OTLP_PROTOCOL: { type: 'string' },
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: { type: 'string' },
    OTEL_SERVICE_NAME: { type: 'string', minLength: 1, default: 'plant-store' },
    OTEL_TRACES_SAMPLER: { type: 'string', default: 'parentbased_always_on' },
    OTEL_TRACES_SAMPLER_ARG: { type: 'number', minimum: 0, maximum: 1 },
    OTEL_BSP_SCHEDULE_DELAY: { type: 'integer', minimum: 0, default: 5000 },
  },
} as const;

export class ConfigError extends Error {}

// Ajv with env-schema's options (strings coerced to the schema's types, defaults filled in, every
// error reported), used directly so that a start loads no Ajv beyond the one request validation
// needs anyway; the schema above is ours, so it needs no check against a meta-schema.
let validateEnv: ReturnType<Ajv2020['compile']> | undefined;

function validEnv(data: Record<string, string>): RawEnv {
  validateEnv ??= new Ajv2020({
    allErrors: true,
    removeAdditional: true,
    useDefaults: true,
    coerceTypes: true,
    allowUnionTypes: true,
    meta: false,
    validateSchema: false,
  }).compile(schema);
  const env: Record<string, unknown> = { ...data };
  if (!validateEnv(env)) throw new ConfigError(`Invalid configuration: ${explain(validateEnv.errors ?? [])}`);
  return env as unknown as RawEnv;
}

/** Reads and validates the environment; throws ConfigError whose message names what is wrong. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw = validEnv(withoutBlanks(env));
  return {
    host: raw.HOST,
    port: raw.PORT,
    databaseUrl: raw.DATABASE_URL,
    databasePoolSize: raw.DATABASE_POOL_SIZE,
    databaseStartupMs: durations('DATABASE_STARTUP_TIMEOUT', [raw.DATABASE_STARTUP_TIMEOUT])[0]!,
    databaseQueryMs: queryTimeout(raw.DATABASE_QUERY_TIMEOUT),
    apiTokens: parseTokenList(raw.API_TOKENS),
    logLevel: raw.LOG_LEVEL,
    authFailuresPerMinute: raw.AUTH_FAILURES_PER_MINUTE,
    trustProxy: parseTrustProxy(raw.TRUST_PROXY),
    corsOrigins: parseOrigins(raw.CORS_ORIGINS),
    docsPersistAuthorization: raw.DOCS_PERSIST_AUTHORIZATION,
    webhooks: {
      allowPrivateNetworks: raw.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
      retryScheduleMs: durations('WEBHOOK_RETRY_SCHEDULE', raw.WEBHOOK_RETRY_SCHEDULE.split(',')),
      timeoutMs: durations('WEBHOOK_TIMEOUT', [raw.WEBHOOK_TIMEOUT])[0]!,
      retentionMs: durations('WEBHOOK_RETENTION', [raw.WEBHOOK_RETENTION])[0]!,
      subscriptionsMax: raw.WEBHOOK_SUBSCRIPTIONS_MAX,
    },
    timeouts: {
      requestMs: durations('REQUEST_TIMEOUT', [raw.REQUEST_TIMEOUT])[0]!,
      headersMs: durations('HEADERS_TIMEOUT', [raw.HEADERS_TIMEOUT])[0]!,
      keepAliveMs: durations('KEEP_ALIVE_TIMEOUT', [raw.KEEP_ALIVE_TIMEOUT])[0]!,
      shutdownDelayMs: durations('SHUTDOWN_DELAY', [raw.SHUTDOWN_DELAY])[0]!,
      shutdownMs: durations('SHUTDOWN_TIMEOUT', [raw.SHUTDOWN_TIMEOUT])[0]!,
      redisMs: durations('REDIS_TIMEOUT', [raw.REDIS_TIMEOUT])[0]!,
    },
    limits: {
      compressions: raw.COMPRESSION_CONCURRENCY,
      connections: raw.MAX_CONNECTIONS,
      pageReadsAtOnce: raw.PAGE_READS_AT_ONCE,
      pageReadsQueued: raw.PAGE_READS_QUEUED,
      maxEventLoopDelayMs: durations('MAX_EVENT_LOOP_DELAY', [raw.MAX_EVENT_LOOP_DELAY])[0]!,
      maxHeapUsedPercent: raw.MAX_HEAP_USED_PERCENT,
    },
    ...(raw.RATE_LIMIT_PER_MINUTE !== undefined && { rateLimitPerMinute: raw.RATE_LIMIT_PER_MINUTE }),
    ...(raw.REDIS_URL !== undefined && { redisUrl: raw.REDIS_URL }),
    ...tracingConfig(raw),
  };
}

// Off unless an OTLP endpoint is set (and OTEL_SDK_DISABLED is not true), as the OpenTelemetry SDKs do.
function tracingConfig(raw: RawEnv): { tracing?: TracingConfig } {
  const tracesUrl = tracesEndpoint(raw);
  if (raw.OTEL_SDK_DISABLED || tracesUrl === undefined) return {};
  for (const variable of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL'] as const) {
    const protocol = raw[variable];
    if (protocol !== undefined && protocol !== 'http/json') {
      throw new ConfigError(`Invalid configuration: ${variable} must be http/json (spans are sent as OTLP/HTTP JSON), or be left unset`);
    }
  }
  const sampler = TRACES_SAMPLERS.find((name) => name === raw.OTEL_TRACES_SAMPLER);
  if (sampler === undefined) {
    throw new ConfigError(`Invalid configuration: OTEL_TRACES_SAMPLER must be one of ${TRACES_SAMPLERS.join(', ')}`);
  }
  return {
    tracing: {
      tracesUrl,
      serviceName: raw.OTEL_SERVICE_NAME,
      sampler,
      samplerRatio: raw.OTEL_TRACES_SAMPLER_ARG ?? 1,
      batchDelayMs: raw.OTEL_BSP_SCHEDULE_DELAY,
      dbSystem: /^postgres(ql)?:/.test(raw.DATABASE_URL) ? 'postgresql' : 'sqlite',
    },
  };
}

// The signal-specific variable is the whole URL; the general one is a base to which /v1/traces is added (OTLP spec).
function tracesEndpoint(raw: RawEnv): string | undefined {
  if (raw.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined) return httpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', raw.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  if (raw.OTEL_EXPORTER_OTLP_ENDPOINT === undefined) return undefined;
  const base = httpUrl('OTEL_EXPORTER_OTLP_ENDPOINT', raw.OTEL_EXPORTER_OTLP_ENDPOINT);
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

function httpUrl(variable: string, text: string): string {
  const url = URL.parse(text);
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new ConfigError(`Invalid configuration: ${variable} must be an http:// or https:// URL, such as http://localhost:4318`);
  }
  return text;
}

// An empty variable (RATE_LIMIT_PER_MINUTE=) means "not set", as operators expect from .env files.
function withoutBlanks(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== ''));
}

function durations(variable: string, texts: string[]): number[] {
  const values = texts.map(parseDuration);
  if (values.some((value) => value === undefined)) {
    throw new ConfigError(`Invalid configuration: ${variable} takes durations such as 250ms, 5s, 5m, 2h or 1d, comma-separated for a schedule`);
  }
  return values as number[];
}

// Zero would mean no deadline at all to pg, and past 24.8 days Node's timers fire at once.
const MAX_QUERY_TIMEOUT_MS = 86_400_000;

function queryTimeout(text: string): number {
  const value = parseDuration(text);
  if (value === undefined || value === 0 || value > MAX_QUERY_TIMEOUT_MS) {
    throw new ConfigError('Invalid configuration: DATABASE_QUERY_TIMEOUT takes a duration from 1ms to 1d, such as 250ms or 5s');
  }
  return value;
}

// Short or space-laden tokens are almost always a paste mistake; refuse them at boot.
const STATIC_TOKEN = /^[\x21-\x7e]{16,}$/;

function parseTokenList(list: string): string[] {
  const tokens = list.split(',').map((token) => token.trim()).filter(Boolean);
  if (!tokens.every((token) => STATIC_TOKEN.test(token))) {
    throw new ConfigError(
      'Invalid configuration: API_TOKENS must be comma-separated tokens of at least 16 printable characters without spaces',
    );
  }
  return tokens;
}

// proxy-addr (behind Fastify's trustProxy) also knows these names for the private ranges.
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

function parseTrustProxy(text: string): Config['trustProxy'] {
  const value = text.trim();
  if (/^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
  if (/^\d+$/.test(value)) return Number(value);
  const entries = value.split(',').map((entry) => entry.trim());
  if (!entries.every((entry) => NAMED_RANGES.has(entry) || isAddressOrCidr(entry))) {
    throw new ConfigError(
      'Invalid configuration: TRUST_PROXY takes false, true, a hop count, or comma-separated proxy addresses and CIDRs (e.g. 10.0.0.0/8,loopback)',
    );
  }
  return entries;
}

// Strict dotted quads and IPv6 (node:net), not the '10.1' shorthands ipaddr.js also accepts.
function isAddressOrCidr(entry: string): boolean {
  const [address = '', prefix, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

// Browsers send Origin serialized exactly as URL.origin does, and it is matched exactly: an entry
// with a path, a trailing slash, upper case or a default port would never match, so it is refused.
function parseOrigins(list: string): string[] {
  const origins = list.split(',').map((origin) => origin.trim()).filter(Boolean);
  if (!origins.every(isSerializedOrigin)) {
    throw new ConfigError(
      'Invalid configuration: CORS_ORIGINS must be comma-separated origins such as https://app.example.com (scheme, host and port only, no path or trailing slash)',
    );
  }
  return origins;
}

// A DNS name or an IP address: WHATWG URLs also take hosts such as *.example.com, no origin a browser sends.
const ORIGIN_HOST = /^([a-z0-9-]+\.)*[a-z0-9-]+$|^\[[0-9a-f:.]+\]$/;

function isSerializedOrigin(text: string): boolean {
  if (!URL.canParse(text)) return false;
  const url = new URL(text);
  return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === text && ORIGIN_HOST.test(url.hostname);
}

// Ajv reports "/PORT must be <= 65535"; an operator needs the variable's name and what it takes,
// which the schema above already says (a default lives there, so it is the example).
function explain(errors: ErrorObject[]): string {
  const variables = [...new Set(errors.map((error) => error.instancePath.replace(/^\//, '')))];
  return variables.map((variable) => expected(variable, errors.filter((error) => error.instancePath === `/${variable}`))).join('; ');
}

type PropertySchema = { type?: string; enum?: readonly string[]; minimum?: number; maximum?: number; default?: unknown };

function expected(variable: string, errors: ErrorObject[]): string {
  const property = (schema.properties as Record<string, PropertySchema>)[variable];
  const example = property?.default === undefined ? '' : `, e.g. ${variable}=${String(property.default)}`;
  if (property?.enum) return `${variable} must be one of ${property.enum.slice(0, -1).join(', ')} or ${property.enum.at(-1)}`;
  if (property?.type === 'boolean') return `${variable} takes true or false${example}`;
  if (property?.type === 'integer' || property?.type === 'number') return `${variable} takes ${numberRange(property)}${example}`;
  return errors.map((error) => `${variable} ${error.message}`).join(', ');
}

function numberRange({ type, minimum, maximum }: PropertySchema): string {
  const kind = type === 'integer' ? 'a whole number' : 'a number';
  if (minimum !== undefined && maximum !== undefined) return `${kind} from ${minimum} to ${maximum}`;
  if (minimum !== undefined) return `${kind} of at least ${minimum}`;
  return maximum === undefined ? kind : `${kind} of at most ${maximum}`;
}
