// npm run store -- backup|copy: back up the store named by DATABASE_URL, or copy a whole store into a new one.
import { loadConfig } from '../src/config.ts';
import { runStoreCommand } from '../src/store/cli.ts';

try {
  process.exitCode = await runStoreCommand(process.argv.slice(2), {
    databaseUrl: loadConfig().DATABASE_URL,
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
    // On a terminal, progress rewrites one line of stderr; in a log it comes as plain lines on stdout.
    ...(process.stderr.isTTY && { status: (text: string) => process.stderr.write(`\r${text}\u001b[K`) }),
  });
} catch (error) {
  // The configuration (DATABASE_URL and the rest) in one line.
  process.stderr.write(`store: ${(error as Error)?.message ?? String(error)}\n`);
  process.exitCode = 1;
}
