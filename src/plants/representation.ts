// A stored plant's ETag: what the wire shows of it beyond the JSON the response schemas write.

/** The strong ETag of a plant at this version: a new one with every change, the same on every instance and after a store move. */
export function plantEtag(version: bigint): string {
  return `"${version}"`;
}
