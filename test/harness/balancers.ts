// Real load balancers from Debian (HAProxy, nginx) in front of the service, configured with README's
// blocks: found on PATH or installed with apt-get; each runs in the foreground on a port of its own
// and is stopped, by its own pid, when the test ends; in a process group of its own, which the
// reaper kills whole (nginx's workers too) if the test process ends first.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Teardown } from './process.ts';
import { freePort } from './ports.ts';
import { reapChild } from './reaper.ts';
import { aptInstall, onPath } from './system-packages.ts';

export type BalancerName = 'haproxy' | 'nginx';

/** README's blocks name these instance addresses and this listening port; the tests put theirs in. */
export const README_INSTANCES = ['10.0.0.1:3000', '10.0.0.2:3000', '10.0.0.3:3000'] as const;
export const README_LISTEN: Record<BalancerName, RegExp> = { haproxy: /^(\s*bind) :8080$/m, nginx: /^(\s*listen) 8080;$/m };

/** The balancer's program, installed from Debian when missing; else why it cannot be had, in one line. */
export function balancerProgram(name: BalancerName): { path: string } | { missing: string } {
  const found = () => onPath(name)[0];
  const path = found() ?? (aptInstall([name]) === undefined ? found() : undefined);
  return path ? { path } : { missing: `${name} is not installed and apt-get could not install it` };
}

/** README's block with each placeholder replaced exactly once: the instances' ports, the balancer's own port. */
export function withAddresses(name: BalancerName, block: string, instancePorts: readonly number[], listenPort: number): string {
  let text = block;
  README_INSTANCES.forEach((address, i) => {
    if (text.split(address).length !== 2) throw new Error(`README's ${name} block must name ${address} exactly once`);
    text = text.replace(address, `127.0.0.1:${instancePorts[i]}`);
  });
  if (!README_LISTEN[name].test(text)) throw new Error(`README's ${name} block must listen on port 8080 (${README_LISTEN[name]})`);
  return text.replace(README_LISTEN[name], name === 'haproxy' ? `$1 127.0.0.1:${listenPort}` : `$1 127.0.0.1:${listenPort};`);
}

export interface Balancer {
  url: string;
  /** The balancer's process, which leads a process group of its own (nginx's workers are in it). */
  pid: number;
  /** Everything it wrote on stderr so far (HAProxy's server state changes, nginx's upstream errors). */
  log: () => string;
}

/** Starts the balancer in the foreground with README's block (placeholders replaced); resolves once it answers. */
export async function startBalancer(t: Teardown, name: BalancerName, program: string, dir: string, block: string, instancePorts: readonly number[]): Promise<Balancer> {
  const port = await freePort();
  const config = withAddresses(name, block, instancePorts, port);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.conf`);
  writeFileSync(file, name === 'haproxy' ? config : nginxMain(dir, config));
  const args = name === 'haproxy' ? ['-db', '-f', file] : ['-p', dir, '-c', file];
  const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const forget = reapChild(child, { group: true });
  let log = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  exited.then(forget);
  // SIGTERM, not SIGKILL: nginx's master then stops its workers instead of orphaning them.
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  });
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited at start: ${log}`);
    const answered = await fetch(`${url}/healthz`).then((response) => response.status === 200, () => false);
    if (answered) return { url, pid: child.pid!, log: () => log };
  }
}

/** The main context nginx needs around README's block (which goes inside `http { }`), all in `dir`. */
function nginxMain(dir: string, httpBlock: string): string {
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((kind) => `    ${kind}_temp_path ${join(dir, kind)};`).join('\n');
  return `daemon off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log stderr warn;
events { worker_connections 4096; }
http {
    access_log off;
${temp}
${httpBlock}
}
`;
}
