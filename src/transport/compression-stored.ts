// Answers that never change while the process runs (the contract's documents), compressed once on zlib's thread
// pool rather than on the event loop at every request, each coding with a strong ETag of its bytes.
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { brotliCompress, gzip } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ifNoneMatchHits } from '../contract/conditional.ts';
import { BROTLI_OPTIONS, negotiatedEncoding, ZLIB_OPTIONS, type Encoding } from './compression.ts';
import { addVary } from './vary.ts';

const brotliAsync = promisify(brotliCompress);
const gzipAsync = promisify(gzip);

interface Representation {
  bytes: Buffer;
  /** Strong: it names these bytes, so each coding has its own (RFC 9110 §8.8.3). */
  etag: string;
}

export interface StoredAnswer {
  type: string;
  identity: Representation;
  codings: Record<Encoding, Representation>;
}

export async function storeAnswer(type: string, body: string): Promise<StoredAnswer> {
  const plain = Buffer.from(body);
  const [br, gzipped] = await Promise.all([brotliAsync(plain, BROTLI_OPTIONS), gzipAsync(plain, ZLIB_OPTIONS)]);
  return { type, identity: representation(plain), codings: { br: representation(br), gzip: representation(gzipped) } };
}

function representation(bytes: Buffer): Representation {
  return { bytes, etag: `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"` };
}

/** The representation the request's Accept-Encoding picks, or 304 when If-None-Match names it. */
export function sendStored(request: FastifyRequest, reply: FastifyReply, answer: StoredAnswer): FastifyReply {
  const encoding = negotiatedEncoding(request.headers['accept-encoding']);
  const chosen = encoding === undefined ? answer.identity : answer.codings[encoding];
  // Read first: a malformed If-None-Match is a 400, which carries neither header.
  const fresh = ifNoneMatchHits(request.headers['if-none-match'], chosen.etag);
  addVary(reply, 'accept-encoding');
  reply.header('etag', chosen.etag);
  if (fresh) return reply.code(304).send();
  if (encoding !== undefined) reply.header('content-encoding', encoding);
  return reply.type(answer.type).send(chosen.bytes);
}
