// The address of the client that made a request: the TCP peer's, or, when the peer is one of the
// operator's trusted proxies (BEACON_TRUSTED_PROXIES: the load balancer or nginx in front of Beacon),
// the one that proxy saw: X-Forwarded-For read from the right, past every trusted proxy. A client
// cannot forge it by sending its own X-Forwarded-For: only the entries appended by trusted hops count.

import { isIP } from 'node:net'

/** The address as text without IPv4-mapped IPv6 (`::ffff:10.0.0.1` → `10.0.0.1`) or brackets; '' when not an address. */
export function bareAddress (text: string): string {
  let value = text.trim()
  if (value.startsWith('[') && value.includes(']')) value = value.slice(1, value.indexOf(']'))
  const mapped = /^(?:0{0,4}:){0,5}:?ffff:([0-9.]+)$/i.exec(value)
  if (mapped !== null) value = mapped[1]!
  return isIP(value) === 0 ? '' : value.toLowerCase()
}

/** The trusted proxies' addresses, normalized (the operator's list). */
export function trustedProxySet (addresses: readonly string[]): ReadonlySet<string> {
  return new Set(addresses.map(bareAddress).filter(address => address !== ''))
}

/** The client's address: the peer's unless it is a trusted proxy, then the first untrusted X-Forwarded-For hop from the right. */
export function clientAddress (remoteAddress: string, forwardedFor: string, trusted: ReadonlySet<string>): string {
  const peer = bareAddress(remoteAddress)
  if (trusted.size === 0 || !trusted.has(peer) || forwardedFor === '') return peer
  const hops = forwardedFor.split(',')
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = bareAddress(hops[i]!)
    if (hop === '') return peer // a malformed entry: nothing left of it can be trusted
    if (!trusted.has(hop)) return hop
  }
  return peer
}
