// Bounds how many large answers are compressed at once. Each one over STREAM_THRESHOLD_BYTES gets
// its own zlib or brotli stream (brotli's window alone is 4 MB) for as long as the client takes to
// read it, so a burst of such reads multiplied memory (256 pages of 1,000: 3.2 GB with br, 166 MB
// plain). Past the limit an answer is sent uncompressed, which is what a client that asks for
// `identity` gets anyway; smaller answers are compressed in one synchronous call and never wait.
import type { FastifyInstance, FastifyReply, FastifyRequest, onSendHookHandler } from 'fastify';

/** Answers above this are compressed by a stream (@fastify/compress's syncThreshold). */
export const STREAM_THRESHOLD_BYTES = 64 * 1024;

/** Which accepted encodings lead @fastify/compress to compress (br, gzip, or any). */
const COMPRESSING_ENCODING = /(^|[\s,])(br|gzip|\*)([\s;,]|$)/i;

export interface CompressionGate {
  /** Streams compressing right now. */
  readonly active: number;
  /** Put before @fastify/compress's onSend on each compressed route. */
  readonly onSend: onSendHookHandler;
}

export function createCompressionGate(limit: number): CompressionGate {
  let active = 0;
  const onSend: onSendHookHandler = (request, reply, payload, done) => {
    if (!wouldStream(request, reply, payload)) return done(null, payload);
    if (active >= limit) {
      // @fastify/compress's documented opt-out; the answer still varies with Accept-Encoding.
      request.headers['x-no-compression'] = 'limit';
      reply.header('vary', 'Accept-Encoding');
      return done(null, payload);
    }
    active++;
    // 'close' follows the last byte written and an aborted answer alike.
    reply.raw.once('close', () => active--);
    done(null, payload);
  };
  return {
    get active() {
      return active;
    },
    onSend,
  };
}

function wouldStream(request: FastifyRequest, reply: FastifyReply, payload: unknown): boolean {
  const accepted = request.headers['accept-encoding'];
  if (accepted === undefined || !COMPRESSING_ENCODING.test(accepted) || reply.hasHeader('content-encoding')) return false;
  if (typeof payload === 'string' || Buffer.isBuffer(payload)) return Buffer.byteLength(payload) > STREAM_THRESHOLD_BYTES;
  return payload !== null && payload !== undefined; // a stream: its size is unknown, so it counts
}

/** Puts the gate first in the onSend hooks of every route built with compression options. */
export function gateCompressedRoutes(app: FastifyInstance, gate: CompressionGate): void {
  app.addHook('onRoute', (route) => {
    if (typeof route.compress !== 'object') return;
    const hooks = route.onSend === undefined ? [] : Array.isArray(route.onSend) ? route.onSend : [route.onSend];
    route.onSend = [gate.onSend, ...hooks];
  });
}
