// npm run token -- create|list|revoke: manage API tokens in the store named by DATABASE_URL.
import { loadConfig, storeOptions } from '../src/config.ts';
import { readSpecification } from '../src/spec-path.ts';
import { openStore } from '../src/store/factory.ts';
import { deriveOperationFacts } from '../src/contract/operation-facts.ts';
import { runTokenCommand } from '../src/tokens/cli.ts';

try {
  const config = loadConfig();
  const store = await openStore(config.databaseUrl, storeOptions(config));
  try {
    // The scopes the operations' security requirements name: --scope must be one of them (or *).
    const requirements = [...deriveOperationFacts(readSpecification()).values()].flatMap((facts) => facts.security);
    const knownScopes = [...new Set(requirements.flatMap((requirement) => Object.values(requirement).flat()))].sort();
    process.exitCode = await runTokenCommand(process.argv.slice(2), {
      store: store.tokens,
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
