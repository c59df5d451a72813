// Response compression (gzip, brotli) for the operations whose answers can be large. The others
// (a plant, a webhook, a health check) answer a few hundred bytes: they get no compression hook
// at all, so they pay nothing, and their strong ETags always describe the bytes sent.
import { constants } from 'node:zlib';
import fastifyCompress from '@fastify/compress';
import type { FastifyInstance, onSendHookHandler } from 'fastify';
import type { OperationId } from './operations.ts';

/** Answers smaller than this are sent as they are: compressing them saves less than it costs. */
export const COMPRESSION_THRESHOLD_BYTES = 1024;

const COMPRESSION_CHUNK_BYTES = 8 * 1024;

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
    // Quality 4 and level 6: on a page of 1,000 plants (40 KB), brotli 4 takes ~0.3 ms for 2 KB
    // where the default 11 takes ~34 ms for no smaller a result; gzip 9 costs 4x gzip 6 for the same size.
    // chunkSize: each synchronous call allocates one output buffer of this size, which stays alive
    // until a full GC (see the Buffer pool in server.ts); 8 KiB holds a compressed page of 1,000
    // (2-5 KB), where the default 16 KiB only held more memory. A larger answer takes more chunks.
    brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: 4 }, chunkSize: COMPRESSION_CHUNK_BYTES },
    zlibOptions: { level: 6, chunkSize: COMPRESSION_CHUNK_BYTES },
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
