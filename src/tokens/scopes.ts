// Scopes are named by the contract: each operation's security requirement lists what it needs.

/** Granted to static tokens and the first-start token: every scope, present and future. */
export const ALL_SCOPES = '*';

/** The scopes of `required` that `granted` lacks (empty when it may proceed). */
export function missingScopes(granted: readonly string[], required: readonly string[]): string[] {
  if (granted.includes(ALL_SCOPES)) return [];
  return required.filter((scope) => !granted.includes(scope));
}

