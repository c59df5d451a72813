// Settings of the fault and load scripts, read from the environment: a bad value stops the script
// with one line naming the variable.

/** An integer variable at least `min`, or `fallback` when unset or empty. */
export function integerSetting(name: string, fallback: number, min: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min) {
    console.error(`${name} must be an integer >= ${min}; got "${text}"`);
    process.exit(2);
  }
  return value;
}
