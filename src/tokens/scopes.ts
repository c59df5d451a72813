// Scopes are named by the contract: each operation's security requirement lists what it needs.

/** Granted to static tokens and the first-start token: every scope, present and future. */
export const ALL_SCOPES = '*';

/** The scopes of `required` that `granted` lacks (empty when it may proceed). */
export function missingScopes(granted: readonly string[], required: readonly string[]): string[] {
  if (granted.includes(ALL_SCOPES)) return [];
  return required.filter((scope) => !granted.includes(scope));
}

/** Every scope some operation of the spec requires, for validating what the CLI grants. */
export function scopesInSpec(spec: { paths?: Record<string, Record<string, unknown>> }): string[] {
  const scopes = new Set<string>();
  for (const item of Object.values(spec.paths ?? {})) {
    for (const operation of Object.values(item)) {
      const security = (operation as { security?: Record<string, string[]>[] } | undefined)?.security;
      for (const requirement of Array.isArray(security) ? security : []) {
        for (const list of Object.values(requirement)) for (const scope of list) scopes.add(scope);
      }
    }
  }
  return [...scopes].sort();
}
