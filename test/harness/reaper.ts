// Whatever a test starts dies with the test process, however that ends: tap ends a file that outlives
// its timeout with SIGALRM, then SIGKILL, and then no teardown runs. One reaper per test process,
// started on first use, learns through a pipe on its stdin what to clean up and what is done with;
// when the pipe closes (the test process is gone, whichever way), it kills the processes and process
// groups still on its list, runs the commands and removes the directories, then exits.
// It writes to the test process's stderr, one line per thing it had to clean up, and holds that
// stream open until it is done: whoever reads the test's output sees it end only after the cleanup.
import { spawn, type ChildProcess } from 'node:child_process';

/** A process, a process group (`kill -9 -group`: a balancer's workers, npm's shell and Node), a command to run, a directory to remove. */
export type Reapable = { pid: number } | { group: number } | { command: readonly string[] } | { dir: string };

// CommonJS, as `node -e` reads it. Kills first, then commands (`podman rm -f`), then directories. It
// exits once what it killed is dead (SIGKILL is delivered, not awaited: a process in the middle of a
// disk write dies after it); a zombie, dead but not reaped by an init that may never reap it, counts.
const REAPER = `
const { spawnSync } = require('node:child_process');
const { readdirSync, readFileSync, rmSync } = require('node:fs');
const items = new Map();
let pending = '';
process.stdin.setEncoding('utf8').on('data', (chunk) => {
  pending += chunk;
  for (let end = pending.indexOf('\\n'); end >= 0; end = pending.indexOf('\\n')) {
    const line = pending.slice(0, end);
    pending = pending.slice(end + 1);
    if (line[0] === '+') items.set(line.slice(1), JSON.parse(line.slice(1)));
    else items.delete(line.slice(1));
  }
});
// [state, pgrp] of a process, or undefined once it is gone.
const stat = (pid) => {
  try {
    const fields = readFileSync('/proc/' + pid + '/stat', 'utf8').split(') ')[1].split(' ');
    return [fields[0], Number(fields[2])];
  } catch {
    return undefined;
  }
};
const alive = (item) => {
  if ('pid' in item) return (stat(item.pid) ?? ['Z'])[0] !== 'Z';
  return readdirSync('/proc').some((entry) => /^[0-9]+$/.test(entry) && stat(entry)?.[0] !== 'Z' && stat(entry)?.[1] === item.group);
};
process.stdin.on('end', () => {
  const rank = (item) => ('command' in item ? 1 : 'dir' in item ? 2 : 0);
  const killed = [];
  // Within a kind, the last registered first, as teardowns run: a container before its volume.
  for (const item of [...items.values()].reverse().sort((a, b) => rank(a) - rank(b))) {
    try {
      if ('group' in item) process.kill(-item.group, 'SIGKILL');
      else if ('pid' in item) process.kill(item.pid, 'SIGKILL');
      else if ('command' in item) spawnSync(item.command[0], item.command.slice(1), { stdio: 'ignore', timeout: 60000 });
      else rmSync(item.dir, { recursive: true, force: true });
      if ('group' in item || 'pid' in item) killed.push(item);
      process.stderr.write('reaper: test process ' + process.argv[1] + ' ended before its teardown; cleaned up ' + JSON.stringify(item) + '\\n');
    } catch {
      // Gone already.
    }
  }
  // No exit event for processes that are not its children: /proc is looked at until they are dead, for 10 s at most.
  const deadline = Date.now() + 10000;
  const wait = () => (killed.some(alive) && Date.now() < deadline ? setTimeout(wait, 20) : undefined);
  wait();
});
`;

let reaper: ChildProcess | undefined;

function started(): ChildProcess {
  if (reaper) return reaper;
  // Without the test runner's loaders and coverage: the reaper is no part of what is tested.
  const { NODE_OPTIONS: _options, NODE_V8_COVERAGE: _coverage, ...env } = process.env;
  // A process group of its own, so that Ctrl-C on the test run does not end it before its work.
  reaper = spawn(process.execPath, ['-e', REAPER, String(process.pid)], { stdio: ['pipe', 'ignore', 'inherit'], detached: true, env });
  reaper.unref();
  reaper.stdin!.on('error', () => undefined); // a reaper gone early: what it would do, the teardowns do
  (reaper.stdin as unknown as { unref(): void }).unref(); // it must not keep this process alive
  return reaper;
}

/** Puts `item` on the reaper's list; the answer takes it off again, once the test has cleaned it up itself. */
export function reapWithThisProcess(item: Reapable): () => void {
  const line = JSON.stringify(item);
  const stdin = started().stdin!;
  stdin.write(`+${line}\n`);
  return () => {
    if (stdin.writable) stdin.write(`-${line}\n`);
  };
}

/** reapWithThisProcess for a child just spawned (its whole group, when it leads one); nothing for a spawn that failed. */
export function reapChild(child: ChildProcess, { group = false } = {}): () => void {
  if (child.pid === undefined) return () => undefined;
  return reapWithThisProcess(group ? { group: child.pid } : { pid: child.pid });
}
