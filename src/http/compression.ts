// Response compression (gzip, brotli) for the operations whose answers can be large. The others
// (a plant, a webhook, a health check) answer a few hundred bytes: they get no compression hook
// at all, so they pay nothing, and their strong ETags always describe the bytes sent.
import zlib, { constants, type BrotliOptions, type ZlibOptions } from 'node:zlib';
import fastifyCompress from '@fastify/compress';
import type { FastifyInstance, onSendHookHandler } from 'fastify';
import type { OperationId } from './operations.ts';

/** Answers smaller than this are sent as they are: compressing them saves less than it costs. */
export const COMPRESSION_THRESHOLD_BYTES = 1024;

const COMPRESSION_CHUNK_BYTES = 8 * 1024;

// Quality 4 and level 6: on a page of 1,000 plants (40 KB), brotli 4 takes ~0.3 ms for 2 KB
// where the default 11 takes ~34 ms for no smaller a result; gzip 9 costs 4x gzip 6 for the same size.
// chunkSize: each call allocates one output buffer of this size; 8 KiB holds a compressed page of
// 1,000 (2-5 KB), where the default 16 KiB only held more memory. A larger answer takes more chunks.
export const BROTLI_OPTIONS: BrotliOptions = { params: { [constants.BROTLI_PARAM_QUALITY]: 4 }, chunkSize: COMPRESSION_CHUNK_BYTES };
export const ZLIB_OPTIONS: ZlibOptions = { level: 6, chunkSize: COMPRESSION_CHUNK_BYTES };

/**
 * A synchronous compressor that lets go of the compressor object it used. Each of zlib's one-shot
 * calls (brotliCompressSync, gzipSync) makes a compressor, a stream with a native handle, and answers
 * with a slice of that compressor's output buffer (chunkSize bytes, malloc'd). The compressor, closed
 * by then, outlives every young-generation GC (Node 24 keeps it, through its handle, until a full
 * GC), so every compressed answer kept its 8 KiB until a full GC, which V8 starts only once external
 * memory has grown by 64 MB. Bench rows, pages of 1,000 with gzip and br: arrayBuffers reached 10-23
 * MB, glibc's heap grew from 9 to 35-40 MB (two thirds of it free, never returned) and set the peak
 * RSS. Dropping the compressor's own reference to its output buffer (`_outBuffer`, which nothing
 * reads once the call has returned) leaves the bytes to the answer alone, a young object that the
 * next scavenge frees. `info: true` is zlib's documented way to get the engine;
 * test/compression.test.ts fails if a later Node keeps the buffer under another name.
 */
function releasing(compressSync: (buffer: Buffer, options: object) => unknown, options: BrotliOptions | ZlibOptions): (buffer: Buffer) => Buffer {
  const withEngine = { ...options, info: true };
  return (buffer) => {
    const { buffer: compressed, engine } = compressSync(buffer, withEngine) as { buffer: Buffer; engine: { _outBuffer?: Buffer } };
    engine._outBuffer = undefined;
    return compressed;
  };
}

/** What @fastify/compress takes from zlib on its synchronous path; it creates its streams from node:zlib. */
export const SYNC_ZLIB = {
  brotliCompressSync: releasing(zlib.brotliCompressSync, BROTLI_OPTIONS),
  gzipSync: releasing(zlib.gzipSync, ZLIB_OPTIONS),
};

/** The operations that answer lists or documents; none of them sends an ETag. */
const COMPRESSED_OPERATIONS: ReadonlySet<OperationId> = new Set<OperationId>([
  'listPlants',
  'listWebhooks',
  'listWebhookDeliveries',
  'getMetrics',
  'getOpenApiJson',
  'getOpenApiYaml',
]);

export async function registerCompression(app: FastifyInstance): Promise<void> {
  // Runs before the plugin's own onRoute hook: `compress: false` means it adds no hook to the route.
  app.addHook('onRoute', (route) => {
    if (!COMPRESSED_OPERATIONS.has(route.schema?.operationId as OperationId)) route.compress = false;
  });
  await app.register(fastifyCompress, {
    encodings: ['br', 'gzip'],
    threshold: COMPRESSION_THRESHOLD_BYTES,
    // The same options for the streams (pages over syncThreshold) as SYNC_ZLIB uses.
    brotliOptions: BROTLI_OPTIONS,
    zlibOptions: ZLIB_OPTIONS,
    zlib: SYNC_ZLIB,
    // Request bodies stay plain JSON: no Content-Encoding on requests, as the contract says.
    globalDecompression: false,
    // Up to 64 KiB (a typical page of 1,000 plants is 30-40 KB) compress in one synchronous call,
    // under a millisecond of the event loop: the stream path through the thread pool cost a third
    // more CPU per page on two cores (1,300 against 950 µs in npm run bench). Larger pages stream.
    syncThreshold: 64 * 1024,
  });
  // After the plugin's onRoute hook. Without Accept-Encoding its onSend hook passes every answer on
  // as it is, with no Vary either (no onUnsupportedEncoding, no inflateIfDeflated here, and no
  // handler answers a fetch Response), yet it reads three headers through getHeader, which
  // lowercases each name, and tests the Content-Type first: 1.8% of the CPU time of a page of 100
  // (perf). Such requests now skip it.
  app.addHook('onRoute', (route) => {
    if (route.compress === false) return;
    const hooks = Array.isArray(route.onSend) ? (route.onSend as onSendHookHandler[]) : [];
    const compressing = hooks.at(-1);
    if (compressing?.name !== 'onSend') throw new Error('@fastify/compress no longer adds its onSend hook last: see compression.ts.');
    hooks[hooks.length - 1] = function onSendIfAccepted(request, reply, payload, done) {
      if (request.headers['accept-encoding'] === undefined) return done(null, payload);
      return compressing.call(this, request, reply, payload, done);
    };
  });
}
