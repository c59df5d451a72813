// The tokens repository: the store holds each token's hash and what a person may see of it, never the token.
import { all, only, record, Repository, run, sql, type Row, type Steps } from './sql.ts';
import { TokenNameTakenError, unstorableText, type NewTokenRecord, type TokenRecord } from './types.ts';

// Records' names come as aliases (quoted: both databases keep their case), read by `record`.
const TOKEN = sql`id, name, hint, scopes, created_at AS "createdAt", last_used_at AS "lastUsedAt", expires_at AS "expiresAt", revoked_at AS "revokedAt"`;

function toToken(row: Row): TokenRecord {
  const token = record<TokenRecord & { scopes: string }>(row);
  return { ...token, id: Number(token.id), scopes: token.scopes.split(' ') };
}

/** The refusal for a token whose text holds U+0000 (the scopes as the one text they are stored as). */
function unstorableToken({ name, hash, hint, scopes, expiresAt }: NewTokenRecord): Error | undefined {
  return unstorableText({ name, hash, hint, scopes: scopes?.join(' '), expiresAt });
}

function* insertToken({ name, hash, hint, scopes = ['*'], expiresAt }: NewTokenRecord): Steps<TokenRecord> {
  const insert = sql`INSERT INTO api_tokens (name, token_hash, hint, scopes, expires_at, created_at)
    VALUES (${name}, ${hash}, ${hint}, ${scopes.join(' ')}, ${expiresAt ?? null}, ${new Date().toISOString()}) ON CONFLICT (name) DO NOTHING RETURNING ${TOKEN}`;
  const [row] = (yield all(insert)) as Row[];
  if (!row) throw new TokenNameTakenError(name);
  return toToken(row);
}

export class SqlTokens extends Repository {
  findTokenByHash(hash: string): Promise<TokenRecord | undefined> {
    return this.query(sql`SELECT ${TOKEN} FROM api_tokens WHERE token_hash = ${hash}`, (rows) => (rows as Row[]).map(toToken)[0]);
  }

  /** Stores the token only when the store holds no token at all; answers whether it did. */
  createFirstToken(token: NewTokenRecord): Promise<boolean> {
    const refused = unstorableToken(token);
    if (refused) return Promise.reject(refused);
    const lock = this.driver.spelling.takeTurns?.('first token');
    return this.driver.write(function* () {
      // Two instances starting on an empty database must not both create a first token.
      if (lock !== undefined) yield all(lock);
      if (((yield all(sql`SELECT 1 AS one FROM api_tokens LIMIT 1`)) as Row[]).length > 0) return false;
      yield* insertToken(token);
      return true;
    }, 'transaction');
  }

  createToken(token: NewTokenRecord): Promise<TokenRecord> {
    const refused = unstorableToken(token);
    if (refused) return Promise.reject(refused);
    return this.driver.write(() => insertToken(token), 'statement');
  }

  listTokens(): Promise<TokenRecord[]> {
    return this.query(sql`SELECT ${TOKEN} FROM api_tokens ORDER BY id`, (rows) => (rows as Row[]).map(toToken));
  }

  async revokeToken(nameOrId: string): Promise<TokenRecord | undefined> {
    const refused = unstorableText({ name: nameOrId });
    if (refused) throw refused;
    const which = /^\d+$/.test(nameOrId) ? sql`id = ${nameOrId}` : sql`name = ${nameOrId}`;
    const revoke = all(sql`UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ${new Date().toISOString()}) WHERE ${which} RETURNING ${TOKEN}`);
    const [row] = await this.driver.write(() => only<Row[]>(revoke), 'statement');
    return row && toToken(row);
  }

  recordTokenUse(uses: ReadonlyMap<number, string>): Promise<void> {
    return this.driver.write(function* () {
      for (const [id, at] of uses) yield run(sql`UPDATE api_tokens SET last_used_at = ${at} WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at < ${at})`);
    }, 'transaction');
  }
}
