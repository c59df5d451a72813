// `npm run store -- backup|copy`: progress while it runs (a bar on a terminal, a line every few seconds in logs), then the verification table.
import { parseArgs } from 'node:util';
import { backupStore, copyStore, matches, StoreCommandError, type Progress, type TableCheck } from './copy.ts';

export interface StoreCliContext {
  /** DATABASE_URL: the store a backup reads. */
  databaseUrl: string;
  out: (line: string) => void;
  err: (line: string) => void;
  /** Rewrites the one status line of a terminal; absent when the output is a log. */
  status?: (text: string) => void;
}

const USAGE = `Usage:
  npm run store -- backup FILE           a snapshot of DATABASE_URL's store into the new SQLite file FILE
  npm run store -- copy FROM-URL TO-URL  the whole store into a new or empty one (sqlite:<path> or postgres://…)`;

/** How often a log gets a progress line. */
const LOG_EVERY_MS = 5_000;
const BAR_WIDTH = 30;

/** Runs one command; answers the process exit code (0 done, 1 refused or different, 2 usage). */
export async function runStoreCommand(argv: readonly string[], context: StoreCliContext): Promise<number> {
  let positionals: string[];
  try {
    positionals = parseArgs({ args: [...argv], allowPositionals: true, strict: true }).positionals;
  } catch (error) {
    context.err(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const [command, ...args] = positionals;
  const arity: Record<string, number> = { backup: 1, copy: 2 };
  if (command === undefined || !Object.hasOwn(arity, command) || args.length !== arity[command]) {
    context.err(`${command === undefined ? 'Name a command.' : `${command}: wrong command or arguments.`}\n\n${USAGE}`);
    return 2;
  }
  const progress = reporter(context);
  const started = performance.now();
  try {
    const checks = command === 'copy' ? await copyStore(args[0]!, args[1]!, progress) : await backupStore(context.databaseUrl, args[0]!, progress);
    context.status?.('');
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    if (!checks) {
      context.out(`Backed up the store into ${args[0]} in ${seconds} s.`);
      return 0;
    }
    printTable(checks, context);
    if (!checks.every(matches)) {
      context.err(`The target differs from the source (tables: ${checks.filter((check) => !matches(check)).map((check) => check.table).join(', ')}); nothing was committed.`);
      return 1;
    }
    context.out(`${command === 'copy' ? 'Copied' : 'Backed up'} ${checks.reduce((sum, check) => sum + check.rows[0], 0)} rows in ${seconds} s; every table matches.`);
    return 0;
  } catch (error) {
    context.status?.('');
    // One line: StoreCommandError says what to fix; anything else is the database's own message, first line only (never a URL or a stack).
    const message = (error as Error)?.message ?? String(error);
    context.err(error instanceof StoreCommandError ? message : `${command} failed: ${message.split('\n')[0]}`);
    return 1;
  }
}

/** Rows done, rate and time left: on the terminal's status line at every batch, in a log every LOG_EVERY_MS and at each phase's end. */
function reporter(context: StoreCliContext): (progress: Progress) => void {
  let phaseStarted = performance.now();
  let phase: Progress['phase'] = 'copy';
  let [logged, previous] = [phaseStarted, phaseStarted];
  return ({ phase: now, done, total }) => {
    const at = performance.now();
    // A phase starts where the last one's last batch ended.
    if (now !== phase) [phase, phaseStarted, logged] = [now, previous, previous];
    previous = at;
    const rate = done / Math.max((at - phaseStarted) / 1000, 0.001);
    const line = `${phase === 'copy' ? 'copying  ' : 'verifying'} ${done}/${total} rows, ${Math.round(rate)} rows/s, ${Math.ceil((total - done) / rate)} s left`;
    if (context.status) {
      const filled = Math.round((BAR_WIDTH * done) / Math.max(total, 1));
      context.status(`[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${line}`);
    } else if (at - logged >= LOG_EVERY_MS || done === total) {
      logged = at;
      context.out(line);
    }
  };
}

function printTable(checks: TableCheck[], { out }: StoreCliContext): void {
  const rows = checks.map((check) => [check.table, ...check.rows.map(String), ...check.sha256.map((sum) => sum.slice(0, 16)), matches(check) ? 'ok' : 'DIFFERS']);
  const table = [['TABLE', 'SOURCE ROWS', 'TARGET ROWS', 'SOURCE SHA-256', 'TARGET SHA-256', ''], ...rows];
  const widths = table[0]!.map((_, column) => Math.max(...table.map((row) => row[column]!.length)));
  for (const row of table) out(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd());
}
