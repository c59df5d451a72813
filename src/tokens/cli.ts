// `npm run token -- create|list|revoke` on the store of DATABASE_URL, which keeps only hashes: create
// prints the token once, as its last line, for scripts to take with `tail -n 1`.
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { parseDuration } from '../duration.ts';
import { TokenNameTakenError, UnstorableTextError, type TokenRepository } from '../store/types.ts';
import { generateToken, hashToken, tokenHint } from './format.ts';
import { ALL_SCOPES, tokenStatus } from './verifier.ts';

export interface CliContext {
  store: TokenRepository;
  /** Scopes the contract's operations require; --scope must name one of them (or *). */
  knownScopes: readonly string[];
  out: (line: string) => void;
  err: (line: string) => void;
}

const USAGE = `Usage:
  npm run token -- create --name NAME [--scope SCOPE]... [--expires 30d]
  npm run token -- list
  npm run token -- revoke NAME|ID

create prints the new token once, as its last line. Without --scope a token gets every scope (*).
--expires takes a duration: 90m, 12h, 30d or 8w.`;

const NAME = /^[A-Za-z][A-Za-z0-9._-]{0,63}$/;

class UsageError extends Error {}

/** Runs one command; answers the process exit code (0 done, 1 refused, 2 usage). */
export async function runTokenCommand(argv: readonly string[], context: CliContext): Promise<number> {
  const [command, ...rest] = argv;
  const commands: Record<string, typeof create> = { create, list, revoke };
  try {
    if (command === undefined || !Object.hasOwn(commands, command)) {
      throw new UsageError(command === undefined ? 'Name a command.' : `Unknown command "${command}".`);
    }
    return await commands[command]!(rest, context);
  } catch (error) {
    // parseArgs refuses what the usage does not allow with codes of its own.
    if (error instanceof UsageError || (error as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS_')) {
      context.err(`${(error as Error).message}\n\n${USAGE}`);
      return 2;
    }
    if (!(error instanceof TokenNameTakenError || error instanceof UnstorableTextError)) throw error;
    context.err(error.message);
    return 1;
  }
}

async function create(args: string[], context: CliContext): Promise<number> {
  const { values, positionals } = parse(args, {
    name: { type: 'string' }, scope: { type: 'string', multiple: true }, expires: { type: 'string' },
  });
  if (positionals.length > 0) throw new UsageError(`create takes only options, not "${positionals.join(' ')}".`);
  const { name, scope = [ALL_SCOPES], expires } = values;
  if (name === undefined || !NAME.test(name)) {
    throw new UsageError('--name is required: a letter, then up to 63 letters, digits, ".", "_" or "-".');
  }
  const unknown = scope.filter((each) => each !== ALL_SCOPES && !context.knownScopes.includes(each));
  if (unknown.length > 0) {
    throw new UsageError(`Unknown scope ${unknown.join(', ')}; the contract knows ${[ALL_SCOPES, ...context.knownScopes].join(', ')}.`);
  }
  const lifetimeMs = expires === undefined ? undefined : parseDuration(expires);
  if (expires !== undefined && !lifetimeMs) {
    throw new UsageError(`--expires takes a duration such as 90m, 12h, 30d or 8w, not "${expires}".`);
  }
  const token = generateToken();
  const record = await context.store.createToken({
    name,
    hash: hashToken(token),
    hint: tokenHint(token),
    scopes: [...new Set(scope)],
    ...(lifetimeMs && { expiresAt: new Date(Date.now() + lifetimeMs).toISOString() }),
  });
  context.out(`Created token ${record.id} "${record.name}"`);
  context.out(`  scopes:  ${record.scopes.includes(ALL_SCOPES) ? '* (every scope)' : record.scopes.join(' ')}`);
  context.out(`  expires: ${record.expiresAt ?? 'never'}`);
  context.out('Store it now: it is shown only this once and cannot be recovered.');
  context.out(token);
  return 0;
}

async function list(args: string[], context: CliContext): Promise<number> {
  if (parse(args, {}).positionals.length > 0) throw new UsageError('list takes no arguments.');
  const now = Date.now();
  const rows = (await context.store.listTokens()).map((token) => [
    String(token.id),
    token.name,
    token.hint,
    token.scopes.join(' '),
    token.createdAt,
    token.lastUsedAt ?? 'never',
    token.expiresAt ?? 'never',
    tokenStatus(token, now),
  ]);
  if (rows.length === 0) {
    context.out('No tokens. Create one with: npm run token -- create --name NAME');
    return 0;
  }
  const table = [['ID', 'NAME', 'TOKEN', 'SCOPES', 'CREATED', 'LAST USED', 'EXPIRES', 'STATUS'], ...rows];
  const widths = table[0]!.map((_, column) => Math.max(...table.map((row) => row[column]!.length)));
  for (const row of table) context.out(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd());
  return 0;
}

async function revoke(args: string[], context: CliContext): Promise<number> {
  const { positionals } = parse(args, {});
  if (positionals.length !== 1) throw new UsageError('revoke takes one token name or id.');
  const record = await context.store.revokeToken(positionals[0]!);
  if (!record) {
    context.err(`No token is named or numbered "${positionals[0]}". See: npm run token -- list`);
    return 1;
  }
  context.out(`Revoked token ${record.id} "${record.name}" (${record.revokedAt}); every instance refuses it within seconds.`);
  return 0;
}

function parse<T extends ParseArgsOptionsConfig>(args: string[], options: T) {
  return parseArgs({ args, options, allowPositionals: true, strict: true });
}
