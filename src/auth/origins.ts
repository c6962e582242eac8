// Browser origins an account allows (CORS): exact origins (`https://shop.example`) and one-level-or-more
// wildcards (`https://*.shop.example`). Compiled when the account changes into a set and a list of
// (scheme, suffix) pairs; a request is checked with a set lookup and a few string comparisons, and the
// CORS headers of an exact origin are built once, here.

/** `scheme://host[:port]`, or `scheme://*.host[:port]`; lowercase, no path, no trailing slash. */
const ORIGIN = /^(https?):\/\/(\*\.)?([a-z0-9-]+(?:\.[a-z0-9-]+)*)(:\d{1,5})?$/

export const ALLOWED_ORIGINS_MAX = 100

/** Why `pattern` is not an allowed-origin pattern, or null when it is one. */
export function originProblem (pattern: string): string | null {
  if (pattern !== pattern.toLowerCase()) return 'must be lowercase'
  const match = ORIGIN.exec(pattern)
  if (match === null) return 'must be scheme://host[:port] (http or https, no path), optionally with *. before the host'
  const port = match[4]
  if (port !== undefined && Number(port.slice(1)) > 65535) return 'has a port above 65535'
  return null
}

export type CorsHeaders = Readonly<Record<string, string>>

interface Wildcard {
  /** `https://` */
  scheme: string
  /** `.shop.example` or `.shop.example:8443` */
  suffix: string
}

export class OriginPolicy {
  private readonly exact: ReadonlyMap<string, CorsHeaders>
  private readonly wildcards: readonly Wildcard[]

  constructor (patterns: readonly string[]) {
    const exact = new Map<string, CorsHeaders>()
    const wildcards: Wildcard[] = []
    for (const pattern of patterns) {
      const star = pattern.indexOf('://*.')
      if (star < 0) exact.set(pattern, corsHeaders(pattern))
      else wildcards.push({ scheme: pattern.slice(0, star + 3), suffix: pattern.slice(star + 4) })
    }
    this.exact = exact
    this.wildcards = wildcards
  }

  get empty (): boolean { return this.exact.size === 0 && this.wildcards.length === 0 }

  /** The CORS headers answering `origin` (a request's Origin header), or null when it is not allowed. */
  headersFor (origin: string): CorsHeaders | null {
    const exact = this.exact.get(origin)
    if (exact !== undefined) return exact
    for (const { scheme, suffix } of this.wildcards) {
      if (origin.length > scheme.length + suffix.length && origin.startsWith(scheme) && origin.endsWith(suffix) &&
        isHostLabels(origin, scheme.length, origin.length - suffix.length)) return corsHeaders(origin)
    }
    return null
  }
}

function corsHeaders (origin: string): CorsHeaders {
  // Beacon-Route: the route hint of cluster mode (src/http/route-hint.ts), which the SDK reads and sends back.
  return { 'Access-Control-Allow-Origin': origin, Vary: 'Origin', 'Access-Control-Expose-Headers': 'Beacon-Route' }
}

/** origin[from, to) is one or more DNS labels (a-z 0-9 -, dot-separated): no port, path or userinfo. */
function isHostLabels (origin: string, from: number, to: number): boolean {
  let previous = 46 // '.', so a leading dot is refused
  for (let i = from; i < to; i++) {
    const c = origin.charCodeAt(i)
    const ok = (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45 || (c === 46 && previous !== 46)
    if (!ok) return false
    previous = c
  }
  return previous !== 46
}
