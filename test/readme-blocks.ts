// The README's code examples, read back so a test can check them against the files it runs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './harness/paths.ts';

export const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');

/** The text of the first ```lang block after the first line of README.md that starts with `marker`. */
export function readmeBlock(marker: string, lang: string): string {
  const at = README.indexOf(`\n${marker}`);
  if (at < 0) throw new Error(`README.md has no line starting with ${JSON.stringify(marker)}`);
  const block = new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, 'm').exec(README.slice(at));
  if (!block) throw new Error(`README.md has no \`\`\`${lang} block after ${JSON.stringify(marker)}`);
  return block[1]!;
}

export function example(name: string): string {
  return readFileSync(join(REPO_ROOT, 'test', 'examples', name), 'utf8');
}
