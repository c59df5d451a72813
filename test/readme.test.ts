// README.md and docs/ stand on their own in a clone: every link lands on a file of the repository
// (or a heading of the same page), and no path the README names leaves the repository.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from './harness/paths.ts';

/** Every link target of a Markdown text: inline links and images, reference definitions, autolinks. */
function markdownLinks(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
  const inline = [...prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => match[1]!);
  const definitions = [...prose.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map((match) => match[1]!);
  const autolinks = [...prose.matchAll(/<([a-z][a-z0-9+.-]*:[^>\s]+)>/gi)].map((match) => match[1]!);
  return [...inline, ...definitions, ...autolinks];
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchor(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** What is wrong with a link target found in `file`; undefined when it lands inside the repository. */
function linkProblem(root: string, file: string, markdown: string, target: string): string | undefined {
  if (/^https?:\/\//i.test(target)) return undefined; // a public web page, not a file of someone's disk
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return `${target}: only http(s) links and paths inside the repository work in a clone`;
  const [path, fragment] = target.split('#') as [string, string | undefined];
  if (path === '') {
    const headings = [...markdown.matchAll(/^#{1,6}\s+(.+)$/gm)].map((match) => anchor(match[1]!));
    return headings.includes(decodeURIComponent(fragment ?? '')) ? undefined : `${target}: no such heading`;
  }
  const absolute = resolve(root, dirname(file), decodeURIComponent(path));
  if (path.startsWith('/') || relative(root, absolute).startsWith('..')) return `${target}: leaves the repository`;
  if (!existsSync(absolute)) return `${target}: no such file in the repository`;
  return undefined;
}

t.test('every link of README.md stays in the repository and lands on something', async (t) => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const links = markdownLinks(readme);
  t.ok(links.includes('docs/architecture.md'), 'README links the architecture notes');
  t.same(links.map((link) => linkProblem(REPO_ROOT, 'README.md', readme, link)).filter(Boolean), []);
});

t.test('every link of docs/*.md stays in the repository and lands on something', async (t) => {
  for (const file of readdirSync(join(REPO_ROOT, 'docs')).filter((name) => name.endsWith('.md'))) {
    const markdown = readFileSync(join(REPO_ROOT, 'docs', file), 'utf8');
    const problems = markdownLinks(markdown).map((link) => linkProblem(REPO_ROOT, `docs/${file}`, markdown, link));
    t.same(problems.filter(Boolean), [], `docs/${file}`);
  }
});

t.test('README.md names no path outside the repository, even as plain text', async (t) => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  t.same(readme.match(/(?<![\w.])\.\.\/\S*/g) ?? [], []);
});

t.test('the link check refuses what it should', async (t) => {
  const markdown = '# Tokens and scopes\n';
  t.equal(linkProblem(REPO_ROOT, 'README.md', markdown, '../shared/DESIGN.md'), '../shared/DESIGN.md: leaves the repository');
  t.equal(linkProblem(REPO_ROOT, 'README.md', markdown, '/etc/passwd'), '/etc/passwd: leaves the repository');
  t.equal(linkProblem(REPO_ROOT, 'README.md', markdown, 'docs/nothing.md'), 'docs/nothing.md: no such file in the repository');
  t.equal(linkProblem(REPO_ROOT, 'README.md', markdown, 'file:///work/x'), 'file:///work/x: only http(s) links and paths inside the repository work in a clone');
  t.equal(linkProblem(REPO_ROOT, 'README.md', markdown, '#tokens-and-scopes'), undefined);
  t.equal(linkProblem(REPO_ROOT, 'README.md', markdown, '#nowhere'), '#nowhere: no such heading');
  t.equal(linkProblem(REPO_ROOT, 'README.md', markdown, 'openapi.yaml'), undefined);
  t.same(markdownLinks('[a](x.md) ![b](img/y.png "title") <https://e.org> `[d](../code)`\n[c]: ../w.md\n'), ['x.md', 'img/y.png', '../w.md', 'https://e.org']);
});
