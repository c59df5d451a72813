// What a start loads. A SQLite deployment without Redis, webhooks or tracing must not pay at boot
// for the PostgreSQL driver, the Redis client, the webhook HTTP client (together a fifth of the
// start time) or OpenTelemetry; each is loaded when its configuration or its first use asks for
// it. Checked in a fresh process, since this test process has loaded everything already; both
// require() and import are seen (module.registerHooks), since OpenTelemetry loads as ES modules.
import t from 'tap';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../harness/paths.ts';

// prom-client (/metrics) loads @opentelemetry/api, the no-op API, itself; tracing adds the rest.
const TRACING = ['@opentelemetry/sdk-node', '@opentelemetry/sdk-trace', '@opentelemetry/exporter-trace-otlp-http', '@opentelemetry/context-async-hooks', '@opentelemetry/core', '@fastify/otel'];
const OPTIONAL = ['pg', 'ioredis', 'undici', ...TRACING];

/** Builds the app on SQLite in a new process, configured by `env`, and answers which of OPTIONAL it loaded. */
async function loadedAtBoot(afterBoot = '', env: Record<string, string> = {}): Promise<string[]> {
  const script = `
    import { createRequire, registerHooks } from 'node:module';
    const require = createRequire(process.cwd() + '/');
    const resolved = new Set();
    registerHooks({ resolve: (specifier, context, next) => { const result = next(specifier, context); resolved.add(result.url); return result; } });
    const { buildApp } = await import('./src/app.ts');
    const { loadConfig } = await import('./src/config.ts');
    const { openStore } = await import('./src/store/factory.ts');
    const store = await openStore('sqlite::memory:');
    const app = await buildApp({ config: { ...loadConfig(${JSON.stringify(env)}), logLevel: 'silent' }, store });
    await app.ready();
    ${afterBoot}
    const paths = [...Object.keys(require.cache), ...resolved];
    const loaded = (name) => paths.some((path) => path.includes('/node_modules/' + name + '/'));
    console.log(JSON.stringify(${JSON.stringify(OPTIONAL)}.filter(loaded)));
    await app.close();
    await store.close();
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: REPO_ROOT });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as string[];
}

t.test('a SQLite start loads neither pg nor ioredis nor undici nor OpenTelemetry', async (t) => {
  t.same(await loadedAtBoot(), []);
});

t.test('the check sees a package once something loads it', async (t) => {
  t.same(await loadedAtBoot("await import('pg'); await import('undici'); await import('@opentelemetry/core');"), ['pg', 'undici', '@opentelemetry/core']);
});

t.test('OpenTelemetry loads when an OTLP endpoint is configured, and not when OTEL_SDK_DISABLED says so', async (t) => {
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' };
  t.same(await loadedAtBoot('', endpoint), TRACING);
  t.same(await loadedAtBoot('', { ...endpoint, OTEL_SDK_DISABLED: 'true' }), []);
});
