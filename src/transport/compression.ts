// Response compression (gzip, brotli) for the operations whose answers openapi.yaml says may be
// compressed (a response declaring `Content-Encoding`): their routes are built with these options.
// The others (a plant, a webhook, a health check) are built with `compress: false`, so they carry no
// compression hook at all, and their strong ETags always describe the bytes sent. The contract's
// documents are compressed once by their handler (compression-stored.ts), and @fastify/compress
// leaves an answer that already has its Content-Encoding as it is.
import { constants, type BrotliOptions, type ZlibOptions } from 'node:zlib';
import { negotiate } from '@fastify/accept-negotiator';
import fastifyCompress, { type FastifyCompressOptions } from '@fastify/compress';
import type { FastifyInstance, onSendHookHandler, RouteOptions } from 'fastify';
import type { OperationFacts } from '../contract/operation-facts.ts';

/** Answers smaller than this are sent as they are: compressing them saves less than it costs. */
export const COMPRESSION_THRESHOLD_BYTES = 1024;

/** Answers above this are compressed by a stream each; smaller ones in one synchronous call. */
export const STREAM_THRESHOLD_BYTES = 64 * 1024;

export type Encoding = 'br' | 'gzip';
/** The content codings answers are sent in, brotli first: preferred on a tie. */
const ENCODINGS: Encoding[] = ['br', 'gzip'];

// Brotli quality 4 and gzip level 6: the higher settings cost many times the CPU for no smaller page.
export const BROTLI_OPTIONS: BrotliOptions = { params: { [constants.BROTLI_PARAM_QUALITY]: 4 } };
export const ZLIB_OPTIONS: ZlibOptions = { level: 6 };

/** What a compressed route does, as @fastify/compress's per-route `compress` option takes it. */
const ROUTE_COMPRESSION = {
  encodings: [...ENCODINGS],
  threshold: COMPRESSION_THRESHOLD_BYTES,
  brotliOptions: BROTLI_OPTIONS,
  zlibOptions: ZLIB_OPTIONS,
  // A typical page of 1,000 plants (30-40 KB) is compressed in one call, without the thread pool's
  // round trip; larger pages stream.
  syncThreshold: STREAM_THRESHOLD_BYTES,
} satisfies FastifyCompressOptions;

// @fastify/compress's reading of the header (its getEncodingHeader): case folded, `*` and the
// x-gzip alias taken as gzip, then @fastify/accept-negotiator over the route's encodings.
const GZIP_ALIASES = /\*|x-gzip/g;

/**
 * The content coding of an answer to this Accept-Encoding, as @fastify/compress would choose it;
 * undefined: plain, also when nothing is acceptable (even `identity;q=0`), rather than a 406.
 */
export function negotiatedEncoding(acceptEncoding: string | undefined): Encoding | undefined {
  if (acceptEncoding === undefined) return undefined;
  return negotiate(acceptEncoding.toLowerCase().replace(GZIP_ALIASES, 'gzip'), ENCODINGS) ?? undefined;
}

/** An operation's `compress` route option. */
export function compressionOf({ compressed }: OperationFacts): typeof ROUTE_COMPRESSION | false {
  return compressed ? ROUTE_COMPRESSION : false;
}

export async function registerCompression(app: FastifyInstance): Promise<void> {
  await app.register(fastifyCompress, {
    ...ROUTE_COMPRESSION,
    // Only routes built with compression options compress; request bodies stay plain JSON, as the contract says.
    globalCompression: false,
    globalDecompression: false,
  });
}

/**
 * For a route serving HEAD as its GET, built after compression's own hook: a compressed answer
 * streamed to a GET goes chunked, which Node leaves out of a HEAD answer unless told (RFC 9112 §6.1
 * lets a HEAD say what its GET would); the stream itself is written nowhere.
 */
export function headFramedAsGet(route: RouteOptions): void {
  if (!Array.isArray(route.method) || !route.method.includes('HEAD')) return;
  const own = route.onSend === undefined ? [] : [route.onSend].flat();
  route.onSend = [...own, chunkedLikeGet];
}

const chunkedLikeGet: onSendHookHandler = (request, reply, payload, done) => {
  const streamed = typeof (payload as { pipe?: unknown } | null)?.pipe === 'function';
  if (request.method === 'HEAD' && streamed && !reply.hasHeader('content-length')) reply.header('transfer-encoding', 'chunked');
  done(null, payload);
};
