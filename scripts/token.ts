// npm run token -- create|list|revoke: manage API tokens in the store named by DATABASE_URL.
import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../src/config.ts';
import { SPEC_PATH } from '../src/spec-path.ts';
import { openStore } from '../src/store/factory.ts';
import { runTokenCommand } from '../src/tokens/cli.ts';
import { scopesInSpec } from '../src/tokens/scopes.ts';

try {
  const config = loadConfig();
  const store = await openStore(config.databaseUrl);
  try {
    const knownScopes = scopesInSpec(parseYaml(await readFile(SPEC_PATH, 'utf8')));
    process.exitCode = await runTokenCommand(process.argv.slice(2), {
      store,
      knownScopes,
      out: (line) => process.stdout.write(`${line}\n`),
      err: (line) => process.stderr.write(`${line}\n`),
    });
  } finally {
    await store.close();
  }
} catch (error) {
  // An operator's command: one line saying what failed (configuration, a locked or unreachable store).
  process.stderr.write(`token: ${(error as Error)?.message ?? String(error)}\n`);
  process.exitCode = 1;
}
