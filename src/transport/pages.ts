// Page answers written item by item as the socket takes them, with the route's own serializer for an item: a slow client
// holds its page's unwritten items and a chunk or two of text, never the page's whole text.
import { Readable } from 'node:stream';
import type { RouteOptions } from 'fastify';
import type { OperationFacts } from '../contract/operation-facts.ts';
import { STREAM_THRESHOLD_BYTES } from './compression.ts';

/** Characters of JSON per chunk after the first: about what a socket takes in one write. */
const CHUNK_CHARACTERS = 16 * 1024;

type Item = Record<string, unknown>;

/** A page read's handler that writes its page as read: whole up to STREAM_THRESHOLD_BYTES, chunked above. */
export function writtenAsRead({ pageRead }: OperationFacts, handler: RouteOptions['handler']): RouteOptions['handler'] {
  if (!pageRead) return handler;
  // The route's item serializer, compiled by Fastify on the route's first page and kept for the next ones.
  let serialize: ((item: Item) => string) | undefined;
  return async function (request, reply) {
    const answer: unknown = await handler.call(this, request, reply);
    if (!Array.isArray(answer)) return answer;
    serialize ??= reply.compileSerializationSchema((request.routeOptions.schema!.response as Record<string, { items: Item }>)['200']!.items, '200');
    const chunks = jsonArray(answer, serialize);
    const first = chunks.next();
    // As Fastify types what it serializes; a text or a stream of this type is then sent as it is.
    reply.type('application/json; charset=utf-8');
    if (first.done) return first.value;
    // HTTP/1.0 has no chunked framing: an answer of unknown length would close a kept-alive connection.
    if (request.raw.httpVersion === '1.0') return [...following(first.value, chunks)].join('');
    // Not the reply: returning it would hold the handler, and its page-read turn, until the client has read the page.
    return Readable.from(following(first.value, chunks), { objectMode: false });
  };
}

/** The JSON array of `items` in chunks: the first up to STREAM_THRESHOLD_BYTES characters, returned when it holds the whole array. */
function* jsonArray(items: Item[], serialize: (item: Item) => string): Generator<string, string> {
  let text = '[';
  let size = STREAM_THRESHOLD_BYTES;
  // Taken from the end of the reversed array: an item written is let go, so a slow client holds only what it has yet to read.
  items.reverse();
  for (let item = items.pop(); item !== undefined; item = items.pop()) {
    if (text.length >= size) {
      yield text;
      text = '';
      size = CHUNK_CHARACTERS;
    }
    text += (text === '[' ? '' : ',') + serialize(item);
  }
  return `${text}]`;
}

function* following(first: string, rest: Generator<string, string>): Generator<string> {
  yield first;
  // `yield*` hands on the chunks and evaluates to the last one, which jsonArray returns.
  yield yield* rest;
}
