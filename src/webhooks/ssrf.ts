// SSRF guard: a webhook must not reach Beacon's own network. Only public unicast addresses are allowed
// unless BEACON_WEBHOOK_ALLOW_PRIVATE=true (the sender's allowPrivate option).
//
// The check applies to the address actually connected to: the sender's undici Agent connects with
// `lookup: guardedLookup`, which resolves the name and refuses the connection if any resolved address
// is refused, so DNS answers that change between a check and the connect cannot slip through. A URL
// whose host is an IP literal is never looked up, so literal hosts are checked before the request
// (compileWebhook precomputes that). With a proxy, see sender.ts and docs/webhooks.md (SSRF).

import dns, { type LookupAddress, type LookupOptions } from 'node:dns'
import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'

export const TARGET_REFUSED_CODE = 'BEACON_WEBHOOK_TARGET_REFUSED'

/** Thrown into the connection (and reported as outcome 'terminal', errorCode 'refused'). */
export class TargetRefusedError extends Error {
  readonly code = TARGET_REFUSED_CODE
  readonly host: string
  readonly address: string
  readonly reason: string
  constructor (host: string, address: string, reason: string) {
    const what = host === address ? `${address} is ${reason}` : `${host} resolves to ${address}, ${reason}`
    super(`Refused: webhook target ${what}; private targets need BEACON_WEBHOOK_ALLOW_PRIVATE=true.`)
    this.name = 'TargetRefusedError'
    this.host = host
    this.address = address
    this.reason = reason
  }
}

const METADATA = [
  ipaddr.parse('169.254.169.254'), // AWS, GCP, Azure, OpenStack, …
  ipaddr.parse('fd00:ec2::254'), // AWS over IPv6
  ipaddr.parse('100.100.100.200'), // Alibaba Cloud
]

const RANGE_WORDS: Readonly<Record<string, string>> = {
  loopback: 'a loopback address',
  private: 'a private address',
  uniqueLocal: 'a private (unique local) address',
  linkLocal: 'a link-local address',
  unspecified: 'an unspecified address',
  multicast: 'a multicast address',
  broadcast: 'a broadcast address',
  carrierGradeNat: 'a shared (carrier-grade NAT) address',
  reserved: 'a reserved address',
}

/**
 * Why an address is refused, or null when it is a public unicast address. IPv6 forms that embed an
 * IPv4 address (mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by that address;
 * the deprecated IPv4-compatible form (::a.b.c.d) and the rest of ::/8 are refused.
 */
export function refusalReason (address: string): string | null {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6
  try {
    parsed = ipaddr.parse(address.includes(':') && address.includes('.') ? hexForm(address) : address)
  } catch {
    return 'not a valid IP address'
  }
  if (parsed.kind() === 'ipv6') {
    const embedded = embeddedIPv4(parsed as ipaddr.IPv6)
    if (embedded !== null) return refusalReason(embedded)
  }
  for (const metadata of METADATA) {
    if (metadata.kind() === parsed.kind() && metadata.toNormalizedString() === parsed.toNormalizedString()) return 'a cloud metadata address'
  }
  const range = parsed.range()
  // ipaddr.js calls the rest of ::/8 unicast, but the IETF reserves it (RFC 4291): the deprecated
  // IPv4-compatible ::a.b.c.d (::/96), which some stacks still route to the IPv4 address, among it.
  if (range === 'unicast' && parsed.kind() === 'ipv6' && ((parsed as ipaddr.IPv6).parts[0] as number) < 0x100) return 'a reserved address (::/8, IPv4-compatible ::a.b.c.d included)'
  if (range === 'unicast') return null
  return RANGE_WORDS[range] ?? `a special-purpose address (${range})`
}

function embeddedIPv4 (address: ipaddr.IPv6): string | null {
  const range = address.range()
  const parts = address.parts
  if (range === 'ipv4Mapped' || range === 'rfc6145' || (range === 'rfc6052' && parts[0] === 0x64 && parts[1] === 0xff9b && parts[2] === 0)) {
    return ipv4Of(parts[6] as number, parts[7] as number)
  }
  if (range === '6to4') return ipv4Of(parts[1] as number, parts[2] as number)
  return null
}

/**
 * An IPv6 address with a dotted IPv4 tail in hexadecimal form, as WHATWG URLs write it: ipaddr.js
 * parses any such tail as IPv4-mapped (`::127.0.0.1` as `::ffff:7f00:1`), which is not the address
 * a socket connects to (`::7f00:1`, the deprecated IPv4-compatible form).
 */
function hexForm (address: string): string {
  try {
    return new URL(`http://[${address}]/`).hostname.slice(1, -1)
  } catch {
    return address
  }
}

function ipv4Of (high: number, low: number): string {
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`
}

/** The IP address a URL hostname spells, without IPv6 brackets, or null for a name. */
export function ipLiteralOf (hostname: string): string | null {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname
  return isIP(bare) === 0 ? null : bare
}

/** Refusal for a URL host known without DNS: an IP literal in a refused range, or a localhost name. */
export function literalRefusal (hostname: string): TargetRefusedError | null {
  const literal = ipLiteralOf(hostname)
  if (literal !== null) {
    const reason = refusalReason(literal)
    return reason === null ? null : new TargetRefusedError(literal, literal, reason)
  }
  const name = hostname.toLowerCase().replace(/\.$/, '')
  if (name === 'localhost' || name.endsWith('.localhost')) return new TargetRefusedError(hostname, hostname, 'a loopback name')
  return null
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void

/**
 * A drop-in for dns.lookup in net/tls connect options: resolves every address of the name and fails
 * the connection with TargetRefusedError if any of them is refused (a name mixing public and private
 * answers is refused, so the connect cannot pick the private one). Answers in the form asked for.
 */
export function guardedLookup (hostname: string, options: LookupOptions, callback: LookupCallback): void {
  // One closure per new connection (not per request: sockets are pooled), to carry `options.all`.
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err !== null) return callback(err, [])
    const refused = firstRefused(hostname, addresses)
    if (refused !== null) return callback(refused, [])
    if (options.all === true) return callback(null, addresses)
    const first = addresses[0]
    if (first === undefined) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), [])
    callback(null, first.address, first.family)
  })
}

/** Resolve a name (or take a literal) and refuse it like guardedLookup would. For targets behind a proxy. */
export async function checkHostResolves (hostname: string): Promise<TargetRefusedError | null> {
  const literal = literalRefusal(hostname)
  if (literal !== null || ipLiteralOf(hostname) !== null) return literal
  const addresses = await dns.promises.lookup(hostname, { all: true })
  return firstRefused(hostname, addresses)
}

function firstRefused (hostname: string, addresses: readonly LookupAddress[]): TargetRefusedError | null {
  for (const { address } of addresses) {
    const reason = refusalReason(address)
    if (reason !== null) return new TargetRefusedError(hostname, address, reason)
  }
  return null
}
