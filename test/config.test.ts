import t from 'tap';
import { ConfigError, loadConfig } from '../src/config.ts';

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

t.test('defaults when nothing is set', async (t) => {
  t.same(loadConfig({}), {
    host: '127.0.0.1',
    port: 3000,
    databaseUrl: 'sqlite:./data/plants.db',
    databasePoolSize: 10,
    databaseStartupMs: 20_000,
    databaseQueryMs: 5_000,
    apiTokens: [],
    logLevel: 'info',
    authFailuresPerMinute: 100,
    trustProxy: false,
    corsOrigins: [],
    docsPersistAuthorization: false,
    webhooks: {
      allowPrivateNetworks: false,
      retryScheduleMs: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000],
      timeoutMs: 10_000,
      retentionMs: 3_600_000,
      subscriptionsMax: 100,
    },
    timeouts: { requestMs: 30_000, headersMs: 10_000, keepAliveMs: 65_000, shutdownDelayMs: 5_000, shutdownMs: 10_000, redisMs: 100 },
    limits: { compressions: 4, connections: 1000, pageReadsAtOnce: 4, pageReadsQueued: 64, maxEventLoopDelayMs: 500, maxHeapUsedPercent: 90 },
  });
  t.equal(loadConfig({ PATH: '/usr/bin', HOME: '/home/someone' }).port, 3000, 'unrelated variables are ignored');
});

t.test('each variable is read', async (t) => {
  t.same(
    loadConfig({
      HOST: '0.0.0.0',
      PORT: '8080',
      DATABASE_URL: 'sqlite:/var/lib/plants/plants.db',
      DATABASE_POOL_SIZE: '25',
      DATABASE_STARTUP_TIMEOUT: '90s',
      DATABASE_QUERY_TIMEOUT: '750ms',
      API_TOKENS: 'token-aaaaaaaaaaaaaaaa',
      LOG_LEVEL: 'debug',
      RATE_LIMIT_PER_MINUTE: '600',
      REDIS_URL: 'redis://127.0.0.1:6379',
      AUTH_FAILURES_PER_MINUTE: '0',
      TRUST_PROXY: '10.0.0.0/8',
      CORS_ORIGINS: 'https://app.example.com,http://localhost:5173',
      DOCS_PERSIST_AUTHORIZATION: 'true',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_RETRY_SCHEDULE: '250ms,2s,1m',
      WEBHOOK_TIMEOUT: '3s',
      WEBHOOK_RETENTION: '0s',
      WEBHOOK_SUBSCRIPTIONS_MAX: '250',
      REQUEST_TIMEOUT: '20s',
      HEADERS_TIMEOUT: '5s',
      KEEP_ALIVE_TIMEOUT: '75s',
      SHUTDOWN_DELAY: '0s',
      SHUTDOWN_TIMEOUT: '30s',
      REDIS_TIMEOUT: '250ms',
      COMPRESSION_CONCURRENCY: '2',
      MAX_CONNECTIONS: '50',
      PAGE_READS_AT_ONCE: '2',
      PAGE_READS_QUEUED: '8',
      MAX_EVENT_LOOP_DELAY: '1s',
      MAX_HEAP_USED_PERCENT: '80',
    }),
    {
      host: '0.0.0.0',
      port: 8080,
      databaseUrl: 'sqlite:/var/lib/plants/plants.db',
      databasePoolSize: 25,
      databaseStartupMs: 90_000,
      databaseQueryMs: 750,
      apiTokens: ['token-aaaaaaaaaaaaaaaa'],
      logLevel: 'debug',
      rateLimitPerMinute: 600,
      redisUrl: 'redis://127.0.0.1:6379',
      authFailuresPerMinute: 0,
      trustProxy: ['10.0.0.0/8'],
      corsOrigins: ['https://app.example.com', 'http://localhost:5173'],
      docsPersistAuthorization: true,
      webhooks: { allowPrivateNetworks: true, retryScheduleMs: [250, 2_000, 60_000], timeoutMs: 3_000, retentionMs: 0, subscriptionsMax: 250 },
      timeouts: { requestMs: 20_000, headersMs: 5_000, keepAliveMs: 75_000, shutdownDelayMs: 0, shutdownMs: 30_000, redisMs: 250 },
      limits: { compressions: 2, connections: 50, pageReadsAtOnce: 2, pageReadsQueued: 8, maxEventLoopDelayMs: 1000, maxHeapUsedPercent: 80 },
    },
  );
  t.equal(loadConfig({ RATE_LIMIT_PER_MINUTE: '' }).rateLimitPerMinute, undefined, 'an empty variable is unset');
});

t.test('rate-limit variables are validated', async (t) => {
  for (const [env, variable] of [
    [{ RATE_LIMIT_PER_MINUTE: '0' }, 'RATE_LIMIT_PER_MINUTE'],
    [{ RATE_LIMIT_PER_MINUTE: 'many' }, 'RATE_LIMIT_PER_MINUTE'],
    [{ REDIS_URL: 'localhost:6379' }, 'REDIS_URL'],
    [{ AUTH_FAILURES_PER_MINUTE: '-1' }, 'AUTH_FAILURES_PER_MINUTE'],
    [{ WEBHOOK_RETRY_SCHEDULE: '5s,soon' }, 'WEBHOOK_RETRY_SCHEDULE'],
    [{ WEBHOOK_TIMEOUT: '10' }, 'WEBHOOK_TIMEOUT'],
    [{ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'maybe' }, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'],
    [{ WEBHOOK_SUBSCRIPTIONS_MAX: '0' }, 'WEBHOOK_SUBSCRIPTIONS_MAX'],
    [{ WEBHOOK_SUBSCRIPTIONS_MAX: 'lots' }, 'WEBHOOK_SUBSCRIPTIONS_MAX'],
    [{ WEBHOOK_SUBSCRIPTIONS_MAX: '1000001' }, 'WEBHOOK_SUBSCRIPTIONS_MAX'],
    [{ SHUTDOWN_TIMEOUT: 'later' }, 'SHUTDOWN_TIMEOUT'],
    [{ SHUTDOWN_DELAY: '5' }, 'SHUTDOWN_DELAY'],
    [{ HEADERS_TIMEOUT: '5' }, 'HEADERS_TIMEOUT'],
    [{ REDIS_TIMEOUT: 'soon' }, 'REDIS_TIMEOUT'],
    [{ DATABASE_STARTUP_TIMEOUT: '20' }, 'DATABASE_STARTUP_TIMEOUT'],
    [{ DATABASE_QUERY_TIMEOUT: '5' }, 'DATABASE_QUERY_TIMEOUT'],
    [{ DATABASE_QUERY_TIMEOUT: '0s' }, 'DATABASE_QUERY_TIMEOUT'],
    [{ DATABASE_QUERY_TIMEOUT: '30d' }, 'DATABASE_QUERY_TIMEOUT'],
  ] as const) {
    t.throws(() => loadConfig(env), { name: 'Error', message: new RegExp(variable) }, JSON.stringify(env));
  }
});

t.test('PORT is parsed into a number within 0..65535', async (t) => {
  for (const [value, port] of [['8080', 8080], ['0', 0], ['65535', 65535]] as const) {
    const config = loadConfig({ PORT: value });
    t.equal(typeof config.port, 'number', `PORT=${value} is a number`);
    t.equal(config.port, port, `PORT=${value}`);
  }
});

t.test('API_TOKENS is a comma list: spaces trimmed, empty entries ignored', async (t) => {
  t.same(loadConfig({ API_TOKENS: 'token-aaaaaaaaaaaaaaaa,token-bbbbbbbbbbbbbbbb' }).apiTokens, [
    'token-aaaaaaaaaaaaaaaa',
    'token-bbbbbbbbbbbbbbbb',
  ]);
  t.same(loadConfig({ API_TOKENS: '  token-aaaaaaaaaaaaaaaa , ,token-bbbbbbbbbbbbbbbb,  ,' }).apiTokens, [
    'token-aaaaaaaaaaaaaaaa',
    'token-bbbbbbbbbbbbbbbb',
  ]);
  t.same(loadConfig({ API_TOKENS: '' }).apiTokens, [], 'empty');
  t.same(loadConfig({ API_TOKENS: ' , ,' }).apiTokens, [], 'only separators and spaces');
});

t.test('each bad value is a ConfigError naming its variable', async (t) => {
  const cases: [Record<string, string>, string][] = [
    [{ PORT: 'abc' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ PORT: '-1' }, 'PORT'],
    [{ PORT: '80.5' }, 'PORT'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ API_TOKENS: 'short' }, 'API_TOKENS'],
    [{ API_TOKENS: 'token-aaaaaaaaaaaaaaaa,sh0rtT0k' }, 'API_TOKENS'],
    [{ API_TOKENS: 'token with spaces inside it' }, 'API_TOKENS'],
  ];
  for (const [env, variable] of cases) {
    const { message } = configError(env);
    t.match(message, new RegExp(`\\b${variable}\\b`), `${JSON.stringify(env)}: ${message}`);
  }
});

t.test('a bad PORT says what PORT takes, with an example', async (t) => {
  for (const value of ['abc', '70000', '-1', '80.5']) {
    t.equal(configError({ PORT: value }).message, 'Invalid configuration: PORT takes a whole number from 0 to 65535, e.g. PORT=3000', `PORT=${value}`);
  }
  t.equal(
    configError({ PORT: 'abc', DOCS_PERSIST_AUTHORIZATION: 'maybe' }).message,
    'Invalid configuration: PORT takes a whole number from 0 to 65535, e.g. PORT=3000; DOCS_PERSIST_AUTHORIZATION takes true or false, e.g. DOCS_PERSIST_AUTHORIZATION=false',
    'each bad variable once, in one line',
  );
});

t.test('every bad variable is named in the one line, whatever reads it', async (t) => {
  const { message } = configError({ PORT: 'abc', TRUST_PROXY: 'yes', WEBHOOK_TIMEOUT: '10', REDIS_URL: 'localhost:6379' });
  t.equal(
    message,
    'Invalid configuration: PORT takes a whole number from 0 to 65535, e.g. PORT=3000; ' +
      'REDIS_URL must be a redis:// or rediss:// URL, such as redis://localhost:6379; ' +
      'TRUST_PROXY takes false, true, a hop count, or comma-separated proxy addresses and CIDRs (e.g. 10.0.0.0/8,loopback); ' +
      'WEBHOOK_TIMEOUT takes a duration such as 250ms, 5s, 5m, 2h or 1d',
  );
});

t.test('LOG_LEVEL names its allowed values', async (t) => {
  t.equal(configError({ LOG_LEVEL: 'loud' }).message, 'Invalid configuration: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace or silent');
});

t.test('a refused API_TOKENS value is not echoed', async (t) => {
  const { message } = configError({ API_TOKENS: 'token-aaaaaaaaaaaaaaaa,sh0rtT0k' });
  t.notOk(message.includes('token-aaaaaaaaaaaaaaaa'), 'the valid token is not in the message');
  t.notOk(message.includes('sh0rtT0k'), 'nor the short one');
});

t.test('TRUST_PROXY: false, true, a hop count, or addresses and CIDRs, as Fastify trustProxy takes them', async (t) => {
  const cases: [string, boolean | number | string[]][] = [
    ['false', false],
    ['FALSE', false],
    ['true', true],
    ['True', true],
    ['1', 1],
    ['2', 2],
    ['10.0.0.1', ['10.0.0.1']],
    [' 10.0.0.0/8 , 192.168.1.7,fd00::/8, loopback ', ['10.0.0.0/8', '192.168.1.7', 'fd00::/8', 'loopback']],
    ['::1,uniquelocal,linklocal', ['::1', 'uniquelocal', 'linklocal']],
  ];
  for (const [value, expected] of cases) t.same(loadConfig({ TRUST_PROXY: value }).trustProxy, expected, `TRUST_PROXY=${value}`);
  t.equal(loadConfig({ TRUST_PROXY: '' }).trustProxy, false, 'empty is the default, false');
  for (const value of ['yes', '-1', '1.5', '10.0.0.0/33', '10.0.0.256', 'proxy.internal', '10.0.0.1,,', '10.0.0.1;10.0.0.2']) {
    const { message } = configError({ TRUST_PROXY: value });
    t.match(message, /^Invalid configuration: TRUST_PROXY takes /, `TRUST_PROXY=${value}: ${message}`);
    t.notMatch(message, /\n/, 'one line');
  }
});

t.test('CORS_ORIGINS takes exact origins, as browsers send them in Origin', async (t) => {
  t.same(loadConfig({ CORS_ORIGINS: 'https://app.example.com' }).corsOrigins, ['https://app.example.com']);
  t.same(loadConfig({ CORS_ORIGINS: ' https://app.example.com , http://localhost:5173,http://127.0.0.1:8080 ' }).corsOrigins, [
    'https://app.example.com',
    'http://localhost:5173',
    'http://127.0.0.1:8080',
  ]);
  t.same(loadConfig({ CORS_ORIGINS: 'http://[::1]:3000,https://xn--bcher-kva.example' }).corsOrigins, ['http://[::1]:3000', 'https://xn--bcher-kva.example']);
  t.same(loadConfig({ CORS_ORIGINS: '' }).corsOrigins, [], 'empty is the default: no cross-origin access');
  const notOrigins = [
    'app.example.com',
    'https://app.example.com/',
    'https://app.example.com/app',
    'https://App.Example.com',
    'https://app.example.com:443',
    'https://*.example.com',
    'https://app_example.com',
    'http://[::1',
    '*',
    'null',
    'ftp://files.example.com',
    'https://app.example.com;https://admin.example.com',
  ];
  for (const value of notOrigins) {
    const { message } = configError({ CORS_ORIGINS: value });
    t.match(message, /^Invalid configuration: CORS_ORIGINS must be comma-separated origins such as https:\/\/app\.example\.com/, `CORS_ORIGINS=${value}: ${message}`);
    t.notMatch(message, /\n/, 'one line');
  }
});

t.test('OpenTelemetry: off unless an OTLP endpoint is set, and OTEL_SDK_DISABLED wins', async (t) => {
  t.equal(loadConfig({}).tracing, undefined, 'off by default');
  t.equal(loadConfig({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }).tracing, undefined, 'no endpoint, no tracing');
  // The SDK reads the rest of OTEL_* itself (otel.test.ts): the service keeps only what its spans name.
  t.same(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing, { dbSystem: 'sqlite' });
  t.same(
    loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://tempo.example/otlp/v1/traces', DATABASE_URL: 'postgres://u@db/plants' }).tracing,
    { dbSystem: 'postgresql' },
    'the traces endpoint alone turns tracing on',
  );
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }).tracing, undefined, 'disabled');
});

t.test('OpenTelemetry variables are validated, each error one line naming the variable', async (t) => {
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
  const cases: [Record<string, string>, RegExp][] = [
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL/],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' }, /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:\/\/ or https:\/\/ URL/],
    [{ ...endpoint, OTEL_TRACES_SAMPLER: 'sometimes' }, /OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio/],
    [{ ...endpoint, OTEL_TRACES_SAMPLER_ARG: '2' }, /OTEL_TRACES_SAMPLER_ARG takes a number from 0 to 1$/],
    [{ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /OTEL_EXPORTER_OTLP_PROTOCOL must be http\/json/],
    [{ ...endpoint, OTEL_SDK_DISABLED: 'perhaps' }, /OTEL_SDK_DISABLED takes true or false, e.g. OTEL_SDK_DISABLED=false$/],
  ];
  for (const [env, expected] of cases) {
    const { message } = configError(env);
    t.match(message, expected, JSON.stringify(env));
    t.notMatch(message, /\n/, 'one line');
  }
});
