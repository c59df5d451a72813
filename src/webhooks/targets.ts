// Where deliveries may go. Unless the operator allows private networks, a target must resolve
// only to public unicast addresses: never loopback, private, link-local (cloud metadata at
// 169.254.169.254 included), unique-local, CGNAT, multicast or reserved ranges. The check runs
// at registration and again at every connection, on the addresses the connection will use, so a
// DNS answer that changes in between (rebinding) cannot slip through.
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Agent } from 'undici';

export class ForbiddenTargetError extends Error {}

export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  // process() turns ::ffff:10.0.0.1 into 10.0.0.1, so mapped addresses are judged as what they are.
  return ipaddr.process(address).range() === 'unicast';
}

/** Why the URL may not be a target, or undefined when it may. */
export async function targetProblem(url: string, allowPrivateNetworks: boolean): Promise<string | undefined> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'is not an absolute URL';
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'must use http or https';
  if (parsed.username || parsed.password) return 'must not carry credentials';
  if (allowPrivateNetworks) return undefined;
  let addresses: string[];
  try {
    addresses = await resolve(hostOf(parsed));
  } catch {
    return `has a host name that does not resolve (${parsed.hostname})`;
  }
  const forbidden = addresses.find((address) => !isPublicAddress(address));
  return forbidden && `resolves to ${forbidden}, a loopback, private, link-local or reserved address`;
}

/** An undici dispatcher whose every connection re-checks the addresses it is about to use. */
export async function guardedAgent(allowPrivateNetworks: boolean, timeoutMs: number): Promise<Agent> {
  const { Agent } = await import('undici');
  return new Agent({
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connect: {
      timeout: timeoutMs,
      ...(!allowPrivateNetworks && { lookup: publicOnlyLookup }),
    },
  });
}

/** Literal IP hosts never reach a lookup function, so they are checked before sending. */
export function literalHostProblem(url: URL, allowPrivateNetworks: boolean): string | undefined {
  const host = hostOf(url);
  if (allowPrivateNetworks || isIP(host) === 0 || isPublicAddress(host)) return undefined;
  return `${host} is a loopback, private, link-local or reserved address`;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

function publicOnlyLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const forbidden = addresses.find((entry) => !isPublicAddress(entry.address));
    if (forbidden) {
      return callback(new ForbiddenTargetError(`${hostname} resolves to ${forbidden.address}, which webhooks may not reach`), []);
    }
    if (options.all) return callback(null, addresses);
    callback(null, addresses[0]!.address, addresses[0]!.family);
  });
}

function resolve(host: string): Promise<string[]> {
  if (isIP(host) !== 0) return Promise.resolve([host]);
  return new Promise((done, fail) =>
    dnsLookup(host, { all: true }, (error, addresses) => (error ? fail(error) : done(addresses.map((entry) => entry.address)))),
  );
}

// URL keeps the brackets of an IPv6 literal: [::1] -> ::1.
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}
