// Where Node's compile cache may live: a directory only this user can write, or nowhere, since Node runs whatever
// it finds there (entries are checked by CRC32 only). JavaScript: entry.js loads it before the type stripper is on.
import { lstatSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';

/**
 * $XDG_CACHE_HOME/plant-store, else ~/.cache/plant-store, else <tmpdir>/plant-store-compile-cache-<uid>, created 0700;
 * `refused` says why none is used when the one found belongs to someone else or others can write it.
 * @returns {{ dir?: string, refused?: string }}
 */
export function privateCacheDir(env = process.env) {
  const uid = process.getuid?.();
  const places = [];
  if (env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME)) places.push(join(env.XDG_CACHE_HOME, 'plant-store'));
  else if (env.HOME && isAbsolute(env.HOME)) places.push(join(env.HOME, '.cache', 'plant-store'));
  // Shared temp directories are sticky: a directory this user created there is safe once checked.
  if (uid !== undefined) places.push(join(tmpdir(), `plant-store-compile-cache-${uid}`));
  for (const dir of places) {
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
    } catch {
      continue; // cannot be created here (read-only, no such home): the next place
    }
    const problem = unsafe(dir, uid);
    return problem ? { refused: `${dir} ${problem}` } : { dir };
  }
  return {};
}

/** Why `dir` must not be used, or undefined; lstat, so that a symbolic link planted there is refused. */
function unsafe(dir, uid) {
  const stat = lstatSync(dir);
  if (!stat.isDirectory()) return 'is not a directory';
  if (uid === undefined) return undefined; // Windows: no owner or mode bits to check
  if (stat.uid !== uid) return `belongs to uid ${stat.uid}, not to this user (uid ${uid})`;
  if ((stat.mode & 0o022) !== 0) return `can be written by others (mode ${(stat.mode & 0o777).toString(8)})`;
  return undefined;
}
