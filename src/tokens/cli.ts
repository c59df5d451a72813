// The logic of `npm run token -- create|list|revoke`: issue, show and revoke API tokens in the
// store named by DATABASE_URL. Only a token's hash is stored; create prints the token once, as
// its last line, so scripts can take it with `tail -n 1`.
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { TokenNameTakenError, UnstorableTextError, type TokenRepository } from '../store/types.ts';
import { generateToken, hashToken, tokenHint } from './format.ts';
import { ALL_SCOPES } from './scopes.ts';
import { tokenStatus } from './verifier.ts';
import { parseDuration } from '../duration.ts';

export interface CliContext {
  store: TokenRepository;
  /** Scopes the contract's operations require; --scope must name one of them (or *). */
  knownScopes: readonly string[];
  out: (line: string) => void;
  err: (line: string) => void;
  now?: () => Date;
}

export const USAGE = `Usage:
  npm run token -- create --name NAME [--scope SCOPE]... [--expires 30d]
  npm run token -- list
  npm run token -- revoke NAME|ID

create prints the new token once, as its last line. Without --scope a token gets every scope (*).
--expires takes a duration: 90m, 12h, 30d or 8w.`;

const NAME = /^[A-Za-z][A-Za-z0-9._-]{0,63}$/;

export class UsageError extends Error {}

/** Runs one command; answers the process exit code (0 done, 1 refused, 2 usage). */
export async function runTokenCommand(argv: readonly string[], context: CliContext): Promise<number> {
  try {
    const [command, ...rest] = argv;
    switch (command) {
      case 'create':
        return await create(rest, context);
      case 'list':
        return await list(rest, context);
      case 'revoke':
        return await revoke(rest, context);
      default:
        throw new UsageError(command === undefined ? 'Name a command.' : `Unknown command "${command}".`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      context.err(`${error.message}\n\n${USAGE}`);
      return 2;
    }
    if (error instanceof TokenNameTakenError || error instanceof UnstorableTextError) {
      context.err(error.message);
      return 1;
    }
    throw error;
  }
}

async function create(args: string[], context: CliContext): Promise<number> {
  const { values, positionals } = parse(args, {
    name: { type: 'string' },
    scope: { type: 'string', multiple: true },
    expires: { type: 'string' },
  });
  if (positionals.length > 0) throw new UsageError(`create takes only options, not "${positionals.join(' ')}".`);
  const name = values.name as string | undefined;
  if (name === undefined || !NAME.test(name)) {
    throw new UsageError('--name is required: a letter, then up to 63 letters, digits, ".", "_" or "-".');
  }
  const scopes = validScopes((values.scope as string[] | undefined) ?? [ALL_SCOPES], context.knownScopes);
  const now = context.now?.() ?? new Date();
  const expires = values.expires as string | undefined;
  const expiresAt = expires === undefined ? undefined : new Date(now.getTime() + durationMs(expires)).toISOString();
  const token = generateToken();
  const record = await context.store.createToken({
    name,
    hash: hashToken(token),
    hint: tokenHint(token),
    scopes,
    ...(expiresAt && { expiresAt }),
  });
  context.out(`Created token ${record.id} "${record.name}"`);
  context.out(`  scopes:  ${describeScopes(record.scopes)}`);
  context.out(`  expires: ${record.expiresAt ?? 'never'}`);
  context.out('Store it now: it is shown only this once and cannot be recovered.');
  context.out(token);
  return 0;
}

async function list(args: string[], context: CliContext): Promise<number> {
  if (parse(args, {}).positionals.length > 0) throw new UsageError('list takes no arguments.');
  const now = context.now?.() ?? new Date();
  const rows = (await context.store.listTokens()).map((token) => [
    String(token.id),
    token.name,
    token.hint,
    token.scopes.join(' '),
    token.createdAt,
    token.lastUsedAt ?? 'never',
    token.expiresAt ?? 'never',
    tokenStatus(token, now.getTime()),
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

function parse(args: string[], options: ParseArgsOptionsConfig) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function validScopes(requested: string[], known: readonly string[]): string[] {
  const unknown = requested.filter((scope) => scope !== ALL_SCOPES && !known.includes(scope));
  if (unknown.length > 0) {
    throw new UsageError(`Unknown scope ${unknown.join(', ')}; the contract knows ${[ALL_SCOPES, ...known].join(', ')}.`);
  }
  return [...new Set(requested)];
}

function durationMs(text: string): number {
  const ms = parseDuration(text);
  if (!ms) throw new UsageError(`--expires takes a duration such as 90m, 12h, 30d or 8w, not "${text}".`);
  return ms;
}

function describeScopes(scopes: readonly string[]): string {
  return scopes.includes(ALL_SCOPES) ? '* (every scope)' : scopes.join(' ');
}
