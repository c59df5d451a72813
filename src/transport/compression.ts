// gzip and brotli for the operations openapi.yaml says may be compressed (the others are built with `compress: false`,
// so their strong ETags name the bytes sent); answers that never change (the documents) are compressed once, off the loop.
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip, type BrotliOptions } from 'node:zlib';
import { negotiate } from '@fastify/accept-negotiator';
import fastifyCompress, { type FastifyCompressOptions } from '@fastify/compress';
import type { FastifyInstance, FastifyReply, FastifyRequest, onSendHookHandler } from 'fastify';
import { ifNoneMatchHits } from '../contract/conditional.ts';
import type { OperationFacts } from '../contract/operation-facts.ts';

/** Answers above this are compressed by a stream each; smaller ones in one synchronous call. */
export const STREAM_THRESHOLD_BYTES = 64 * 1024;

type Encoding = 'br' | 'gzip';
/** The content codings answers are sent in, brotli first: preferred on a tie. */
const ENCODINGS: Encoding[] = ['br', 'gzip'];

// @fastify/compress's brotli quality, stored answers' too: a higher one costs many times the CPU for no smaller page.
const BROTLI_OPTIONS: BrotliOptions = { params: { [constants.BROTLI_PARAM_QUALITY]: 4 } };
const ROUTE_COMPRESSION: FastifyCompressOptions = { encodings: ENCODINGS, syncThreshold: STREAM_THRESHOLD_BYTES };

/** Read as @fastify/compress reads it (`*` and x-gzip as gzip); undefined: plain, even for `identity;q=0`, not a 406. */
function negotiatedEncoding(acceptEncoding: string | undefined): Encoding | undefined {
  if (acceptEncoding === undefined) return undefined;
  return negotiate(acceptEncoding.toLowerCase().replace(/\*|x-gzip/g, 'gzip'), ENCODINGS) ?? undefined;
}

export function compressionOf({ compressed }: OperationFacts): typeof ROUTE_COMPRESSION | false {
  return compressed ? ROUTE_COMPRESSION : false;
}

/** @fastify/compress for the routes built with compression options, at most `limit` of them streaming at once. */
export async function registerCompression(app: FastifyInstance, limit: number): Promise<void> {
  // Request bodies stay plain JSON, as the contract says.
  await app.register(fastifyCompress, { globalCompression: false, globalDecompression: false });
  const [decide, count] = gate(limit);
  // After @fastify/compress's own onRoute hook, which has appended its onSend by then.
  app.addHook('onRoute', (route) => {
    const compressed = typeof route.compress === 'object';
    const head = Array.isArray(route.method) && route.method.includes('HEAD');
    if (!compressed && !head) return;
    const own = route.onSend === undefined ? [] : [route.onSend].flat();
    route.onSend = [...(compressed ? [decide, ...own, count] : own), ...(head ? [chunkedLikeGet] : [])];
  });
}

// A streamed answer holds its own compressor until read (brotli's window alone is 4 MB), so past `limit` it is sent
// plain, by the request header @fastify/compress documents; only then is the coding negotiated here.
function gate(limit: number): [onSendHookHandler, onSendHookHandler] {
  let active = 0;
  return [
    (request, reply, payload, done) => {
      if (active >= limit && streams(payload)) {
        request.headers['x-no-compression'] = 'limit';
        if (negotiatedEncoding(request.headers['accept-encoding']) !== undefined) addVary(reply, 'Accept-Encoding');
      }
      done(null, payload);
    },
    // Counts what was compressed by a stream, after the compressor: the count cannot drift from it.
    (_request, reply, payload, done) => {
      if (reply.hasHeader('content-encoding') && isStream(payload)) {
        active++;
        reply.raw.once('close', () => active--); // after the last byte written and an aborted answer alike
      }
      done(null, payload);
    },
  ];
}

/** Whether @fastify/compress would compress this payload by a stream (a stream's size is unknown: it counts). */
function streams(payload: unknown): boolean {
  if (typeof payload === 'string' || Buffer.isBuffer(payload)) return Buffer.byteLength(payload) > STREAM_THRESHOLD_BYTES;
  return payload !== null && payload !== undefined;
}

function isStream(payload: unknown): boolean {
  return typeof (payload as { pipe?: unknown } | null)?.pipe === 'function';
}

// A compressed answer streamed to a GET goes chunked, which Node leaves out of a HEAD answer unless told (RFC 9112 §6.1).
const chunkedLikeGet: onSendHookHandler = (request, reply, payload, done) => {
  if (request.method === 'HEAD' && isStream(payload) && !reply.hasHeader('content-length')) reply.header('transfer-encoding', 'chunked');
  done(null, payload);
};

const brotliAsync = promisify(brotliCompress);
const gzipAsync = promisify(gzip);

export type StoredAnswer = Awaited<ReturnType<typeof storeAnswer>>;

export async function storeAnswer(type: string, body: string) {
  const plain = Buffer.from(body);
  const [br, gzipped] = await Promise.all([brotliAsync(plain, BROTLI_OPTIONS), gzipAsync(plain)]);
  return { type, identity: representation(plain), codings: { br: representation(br), gzip: representation(gzipped) } };
}

// Strong: the ETag names these bytes, so each coding has its own (RFC 9110 §8.8.3).
function representation(bytes: Buffer): { bytes: Buffer; etag: string } {
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

// Vary is shared (CORS puts Origin in it): setting it would drop the other's field.
function addVary(reply: FastifyReply, field: string): void {
  const current = reply.getHeader('vary');
  const fields = current === undefined ? [] : String(current).split(',').map((name) => name.trim()).filter(Boolean);
  if (fields.some((name) => name.toLowerCase() === field.toLowerCase())) return;
  reply.header('vary', [...fields, field].join(', '));
}
