// README.md and docs/ stand on their own in a clone: every link lands on a file of the repository
// (or a heading of the page it names), and no path the README names leaves the repository. The
// README stays a front door: short, with the two commands, links to every page of docs/, and a
// configuration table that, like .env.example, names every variable src/config.ts reads.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import { ENVIRONMENT, loadConfig } from '../src/config.ts';
import { REPO_ROOT } from './harness/paths.ts';
import { readmeBlock } from './harness/readme-blocks.ts';

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
  if (path === '') return headingsOf(markdown).includes(decodeURIComponent(fragment ?? '')) ? undefined : `${target}: no such heading`;
  const absolute = resolve(root, dirname(file), decodeURIComponent(path));
  if (path.startsWith('/') || relative(root, absolute).startsWith('..')) return `${target}: leaves the repository`;
  if (!existsSync(absolute)) return `${target}: no such file in the repository`;
  if (fragment !== undefined && absolute.endsWith('.md') && !headingsOf(readFileSync(absolute, 'utf8')).includes(decodeURIComponent(fragment))) {
    return `${target}: no such heading`;
  }
  return undefined;
}

function headingsOf(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '');
  return [...prose.matchAll(/^#{1,6}\s+(.+)$/gm)].map((match) => anchor(match[1]!));
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

t.test("the client package's README links only public web pages: it ships in the tarball, away from the repository", async (t) => {
  const markdown = readFileSync(join(REPO_ROOT, 'packages', 'client', 'README.md'), 'utf8');
  const links = markdownLinks(markdown);
  t.ok(links.length > 0, 'it has links');
  t.same(links.filter((link) => !/^https:\/\//.test(link)), []);
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
  t.equal(linkProblem(REPO_ROOT, 'README.md', markdown, 'docs/operations.md#tokens-and-scopes'), undefined);
  t.equal(linkProblem(REPO_ROOT, 'README.md', markdown, 'docs/operations.md#nowhere'), 'docs/operations.md#nowhere: no such heading');
  t.equal(linkProblem(REPO_ROOT, 'docs/webhooks.md', markdown, '../README.md#configuration'), undefined);
  t.same(markdownLinks('[a](x.md) ![b](img/y.png "title") <https://e.org> `[d](../code)`\n[c]: ../w.md\n'), ['x.md', 'img/y.png', '../w.md', 'https://e.org']);
});

t.test('README.md is a front door: short, the two commands, a link to every page of docs/', async (t) => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  t.ok(readme.split('\n').length <= 250, `README.md has ${readme.split('\n').length} lines; depth belongs in docs/`);
  const commands = readmeBlock('## The two commands', 'sh');
  t.match(commands, /^npm ci && npm start\b/m, 'serve, with no configuration');
  t.match(commands, /^npm test\b/m, 'run every test');
  const links = markdownLinks(readme);
  const pages = readdirSync(join(REPO_ROOT, 'docs')).filter((name) => name.endsWith('.md'));
  t.same(pages.filter((name) => !links.includes(`docs/${name}`)), [], 'every page of docs/ is linked');
});

/** The variables src/config.ts validates, with their defaults (undefined: none), read from its schema. */
function configVariables(): Map<string, string | undefined> {
  const declarations: [string, Record<string, unknown>][] = Object.entries(ENVIRONMENT.properties);
  return new Map(declarations.map(([name, declared]) => [name, declared.default === undefined ? undefined : String(declared.default)]));
}

/** README's configuration table: each variable it names, with the text of its Default cell. */
function readmeConfigTable(): Map<string, string> {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Configuration\n'));
  const table = /^\| Variable \| Default \|[^\n]*\n\|[-| ]+\|\n((?:\|[^\n]*\n)+)/m.exec(section)?.[1] ?? '';
  const rows = table.trimEnd().split('\n').map((row) => row.split(' | '));
  return new Map(rows.flatMap(([names = '', defaults = '']) => [...names.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((name) => [name[1]!, defaults])));
}

/** The KEY=value lines of .env.example. */
function envExample(): Map<string, string> {
  const text = readFileSync(join(REPO_ROOT, '.env.example'), 'utf8');
  return new Map([...text.matchAll(/^([A-Z][A-Z0-9_]*)=(.*)$/gm)].map((match) => [match[1]!, match[2]!]));
}

t.test("README's configuration table names every variable src/config.ts reads, with its default", async (t) => {
  const variables = configVariables();
  t.ok(variables.size >= 30, `the schema of src/config.ts was read (${variables.size} variables)`);
  const table = readmeConfigTable();
  t.same([...variables.keys()].filter((name) => !table.has(name)), [], 'no variable missing from the table');
  for (const [name, value] of variables) {
    const shown = value === '' ? '(none)' : `\`${value}\``; // an empty default means the variable is unset
    if (value !== undefined) t.ok(table.get(name)?.includes(shown), `${name}: the table gives its default ${shown}`);
  }
});

t.test('each variable src/config.ts reads is declared once, with its meaning', async (t) => {
  const undescribed = Object.entries(ENVIRONMENT.properties).filter(([, declared]) => !declared.description);
  t.same(undescribed.map(([name]) => name), [], 'every declaration says what the variable means');
});

t.test('.env.example names exactly the variables src/config.ts reads, set to their defaults', async (t) => {
  const variables = configVariables();
  const example = envExample();
  t.same([...example.keys()].sort(), [...variables.keys()].sort());
  t.same(loadConfig(Object.fromEntries(example)), loadConfig({}), 'loading it changes nothing');
});
