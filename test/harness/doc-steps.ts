// A worked example of docs/ followed as a reader follows it: each snippet, read from the page, put
// where the page says in a scratch copy of the repository (test/harness/scratch.ts).
import { readFileSync, writeFileSync } from 'node:fs';
import type { Test } from 'tap';
import { docBlock } from './readme-blocks.ts';

/** The snippets of `page` (of its `section`, a heading): the first block of `lang` after the line that starts with `marker`. */
export function snippetsOf(page: string, section?: string): (marker: string, lang: string) => string {
  return (marker, lang) => docBlock(page, marker, lang, section).trimEnd();
}

/** The index of the one line of `lines` that `anchor` matches (a failed assertion when there is not exactly one). */
function lineMatching(t: Test, file: string, lines: string[], anchor: RegExp): number {
  const at = lines.flatMap((text, index) => (anchor.test(text) ? [index] : []));
  t.equal(at.length, 1, `${file} has one line matching ${anchor}, for the snippet to go by`);
  return at[0] ?? -1;
}

/** Replaces the one line of `file` that declares what the one-line snippet declares (`export const NAME`). */
export function replaceDeclaration(t: Test, file: string, line: string): void {
  const declares = /^export const \w+/.exec(line)?.[0];
  t.ok(declares && !line.includes('\n'), `the snippet is one declaration: ${line}`);
  const lines = readFileSync(file, 'utf8').split('\n');
  lines[lineMatching(t, file, lines, new RegExp(`^${declares}[: ]`))] = line;
  writeFileSync(file, lines.join('\n'));
}

/**
 * Where a snippet goes by the line a page names: right after it, first inside the block it opens, or
 * after the end of that block (its closing brace at the line's indentation), set apart by a blank line.
 */
export type Placement = 'after the line' | 'inside its block' | 'after its block';

/** Puts `snippet` into `file` at `placement` by the one line `anchor` matches, indented as the code there. */
export function placeSnippet(t: Test, file: string, anchor: RegExp, placement: Placement, snippet: string): void {
  const lines = readFileSync(file, 'utf8').split('\n');
  const line = lineMatching(t, file, lines, anchor);
  const indent = /^ */.exec(lines[line] ?? '')![0];
  const inner = placement === 'inside its block' ? `${indent}  ` : indent;
  const added = snippet.split('\n').map((text) => (text === '' ? '' : inner + text));
  if (placement !== 'after its block') {
    lines.splice(line + 1, 0, ...added);
  } else {
    const end = lines.findIndex((text, index) => index > line && text.startsWith(`${indent}}`));
    t.ok(end > line, `${file}: the block opened by ${anchor} ends`);
    lines.splice(end + 1, 0, '', ...added);
  }
  writeFileSync(file, lines.join('\n'));
}
