import t from 'tap';
import { Ajv } from 'ajv';
import { ConfigError, ENVIRONMENT, loadConfig, tracingOf } from '../src/config.ts';

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
    HOST: '127.0.0.1',
    PORT: 3000,
    DATABASE_URL: 'sqlite:./data/plants.db',
    DATABASE_POOL_SIZE: 10,
    DATABASE_STARTUP_TIMEOUT: 20_000,
    DATABASE_QUERY_TIMEOUT: 5_000,
    API_TOKENS: [],
    LOG_LEVEL: 'info',
    AUTH_FAILURES_PER_MINUTE: 100,
    TRUST_PROXY: false,
    CORS_ORIGINS: [],
    DOCS_PERSIST_AUTHORIZATION: false,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: false,
    WEBHOOK_RETRY_SCHEDULE: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000],
    WEBHOOK_TIMEOUT: 10_000,
    WEBHOOK_RETENTION: 3_600_000,
    WEBHOOK_SUBSCRIPTIONS_MAX: 100,
    REQUEST_TIMEOUT: 30_000,
    HEADERS_TIMEOUT: 10_000,
    KEEP_ALIVE_TIMEOUT: 65_000,
    SHUTDOWN_DELAY: 5_000,
    SHUTDOWN_TIMEOUT: 10_000,
    REDIS_TIMEOUT: 100,
    COMPRESSION_CONCURRENCY: 4,
    MAX_CONNECTIONS: 1000,
    PAGE_READS_AT_ONCE: 4,
    PAGE_READS_QUEUED: 64,
    MAX_EVENT_LOOP_DELAY: 500,
    MAX_HEAP_USED_PERCENT: 90,
    OTEL_SDK_DISABLED: false,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
    OTEL_TRACES_SAMPLER: 'parentbased_always_on',
    OTEL_TRACES_SAMPLER_ARG: 1,
  });
  t.equal(loadConfig({ PATH: '/usr/bin', HOME: '/home/someone' }).PORT, 3000, 'unrelated variables are ignored');
});

// loadConfig skips Ajv's check of the schema itself at every start; this is where it is made.
t.test('the environment schema is a valid JSON Schema', async (t) => {
  const ajv = new Ajv();
  t.ok(ajv.validateSchema(ENVIRONMENT), ajv.errorsText(ajv.errors));
  const broken = { ...ENVIRONMENT, properties: { ...ENVIRONMENT.properties, PORT: { ...ENVIRONMENT.properties.PORT, type: 'integr' } } };
  t.notOk(ajv.validateSchema(broken), 'a mistyped declaration is caught');
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
      HOST: '0.0.0.0',
      PORT: 8080,
      DATABASE_URL: 'sqlite:/var/lib/plants/plants.db',
      DATABASE_POOL_SIZE: 25,
      DATABASE_STARTUP_TIMEOUT: 90_000,
      DATABASE_QUERY_TIMEOUT: 750,
      API_TOKENS: ['token-aaaaaaaaaaaaaaaa'],
      LOG_LEVEL: 'debug',
      RATE_LIMIT_PER_MINUTE: 600,
      REDIS_URL: 'redis://127.0.0.1:6379',
      AUTH_FAILURES_PER_MINUTE: 0,
      TRUST_PROXY: ['10.0.0.0/8'],
      CORS_ORIGINS: ['https://app.example.com', 'http://localhost:5173'],
      DOCS_PERSIST_AUTHORIZATION: true,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: true,
      WEBHOOK_RETRY_SCHEDULE: [250, 2_000, 60_000],
      WEBHOOK_TIMEOUT: 3_000,
      WEBHOOK_RETENTION: 0,
      WEBHOOK_SUBSCRIPTIONS_MAX: 250,
      REQUEST_TIMEOUT: 20_000,
      HEADERS_TIMEOUT: 5_000,
      KEEP_ALIVE_TIMEOUT: 75_000,
      SHUTDOWN_DELAY: 0,
      SHUTDOWN_TIMEOUT: 30_000,
      REDIS_TIMEOUT: 250,
      COMPRESSION_CONCURRENCY: 2,
      MAX_CONNECTIONS: 50,
      PAGE_READS_AT_ONCE: 2,
      PAGE_READS_QUEUED: 8,
      MAX_EVENT_LOOP_DELAY: 1000,
      MAX_HEAP_USED_PERCENT: 80,
      OTEL_SDK_DISABLED: false,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: 'parentbased_always_on',
      OTEL_TRACES_SAMPLER_ARG: 1,
    },
  );
  t.equal(loadConfig({ RATE_LIMIT_PER_MINUTE: '' }).RATE_LIMIT_PER_MINUTE, undefined, 'an empty variable is unset');
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
    t.equal(typeof config.PORT, 'number', `PORT=${value} is a number`);
    t.equal(config.PORT, port, `PORT=${value}`);
  }
});

t.test('API_TOKENS is a comma list: spaces trimmed, empty entries ignored', async (t) => {
  t.same(loadConfig({ API_TOKENS: 'token-aaaaaaaaaaaaaaaa,token-bbbbbbbbbbbbbbbb' }).API_TOKENS, [
    'token-aaaaaaaaaaaaaaaa',
    'token-bbbbbbbbbbbbbbbb',
  ]);
  t.same(loadConfig({ API_TOKENS: '  token-aaaaaaaaaaaaaaaa , ,token-bbbbbbbbbbbbbbbb,  ,' }).API_TOKENS, [
    'token-aaaaaaaaaaaaaaaa',
    'token-bbbbbbbbbbbbbbbb',
  ]);
  t.same(loadConfig({ API_TOKENS: '' }).API_TOKENS, [], 'empty');
  t.same(loadConfig({ API_TOKENS: ' , ,' }).API_TOKENS, [], 'only separators and spaces');
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
  for (const [value, expected] of cases) t.same(loadConfig({ TRUST_PROXY: value }).TRUST_PROXY, expected, `TRUST_PROXY=${value}`);
  t.equal(loadConfig({ TRUST_PROXY: '' }).TRUST_PROXY, false, 'empty is the default, false');
  for (const value of ['yes', '-1', '1.5', '10.0.0.0/33', '10.0.0.256', 'proxy.internal', '10.0.0.1,,', '10.0.0.1;10.0.0.2']) {
    const { message } = configError({ TRUST_PROXY: value });
    t.match(message, /^Invalid configuration: TRUST_PROXY takes /, `TRUST_PROXY=${value}: ${message}`);
    t.notMatch(message, /\n/, 'one line');
  }
});

t.test('CORS_ORIGINS takes exact origins, as browsers send them in Origin', async (t) => {
  t.same(loadConfig({ CORS_ORIGINS: 'https://app.example.com' }).CORS_ORIGINS, ['https://app.example.com']);
  t.same(loadConfig({ CORS_ORIGINS: ' https://app.example.com , http://localhost:5173,http://127.0.0.1:8080 ' }).CORS_ORIGINS, [
    'https://app.example.com',
    'http://localhost:5173',
    'http://127.0.0.1:8080',
  ]);
  t.same(loadConfig({ CORS_ORIGINS: 'http://[::1]:3000,https://xn--bcher-kva.example' }).CORS_ORIGINS, ['http://[::1]:3000', 'https://xn--bcher-kva.example']);
  t.same(loadConfig({ CORS_ORIGINS: '' }).CORS_ORIGINS, [], 'empty is the default: no cross-origin access');
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
  t.equal(tracingOf(loadConfig({})), undefined, 'off by default');
  t.equal(tracingOf(loadConfig({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' })), undefined, 'no endpoint, no tracing');
  // The SDK reads the rest of OTEL_* itself (otel.test.ts): the service keeps only what its spans name.
  t.same(tracingOf(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })), { dbSystem: 'sqlite' });
  t.same(
    tracingOf(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://tempo.example/otlp/v1/traces', DATABASE_URL: 'postgres://u@db/plants' })),
    { dbSystem: 'postgresql' },
    'the traces endpoint alone turns tracing on',
  );
  t.equal(tracingOf(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })), undefined, 'disabled');
});

t.test('OpenTelemetry variables are validated, each error one line naming the variable', async (t) => {
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
  const cases: [Record<string, string>, RegExp][] = [
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL/],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' }, /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:\/\/ or https:\/\/ URL/],
    [{ ...endpoint, OTEL_TRACES_SAMPLER: 'sometimes' }, /OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio/],
    [{ ...endpoint, OTEL_TRACES_SAMPLER_ARG: '2' }, /OTEL_TRACES_SAMPLER_ARG takes a number from 0 to 1, e.g. OTEL_TRACES_SAMPLER_ARG=1$/],
    [{ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /OTEL_EXPORTER_OTLP_PROTOCOL must be http\/json/],
    [{ ...endpoint, OTEL_SDK_DISABLED: 'perhaps' }, /OTEL_SDK_DISABLED takes true or false, e.g. OTEL_SDK_DISABLED=false$/],
  ];
  for (const [env, expected] of cases) {
    const { message } = configError(env);
    t.match(message, expected, JSON.stringify(env));
    t.notMatch(message, /\n/, 'one line');
  }
});
