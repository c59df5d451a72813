// npm run dev: the server, restarted on every change to src/ or openapi.yaml, with the types
// regenerated from openapi.yaml before the restart.
// Node's watch mode watches src/ only; a change to openapi.yaml reaches it through the types this
// script writes into src/generated/, so the server never restarts ahead of the regeneration.
// A spec that does not generate leaves the running server as it was, and says why.
// After each regeneration the project's type check runs beside the restarted server: its errors
// (lines starting `typecheck:`) name the places a new field must reach, without holding the restart up.
import { spawn } from 'node:child_process';
import { watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { renderGenerated, SPEC_URL, writeGenerated } from '../contract/openapi-types.ts';

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
    typecheck();
  } catch (error) {
    console.error(`dev: openapi.yaml does not generate types, so the server keeps running on the previous version: ${(error as Error).message}`);
  }
}

const TSC = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
let checking: ReturnType<typeof spawn> | undefined;

/** `npm run typecheck`, its lines prefixed; a check still running for an older spec is stopped, its answer stale. */
function typecheck(): void {
  checking?.kill();
  const tsc = spawn(process.execPath, [TSC, '--noEmit', '--pretty', 'false'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  checking = tsc;
  let output = '';
  tsc.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  tsc.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  tsc.on('close', (code, signal) => {
    if (checking === tsc) checking = undefined;
    if (signal) return;
    const lines = output.trimEnd().split('\n').filter((line) => line !== '');
    const errors = lines.filter((line) => /\): error TS\d+:/.test(line)).length;
    for (const line of lines) console.error(`typecheck: ${line}`);
    if (code === 0) console.log('typecheck: no errors');
    else console.error(`typecheck: ${errors} error(s); the restart does not wait for them (docs/development.md, "Adding a field, end to end", says what a new field needs)`);
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
await writeGenerated(await renderGenerated(initialSpec));
generatedFrom = initialSpec;
// The folder, not the file: editors that save by renaming a new file over the old one would
// leave a watch on the file itself looking at the replaced copy.
const specName = fileURLToPath(SPEC_URL).slice(ROOT.length);
const specWatcher = watch(ROOT, (_event, filename) => {
  if (filename === specName) onSpecChange();
});

const server = spawn(process.execPath, ['--watch-path=src', '--watch-preserve-output', 'src/entry.js'], { cwd: ROOT, stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => server.kill(signal));
server.on('exit', (code, signal) => {
  specWatcher.close();
  checking?.kill();
  process.exitCode = code ?? (signal ? 1 : 0);
});
