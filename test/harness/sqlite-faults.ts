// Real SQLite faults for tests and the chaos script: another process holding the write lock, and a full disk.
// holdWriteLock() starts a separate node process (node:sqlite) that takes BEGIN IMMEDIATE on the file and keeps it
// until released. smallDisk() mounts a tmpfs of a given size (needs root and mount(8)) that can be filled to the
// last page. Everything started here is ended on release()/destroy(), and again at process exit if a caller forgot;
// a lock holder also exits by itself when its parent dies (its stdin closes).
import { spawn, execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, open, rm, rmdir, statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface LockHolder {
  /** The holder's process id (for a chaos table or a log line). */
  readonly pid: number;
  /** Rolls the holder's transaction back, closes its connection and waits for it to exit. */
  release(): Promise<void>;
}

export interface SmallDisk {
  /** The mount point: put the database file here. */
  readonly dir: string;
  /** Fills the remaining space with a filler file, until the filesystem answers ENOSPC. */
  fill(): Promise<void>;
  /** Deletes the filler file, giving its space back. */
  free(): Promise<void>;
  /** Bytes still available to an ordinary writer. */
  available(): Promise<number>;
  /** Unmounts and removes the mount point (files on it are lost). Stop processes using it first. */
  destroy(): Promise<void>;
}

// The holder: its own busy_timeout lets it wait out a commit the service has in flight; it then reports "locked"
// and keeps the transaction open until told to release (a line on stdin) or until its parent is gone (stdin ends).
const HOLDER = `
const { DatabaseSync } = require('node:sqlite');
const db = new DatabaseSync(process.argv[1]);
db.exec('PRAGMA busy_timeout = 30000');
db.exec('BEGIN IMMEDIATE');
process.stdout.write('locked\\n');
const release = () => { db.exec('ROLLBACK'); db.close(); process.exit(0); };
process.stdin.on('data', release);
process.stdin.on('end', release);
`;

const liveHolders = new Set<ChildProcess>();
const liveMounts = new Set<string>();
let exitHookInstalled = false;

function cleanUpAtExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of liveHolders) child.kill('SIGKILL');
    for (const dir of liveMounts) {
      try {
        execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
      } catch {
        // Nothing more can be done synchronously at exit; the mount point is named in the test's temp dir.
      }
    }
  });
}

/** Resolves once a separate process holds the write lock (BEGIN IMMEDIATE) on dbPath. */
export async function holdWriteLock(dbPath: string): Promise<LockHolder> {
  cleanUpAtExit();
  const child = spawn(process.execPath, ['--no-warnings', '-e', HOLDER, dbPath], { stdio: ['pipe', 'pipe', 'pipe'] });
  liveHolders.add(child);
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once('close', () => {
    liveHolders.delete(child);
    resolve();
  }));
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => chunk.includes('locked') && resolve());
    exited.then(() => reject(new Error(`the lock holder exited before taking the lock: ${stderr.trim()}`)));
  });
  return {
    pid: child.pid!,
    release: async () => {
      if (child.exitCode === null && child.signalCode === null) child.stdin!.end('release\n');
      await exited;
    },
  };
}

/** Why smallDisk() cannot work on this machine, or undefined when it can (mounting a tmpfs needs root). */
export async function smallDiskSkipReason(): Promise<string | undefined> {
  try {
    const disk = await smallDisk(64 * 1024);
    await disk.destroy();
    return undefined;
  } catch (error) {
    return `cannot mount a small tmpfs here (${(error as Error).message.split('\n')[0]})`;
  }
}

/** Mounts a tmpfs of sizeBytes (rounded up to pages by the kernel) on a fresh temporary directory. */
export async function smallDisk(sizeBytes: number): Promise<SmallDisk> {
  cleanUpAtExit();
  const dir = await mkdtemp(join(tmpdir(), 'plant-store-small-disk-'));
  try {
    await run('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes},mode=0700`, 'tmpfs', dir]);
  } catch (error) {
    await rmdir(dir);
    throw error;
  }
  liveMounts.add(dir);
  const filler = join(dir, '.filler');
  return {
    dir,
    fill: () => fillUp(filler),
    free: () => rm(filler, { force: true }),
    available: async () => {
      const stats = await statfs(dir);
      return stats.bavail * stats.bsize;
    },
    destroy: async () => {
      if (!liveMounts.has(dir)) return;
      // Lazy: a process killed a moment ago may still hold a descriptor; the mount goes once it closes.
      await run('umount', ['-l', dir]);
      liveMounts.delete(dir);
      await rmdir(dir);
    },
  };
}

/** Appends to the filler file in shrinking chunks until not even one byte fits. */
async function fillUp(path: string): Promise<void> {
  const file = await open(path, 'a');
  try {
    for (let chunk = 1024 * 1024; chunk >= 1; chunk = Math.floor(chunk / 16)) {
      const buffer = Buffer.alloc(chunk, 0x2e);
      while (await writeAll(file, buffer));
    }
  } finally {
    await file.close();
  }
}

/** Writes the buffer; false once the filesystem is full. */
async function writeAll(file: Awaited<ReturnType<typeof open>>, buffer: Buffer): Promise<boolean> {
  try {
    const { bytesWritten } = await file.write(buffer);
    return bytesWritten === buffer.length;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOSPC') return false;
    throw error;
  }
}
