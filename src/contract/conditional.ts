// Conditional request headers (RFC 9110 §13): If-Match compares strongly, If-None-Match weakly; a malformed list is refused.
import { HttpError } from './errors.ts';

const ENTITY_TAG = /^(W\/)?"[\x21\x23-\x7e\x80-\xff]*"$/;

/** `*`, or the header's entity tags as written (a `#entity-tag` list: empty elements ignored, §5.6.1); a 400 naming the header when malformed. */
function parseEntityTags(name: string, header: string): '*' | string[] {
  if (header.trim() === '*') return '*';
  const tags = header.split(',').map((part) => part.trim()).filter((tag) => tag !== '');
  if (!tags.every((tag) => ENTITY_TAG.test(tag))) {
    throw new HttpError(400, `The ${name} header must be "*" or a comma-separated list of quoted ETags.`);
  }
  return tags;
}

/** undefined without an If-Match header; otherwise a test of the current strong ETag, which a weak tag (W/"…") never matches. */
export function ifMatchCondition(header: string | undefined): ((currentEtag: string) => boolean) | undefined {
  if (header === undefined) return undefined;
  const tags = parseEntityTags('If-Match', header);
  return (currentEtag) => tags === '*' || tags.includes(currentEtag);
}

/** True when If-None-Match names the current ETag, weak or strong (or `*`): the client's copy is fresh. */
export function ifNoneMatchHits(header: string | undefined, currentEtag: string): boolean {
  if (header === undefined) return false;
  const tags = parseEntityTags('If-None-Match', header);
  return tags === '*' || tags.some((tag) => tag.replace(/^W\//, '') === currentEtag);
}
