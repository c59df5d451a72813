// Where deliveries may go: unless private networks are allowed, only public unicast addresses, checked at registration
// and again on the addresses each connection uses, so a DNS answer changed in between (rebinding) cannot slip through.
import { lookup as dnsLookup } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Agent } from 'undici';

const NOT_PUBLIC = 'a loopback, private, link-local or reserved address';

export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed.range() === 'unicast';
  const embedded = embeddedIPv4(parsed as ipaddr.IPv6);
  if (embedded) return embedded.every((ipv4) => ipv4.range() === 'unicast');
  return parsed.range() === 'unicast';
}

// An IPv6 address embedding IPv4 ones reaches them (kernel, NAT64, tunnel), so it is judged by all it may embed;
// ISATAP is left out: its IPv4 address is used only inside the site its routable prefix leads to.
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4[] | undefined {
  const bytes = address.toByteArray();
  const at = (...indexes: number[]) => new ipaddr.IPv4(indexes.map((index) => bytes[index]!));
  const last32 = at(12, 13, 14, 15);
  const startsWith = (prefix: string, length: number) => address.match(ipaddr.IPv6.parse(prefix), length);
  // IPv4-compatible (deprecated: ::127.0.0.1 is ::7f00:1), -mapped, -translated (SIIT, RFC 6145), NAT64 (RFC 6052)
  if (['::', '::ffff:0:0', '::ffff:0:0:0', '64:ff9b::'].some((prefix) => startsWith(prefix, 96))) return [last32];
  // NAT64, local-use prefix (RFC 8215): RFC 6052 places the IPv4 address by prefix length, so every reading counts.
  if (startsWith('64:ff9b:1::', 48)) return [at(6, 7, 9, 10), at(7, 9, 10, 11), at(9, 10, 11, 12), last32];
  if (startsWith('2002::', 16)) return [at(2, 3, 4, 5)]; // 6to4: 2002:AABB:CCDD::/48
  // Teredo: the server's address, then the client's, stored inverted in the last 32 bits.
  if (startsWith('2001::', 32)) return [at(4, 5, 6, 7), new ipaddr.IPv4([...bytes.slice(12)].map((byte) => byte ^ 0xff))];
  return undefined;
}

/** Why the URL may not be a target, or undefined when it may. */
export async function targetProblem(url: string, allowPrivateNetworks: boolean): Promise<string | undefined> {
  const parsed = URL.parse(url);
  if (parsed === null) return 'is not an absolute URL';
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'must use http or https';
  if (parsed.username || parsed.password) return 'must not carry credentials';
  if (allowPrivateNetworks) return undefined;
  const addresses = await lookup(hostOf(parsed), { all: true }).catch(() => undefined);
  if (addresses === undefined) return `has a host name that does not resolve (${parsed.hostname})`;
  // Which address, it does not say: the answer would turn the check into a lookup service for internal names.
  return addresses.every((entry) => isPublicAddress(entry.address)) ? undefined : `resolves to ${NOT_PUBLIC}`;
}

/** An undici dispatcher whose every connection re-checks the addresses it is about to use. */
export async function guardedAgent(allowPrivateNetworks: boolean, timeoutMs: number): Promise<Agent> {
  const { Agent } = await import('undici');
  // The attempt's AbortSignal bounds the rest; undici's own connect limit (10 s) would cut a longer one short.
  return new Agent({ connect: { timeout: timeoutMs, ...(!allowPrivateNetworks && { lookup: publicOnlyLookup }) } });
}

/** Literal IP hosts never reach a lookup function, so they are checked before sending. */
export function literalHostProblem(url: URL, allowPrivateNetworks: boolean): string | undefined {
  const host = hostOf(url);
  if (allowPrivateNetworks || isIP(host) === 0 || isPublicAddress(host)) return undefined;
  return `${host} is ${NOT_PUBLIC}`;
}

const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    if (!addresses.every((entry) => isPublicAddress(entry.address))) {
      return callback(new Error(`${hostname} resolves to ${NOT_PUBLIC}, which webhooks may not reach`), []);
    }
    if (options.all) return callback(null, addresses);
    callback(null, addresses[0]!.address, addresses[0]!.family);
  });
};

// URL keeps the brackets of an IPv6 literal: [::1] -> ::1.
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}
