// npm run dev: the server, restarted at once on every change to src/ or openapi.yaml, with the types
// regenerated from openapi.yaml before the restart.
// Node's watch mode watches src/ only; a change to openapi.yaml reaches it through the types this
// script writes into src/generated/, so the server never restarts ahead of the regeneration.
// A spec that does not generate leaves the running server as it was, and says why.
// After each change the type check runs beside the restarted server (after rebuilding the client
// package when the spec changed, since the tests import its build): its lines start `typecheck:`,
// each check ends with `typecheck: no errors` or a count, and the restart never waits for it.
import { spawn } from 'node:child_process';
import { watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { buildClient, renderGenerated, SPEC_URL, writeGenerated } from '../contract/openapi-types.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

// The openapi.yaml text the types were last generated from.
let generatedFrom: string | undefined;

async function regenerate(): Promise<void> {
  try {
    const text = await readFile(SPEC_URL, 'utf8');
    // One save often raises two watch events (truncate, write): the second finds nothing new, and
    // writing the types again would restart the server a second time.
    if (text === generatedFrom) return;
    const generated = await renderGenerated(text);
    // Said before the write that restarts the server, so the two lines come in this order.
    console.log('dev: openapi.yaml changed; regenerated src/generated/openapi.ts, restarting');
    await writeGenerated(generated);
    generatedFrom = text;
    clientStale = true;
    check();
  } catch (error) {
    console.error(`dev: openapi.yaml does not generate types, so the server keeps running on the previous version: ${(error as Error).message}`);
  }
}

const TSC = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
let checking: AbortController | undefined;
// packages/client/src/openapi.ts was rewritten since the client package was last built.
let clientStale = false;

/** The client package rebuilt if stale, then `npm run typecheck`'s tsc; a check still running for an older state is stopped, its answer stale. */
async function check(): Promise<void> {
  checking?.abort();
  const current = new AbortController();
  checking = current;
  const lines: string[] = [];
  if (clientStale) {
    const built = await buildClient(current.signal).then(() => undefined, (error: Error) => error);
    if (current.signal.aborted) return;
    if (built) lines.push(...built.message.split('\n'));
    else clientStale = false;
  }
  const tsc = await run([TSC, '--noEmit', '--pretty', 'false'], current.signal);
  if (current.signal.aborted) return;
  lines.push(...tsc.output.trimEnd().split('\n').filter((line) => line !== ''));
  const errors = lines.filter((line) => /\): error TS\d+:/.test(line)).length;
  for (const line of lines) console.error(`typecheck: ${line}`);
  if (tsc.code === 0 && !clientStale) console.log('typecheck: no errors');
  else console.error(`typecheck: ${errors} error(s); the restart does not wait for them (docs/development.md, "Adding a field, end to end", says what a new field needs)`);
}

/** Runs Node with `args` from the repository root; answers its exit code and its output, both streams in one. */
function run(args: readonly string[], signal: AbortSignal): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], signal });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('error', () => undefined); // an abort: the caller sees the signal
    child.once('close', (code) => resolve({ code, output }));
  });
}

// One regeneration at a time; changes made during one are picked up by one more.
let regenerating: Promise<void> | undefined;
let changedAgain = false;
function onSpecChange(): void {
  if (regenerating) {
    changedAgain = true;
    return;
  }
  regenerating = (async () => {
    do {
      changedAgain = false;
      await regenerate();
    } while (changedAgain);
  })().finally(() => (regenerating = undefined));
}

const initialSpec = await readFile(SPEC_URL, 'utf8');
const initial = await renderGenerated(initialSpec);
// openapi.yaml edited while dev was not running: the client package is built again, and checked.
const stale = await Promise.all([...initial].map(async ([url, text]) => (await readFile(url, 'utf8').catch(() => '')) !== text));
await writeGenerated(initial);
generatedFrom = initialSpec;
if (stale.includes(true)) {
  clientStale = true;
  check();
}
// The folder, not the file: editors that save by renaming a new file over the old one would
// leave a watch on the file itself looking at the replaced copy.
const specName = fileURLToPath(SPEC_URL).slice(ROOT.length);
const specWatcher = watch(ROOT, (_event, filename) => {
  if (filename === specName) onSpecChange();
});
// src/generated/ is written by the regeneration, which runs its own check.
const sourceWatcher = watch(`${ROOT}src`, { recursive: true }, (_event, filename) => {
  if (filename !== null && !filename.startsWith('generated/')) check();
});

// Node's watch mode stops the old server with SIGTERM unless told otherwise, and on SIGTERM the server
// drains for SHUTDOWN_DELAY, as an orchestrator needs; on SIGINT (Ctrl-C) it stops at once.
const server = spawn(process.execPath, ['--watch-path=src', '--watch-kill-signal=SIGINT', '--watch-preserve-output', 'src/entry.js'], { cwd: ROOT, stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => server.kill(signal));
server.on('exit', (code, signal) => {
  specWatcher.close();
  sourceWatcher.close();
  checking?.abort();
  process.exitCode = code ?? (signal ? 1 : 0);
});
