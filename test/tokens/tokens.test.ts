import t, { type Test } from 'tap';
import { join } from 'node:path';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { PlantStore, TokenRepository } from '../../src/store/types.ts';
import { ensureFirstToken, FIRST_TOKEN_NAME } from '../../src/tokens/bootstrap.ts';
import { generateToken, hasValidChecksum, hashToken, tokenHint } from '../../src/tokens/format.ts';
import { createTokenVerifier, type TokenVerifier, type VerifierOptions } from '../../src/tokens/verifier.ts';

const ISSUED = /^pst_[0-9A-Za-z]{49}$/;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BODY_START = 'pst_'.length;

function openStore(t: Test): SqliteStore {
  const store = new SqliteStore(join(t.testdir(), 'plants.db'));
  t.teardown(() => store.close());
  return store;
}

/** The token with the character at `position` replaced by another base62 character. */
function mistype(token: string, position: number): string {
  const next = ALPHABET[(ALPHABET.indexOf(token[position]!) + 1) % ALPHABET.length]!;
  return token.slice(0, position) + next + token.slice(position + 1);
}

/** A verifier closed when the test ends, as a plain function. */
function verifierFor(t: Test, options: VerifierOptions): TokenVerifier['verify'] {
  const verifier = createTokenVerifier(options);
  t.teardown(() => verifier.close());
  return (token) => verifier.verify(token);
}

/** The verifier's answer when it needs no store lookup; 'store' when it would ask the store. */
function known(verifier: TokenVerifier, token: string): string | undefined {
  const answer = verifier.verify(token);
  if (answer instanceof Promise) {
    answer.catch(() => undefined);
    return 'store';
  }
  return answer?.name;
}

/** The store with every findTokenByHash call recorded; every other method passes through. */
function recordingLookups(store: PlantStore): { store: TokenRepository; lookups: string[] } {
  const lookups: string[] = [];
  const recorded = new Proxy(store.tokens, {
    get(target, key) {
      if (key === 'findTokenByHash') {
        return (hash: string) => {
          lookups.push(hash);
          return target.findTokenByHash(hash);
        };
      }
      const value: unknown = Reflect.get(target, key);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { lookups, store: recorded };
}

t.test('generateToken: pst_ and 49 base62 characters, never the same twice', async (t) => {
  const tokens = Array.from({ length: 1000 }, () => generateToken());
  const malformed = tokens.filter((token) => !ISSUED.test(token));
  t.same(malformed, [], 'every token matches /^pst_[0-9A-Za-z]{49}$/');
  t.equal(new Set(tokens).size, tokens.length, '1000 distinct tokens');
  t.equal(new Set(tokens.map((token) => token.slice(BODY_START, BODY_START + 8))).size, tokens.length, 'distinct from their first characters on');
});

t.test('hasValidChecksum: true for issued tokens, false after any one-character typo', async (t) => {
  const tokens = Array.from({ length: 20 }, () => generateToken());
  t.ok(tokens.every(hasValidChecksum), 'every generated token');
  const token = tokens[0]!;
  // Every position of the 49 characters after the prefix: the secret (43) and the checksum (6).
  for (let position = BODY_START; position < token.length; position++) {
    t.equal(hasValidChecksum(mistype(token, position)), false, `character ${position} changed`);
  }
  for (const position of [BODY_START, 20, token.length - 1]) {
    const outsideAlphabet = token.slice(0, position) + '-' + token.slice(position + 1);
    t.equal(hasValidChecksum(outsideAlphabet), false, `character ${position} replaced by "-"`);
  }
  t.equal(hasValidChecksum(token.slice(0, -1)), false, 'one character short');
  t.equal(hasValidChecksum(`${token}0`), false, 'one character long');
  t.equal(hasValidChecksum(token.slice(0, 10)), false, 'a prefix of a token');
  const checksumStart = token.length - 6;
  t.equal(
    hasValidChecksum(token.slice(0, checksumStart) + 'extra' + token.slice(checksumStart)),
    false,
    'characters inserted between the secret and its checksum',
  );
  const swapped = token.slice(0, 10) + token[11] + token[10] + token.slice(12);
  if (swapped !== token) t.equal(hasValidChecksum(swapped), false, 'two neighbours swapped');
});

t.test('hasValidChecksum: true for any string that is not a pst_ token', async (t) => {
  for (const value of ['static-token-0123456789', '', 'x', 'PST_abc', 'pst-abc', ` ${generateToken()}`]) {
    t.equal(hasValidChecksum(value), true, JSON.stringify(value));
  }
});

t.test('hashToken is the hex SHA-256 of the token', async (t) => {
  t.equal(hashToken('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', 'SHA-256("abc")');
  t.equal(hashToken(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', 'SHA-256("")');
  const token = generateToken();
  t.match(hashToken(token), /^[0-9a-f]{64}$/);
  t.equal(hashToken(token), hashToken(token), 'the same token, the same hash');
  t.not(hashToken(token), hashToken(mistype(token, 10)), 'another token, another hash');
});

t.test('tokenHint shows the prefix and the last four characters only', async (t) => {
  const token = generateToken();
  t.equal(tokenHint(token), `pst_…${token.slice(-4)}`);
  t.equal(tokenHint(mistype(token, 10)), tokenHint(token), 'the middle of the token leaves no trace in the hint');
  t.not(tokenHint(mistype(token, token.length - 1)), tokenHint(token), 'the last four are shown');
});

t.test('createTokenVerifier: a static token may start with pst_ without carrying a checksum', async (t) => {
  const verify = verifierFor(t, { staticTokens: ['pst_operator-chosen-token'], store: openStore(t).tokens });
  t.same(await verify('pst_operator-chosen-token'), { key: hashToken('pst_operator-chosen-token').slice(0, 32), name: 'API_TOKENS[0]', scopes: ['*'] });
  t.equal(await verify('pst_operator-chosen-tokeN'), undefined, 'a near miss is still refused');
});

t.test('createTokenVerifier: static tokens', async (t) => {
  const staticTokens = ['static-token-alpha-0001', 'static-token-bravo-0002'];
  const { store, lookups } = recordingLookups(openStore(t));
  const verify = verifierFor(t, { staticTokens, store });
  t.same(await verify('static-token-alpha-0001'), { key: hashToken('static-token-alpha-0001').slice(0, 32), name: 'API_TOKENS[0]', scopes: ['*'] }, 'every scope');
  t.same(await verify('static-token-bravo-0002'), { key: hashToken('static-token-bravo-0002').slice(0, 32), name: 'API_TOKENS[1]', scopes: ['*'] });
  const others = [
    '',
    'static-token-alpha-000',
    'static-token',
    'static-token-alpha-00011',
    'STATIC-TOKEN-ALPHA-0001',
    ' static-token-alpha-0001',
    'static-token-alpha-0001,static-token-bravo-0002',
    'static-token-charlie-03',
    generateToken(),
  ];
  for (const other of others) {
    t.equal(await verify(other), undefined, `refuses ${JSON.stringify(other)}`);
  }
  t.same(
    lookups,
    others.filter((other) => other !== '').map(hashToken),
    'static matches and the empty string need no store lookup; the rest are looked up by hash',
  );
});

t.test('createTokenVerifier: a token stored by ensureFirstToken', async (t) => {
  const sqlite = openStore(t);
  const token = await ensureFirstToken(sqlite.tokens, []);
  if (!token) throw new Error('ensureFirstToken created no token on an empty store');
  const { store, lookups } = recordingLookups(sqlite);
  const verify = verifierFor(t, { staticTokens: [], store });
  t.same(await verify(token), { key: hashToken(token).slice(0, 32), name: FIRST_TOKEN_NAME, scopes: ['*'] }, 'the first-start token has every scope');
  t.same(lookups, [hashToken(token)], 'looked up by its hash, never by the token');

  lookups.length = 0;
  for (const position of [BODY_START, 25, token.length - 1]) {
    t.equal(await verify(mistype(token, position)), undefined, `refuses the token mistyped at ${position}`);
  }
  t.equal(await verify(token.slice(0, -1)), undefined, 'refuses a prefix of the token');
  t.equal(await verify(''), undefined, 'refuses the empty string');
  t.same(lookups, [], 'a mistyped pst_ token is refused by its checksum, without a store lookup');

  const unknown = generateToken();
  t.equal(await verify(unknown), undefined, 'refuses a well-formed token that was never stored');
  t.same(lookups, [hashToken(unknown)]);
});

t.test('ensureFirstToken creates a token only the first time', async (t) => {
  const store = openStore(t);
  const token = await ensureFirstToken(store.tokens, []);
  t.match(token, ISSUED, 'an issued token');
  t.ok(hasValidChecksum(token!));
  const found = await store.tokens.findTokenByHash(hashToken(token!));
  t.equal(found?.name, FIRST_TOKEN_NAME, 'stored by its hash');
  t.equal(found?.hint, tokenHint(token!), 'with its hint');
  t.equal(await ensureFirstToken(store.tokens, []), undefined, 'not the second time');
  t.equal(await ensureFirstToken(store.tokens, []), undefined, 'nor the third');
});

t.test('ensureFirstToken never creates a token when static tokens are given', async (t) => {
  const store = openStore(t);
  t.equal(await ensureFirstToken(store.tokens, ['static-token-alpha-0001']), undefined);
  t.equal(await ensureFirstToken(store.tokens, ['static-token-alpha-0001', 'static-token-bravo-0002']), undefined);
  t.match(await ensureFirstToken(store.tokens, []), ISSUED, 'the store was left without a token: a later start without API_TOKENS creates one');
});

// Answers are kept by the token's text (verifier.ts): these show that what it answers never outlives
// what the store and the clock say.
t.test('createTokenVerifier: a remembered stored token stops working at its expiry, and at its revocation once the record cache expires', async (t) => {
  const sqlite = openStore(t);
  let clock = Date.parse('2026-01-01T00:00:00Z');
  const token = generateToken();
  const revoked = generateToken();
  await sqlite.tokens.createToken({ name: 'expiring', hash: hashToken(token), hint: tokenHint(token), expiresAt: new Date(clock + 1_000).toISOString() });
  await sqlite.tokens.createToken({ name: 'to revoke', hash: hashToken(revoked), hint: tokenHint(revoked) });
  const { store, lookups } = recordingLookups(sqlite);
  const verifier = createTokenVerifier({ staticTokens: [], store, now: () => clock });
  t.teardown(() => verifier.close());

  t.equal((await verifier.verify(token))?.name, 'expiring');
  t.equal(known(verifier, token), 'expiring', 'known without the store while its record is cached');
  clock += 999;
  t.equal(known(verifier, token), 'expiring', 'until its last millisecond');
  clock += 1;
  t.equal(await verifier.verify(token), undefined, 'refused at its expiry, though its answer was kept for 2 s');

  t.equal((await verifier.verify(revoked))?.name, 'to revoke');
  await sqlite.tokens.revokeToken('to revoke');
  t.equal(known(verifier, revoked), 'to revoke', 'a revocation is not seen while the record is cached');
  clock += 2_000;
  lookups.length = 0;
  const answer = verifier.verify(revoked);
  t.ok(answer instanceof Promise, 'once the cache expires, not known without the store');
  t.equal(await answer, undefined, 'and refused: revoked');
  t.same(lookups, [hashToken(revoked)], 'after one lookup');
});

t.test('createTokenVerifier: a remembered token still records its last use; a wrong token is never remembered', async (t) => {
  const sqlite = openStore(t);
  let clock = Date.parse('2026-01-01T00:00:00Z');
  const token = generateToken();
  await sqlite.tokens.createToken({ name: 'used', hash: hashToken(token), hint: tokenHint(token) });
  const verifier = createTokenVerifier({ staticTokens: ['static-token-alpha-0001'], store: sqlite.tokens, now: () => clock });
  t.teardown(() => verifier.close());
  await verifier.verify(token);
  clock += 500;
  t.equal(known(verifier, token), 'used');
  await verifier.flush();
  t.equal((await sqlite.tokens.listTokens()).find((record) => record.name === 'used')?.lastUsedAt, new Date(clock).toISOString(), 'the last use is the remembered one');

  const unknown = generateToken();
  t.equal(await verifier.verify(unknown), undefined);
  t.equal(known(verifier, unknown), undefined, 'refused without the store: its absence is cached, no principal');
  t.equal(await verifier.verify('static-token-alpha-0002'), undefined, 'a near miss of a static token');
  t.equal(known(verifier, 'static-token-alpha-0001'), 'API_TOKENS[0]', 'the static token itself');
});
