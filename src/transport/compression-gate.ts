// Bounds how many large answers are compressed at once. Each one over STREAM_THRESHOLD_BYTES gets
// its own zlib or brotli stream (brotli's window alone is 4 MB) for as long as the client takes to
// read it, so a burst of such reads multiplied memory (256 pages of 1,000: 3.2 GB with br, 166 MB
// plain). Past the limit an answer is sent uncompressed, which is what a client that asks for
// `identity` gets anyway; smaller answers are compressed in one synchronous call and never wait.
//
// The encoding is decided once, here, and @fastify/compress is handed the decision through the
// request headers it documents: `x-no-compression`, or an Accept-Encoding holding only the chosen
// coding. A gate reading the header its own way let `foo;br` and `x-gzip` through uncounted.
import type { FastifyInstance, onSendHookHandler } from 'fastify';
import { negotiatedEncoding, STREAM_THRESHOLD_BYTES } from './compression.ts';
import { addVary } from './vary.ts';

export interface CompressionGate {
  /** Streams compressing right now. */
  readonly active: number;
  /** Put before @fastify/compress's onSend: decides the encoding, plain past the limit. */
  readonly decide: onSendHookHandler;
  /** Put right after @fastify/compress's onSend: counts the answers it compresses by a stream. */
  readonly count: onSendHookHandler;
}

export function createCompressionGate(limit: number): CompressionGate {
  let active = 0;
  const decide: onSendHookHandler = (request, reply, payload, done) => {
    const encoding = negotiatedEncoding(request.headers['accept-encoding']);
    if (encoding === undefined) {
      request.headers['x-no-compression'] = 'not accepted';
    } else if (active >= limit && streams(payload)) {
      request.headers['x-no-compression'] = 'limit';
      // The answer still varies with Accept-Encoding.
      addVary(reply, 'Accept-Encoding');
    } else {
      request.headers['accept-encoding'] = encoding;
    }
    done(null, payload);
  };
  // What was compressed, not what was expected to be: the count cannot drift from the compressor.
  const count: onSendHookHandler = (_request, reply, payload, done) => {
    if (reply.hasHeader('content-encoding') && isStream(payload)) {
      active++;
      // 'close' follows the last byte written and an aborted answer alike.
      reply.raw.once('close', () => active--);
    }
    done(null, payload);
  };
  return {
    get active() {
      return active;
    },
    decide,
    count,
  };
}

/** Whether @fastify/compress would compress this payload by a stream rather than in one call. */
function streams(payload: unknown): boolean {
  if (typeof payload === 'string' || Buffer.isBuffer(payload)) return Buffer.byteLength(payload) > STREAM_THRESHOLD_BYTES;
  return payload !== null && payload !== undefined; // a stream: its size is unknown, so it counts
}

function isStream(payload: unknown): boolean {
  return typeof (payload as { pipe?: unknown } | null)?.pipe === 'function';
}

/** Puts the gate around @fastify/compress's onSend on every route built with compression options. */
export function gateCompressedRoutes(app: FastifyInstance, gate: CompressionGate): void {
  app.addHook('onRoute', (route) => {
    if (typeof route.compress !== 'object') return;
    // @fastify/compress's own onRoute hook, registered before this one, has appended its onSend.
    const hooks = route.onSend === undefined ? [] : [route.onSend].flat();
    route.onSend = [gate.decide, ...hooks, gate.count];
  });
}
