// Durations as operators write them: 250ms, 5s, 5m, 2h, 30d, 8w.
const DURATION = /^(\d{1,9})(ms|s|m|h|d|w)$/;
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;

/** Milliseconds, or undefined when the text is not a duration. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  return match ? Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS] : undefined;
}
