// What a start loads. A SQLite deployment without Redis or webhooks must not pay at boot for the
// PostgreSQL driver, the Redis client or the webhook HTTP client (together a fifth of the start
// time); each is loaded when its configuration or its first use asks for it. Checked in a fresh
// process, since this test process has loaded everything already.
import t from 'tap';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { REPO_ROOT } from './process.ts';

const OPTIONAL = ['pg', 'ioredis', 'undici'];

/** Builds the app on SQLite in a new process and answers which of OPTIONAL it loaded. */
async function loadedAtBoot(afterBoot = ''): Promise<string[]> {
  const script = `
    import { createRequire } from 'node:module';
    const require = createRequire(process.cwd() + '/');
    const { buildApp } = await import('./src/app.ts');
    const { loadConfig } = await import('./src/config.ts');
    const { openStore } = await import('./src/store/factory.ts');
    const store = await openStore('sqlite::memory:');
    const app = await buildApp({ config: { ...loadConfig({}), logLevel: 'silent' }, store });
    await app.ready();
    ${afterBoot}
    const loaded = (name) => Object.keys(require.cache).some((path) => path.includes('/node_modules/' + name + '/'));
    console.log(JSON.stringify(${JSON.stringify(OPTIONAL)}.filter(loaded)));
    await app.close();
    await store.close();
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: REPO_ROOT });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as string[];
}

t.test('a SQLite start loads neither pg nor ioredis nor undici', async (t) => {
  t.same(await loadedAtBoot(), []);
});

t.test('the check sees a package once something loads it', async (t) => {
  t.same(await loadedAtBoot("await import('pg'); await import('undici');"), ['pg', 'undici']);
});
