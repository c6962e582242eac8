// The route hint of cluster mode (docs/cluster.md, "Routing requests to their owner"): every answer of a
// request about a visitor or a profile names the node that owns its partition, in the `Beacon-Route`
// header, and in a `beacon_route` cookie when the request's cookie does not name that node already. A
// client (the SDK: the header; a same-site browser or any cookie jar: the cookie) sends the hint back, and
// a balancer that reads it (deploy/nginx-cluster.conf) sends the request straight to that node. A stale
// hint costs one forwarding hop, and its answer carries the new hint.
//
// Everything is made once per node at start: writing the hint allocates nothing per request (the
// forwarded path excepted, whose answer travels as an object anyway). Embedded mode has no RouteHint.

import type * as uWS from 'uWebSockets.js'

export const ROUTE_HEADER = 'Beacon-Route'
export const ROUTE_COOKIE = 'beacon_route'

export class RouteHint {
  readonly node: string
  /** `beacon_route=<node>`: what a Cookie header carries when the hint is current. */
  private readonly pair: string
  /** The Set-Cookie value: the whole browser session, every path, same-site requests, not readable by scripts. */
  private readonly setCookie: string

  constructor (node: string) {
    this.node = node
    this.pair = `${ROUTE_COOKIE}=${node}`
    this.setCookie = `${this.pair}; Path=/; SameSite=Lax; HttpOnly`
  }

  /** Writes this node's hint on an answer served here (inside its cork). `cookie`: the request's Cookie header. */
  write (res: uWS.HttpResponse, cookie: string): void {
    res.writeHeader(ROUTE_HEADER, this.node)
    if (!this.cookieCurrent(cookie)) res.writeHeader('Set-Cookie', this.setCookie)
  }

  /** This node's hint as headers, for an answer to a request another node forwarded here. */
  headers (cookie: string): Record<string, string> {
    return this.cookieCurrent(cookie) ? { [ROUTE_HEADER]: this.node } : { [ROUTE_HEADER]: this.node, 'Set-Cookie': this.setCookie }
  }

  /** Whether the Cookie header has `beacon_route=<this node>` as one of its cookies (no allocation). */
  cookieCurrent (cookie: string): boolean {
    let from = 0
    for (;;) {
      const at = cookie.indexOf(this.pair, from)
      if (at < 0) return false
      const end = at + this.pair.length
      const startsCookie = at === 0 || cookie.charCodeAt(at - 1) === 32 || cookie.charCodeAt(at - 1) === 59
      const endsCookie = end === cookie.length || cookie.charCodeAt(end) === 59 || cookie.charCodeAt(end) === 32
      if (startsCookie && endsCookie) return true
      from = at + 1
    }
  }
}
