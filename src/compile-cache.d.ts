// The types of compile-cache.js, which stays JavaScript (entry.js loads it before the type stripper is on).
export function privateCacheDir(env?: NodeJS.ProcessEnv): { dir?: string; refused?: string };
