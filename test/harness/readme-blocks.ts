// The code examples of README.md and docs/, read back so a test can check them against the files it runs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.ts';

/** A Markdown file of the repository, by its path from the root (README.md, packages/client/README.md). */
export function markdownFile(path: string): string {
  return readFileSync(join(REPO_ROOT, path), 'utf8');
}

export const README = markdownFile('README.md');

/**
 * The text of the first ```lang block after the first line of `path` that starts with `marker`
 * (after its indentation, for steps of a list), or the first such line after the heading `section`;
 * a block indented inside a list item comes dedented.
 */
export function docBlock(path: string, marker: string, lang: string, section?: string): string {
  const page = markdownFile(path);
  const start = section === undefined ? 0 : page.indexOf(`\n${section}\n`);
  if (start < 0) throw new Error(`${path} has no heading ${JSON.stringify(section)}`);
  const text = page.slice(start);
  const at = new RegExp(`\\n *${marker.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`).exec(text)?.index ?? -1;
  if (at < 0) throw new Error(`${path} has no line starting with ${JSON.stringify(marker)}`);
  const block = new RegExp(`^( *)\`\`\`${lang}\\n([\\s\\S]*?)^\\1\`\`\`$`, 'm').exec(text.slice(at));
  if (!block) throw new Error(`${path} has no \`\`\`${lang} block after ${JSON.stringify(marker)}`);
  const indent = block[1]!;
  return block[2]!.split('\n').map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line)).join('\n');
}

/** docBlock of README.md. */
export function readmeBlock(marker: string, lang: string): string {
  return docBlock('README.md', marker, lang);
}

export function example(name: string): string {
  return readFileSync(join(REPO_ROOT, 'test', 'examples', name), 'utf8');
}
