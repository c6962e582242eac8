// The client's options: defaults, and each one checked on its own with a precise InvalidArgumentError.

import { InvalidArgumentError } from './errors.js'
import type { AttemptInfo } from './call.js'

export interface ClientOptions {
  /** One node's base URL, or several (any of them answers any call; requests go round them). */
  url: string | readonly string[]
  /** The admin key (BEACON_ADMIN_KEY), for the admin API. */
  adminKey?: string
  /** The account the public calls are about when their body names none. */
  account?: string
  /** The API token the token endpoints send when their body has none. */
  token?: string
  /**
   * 'owner' (default): in cluster mode each request goes to the node owning its key, from the route map
   * (GET /cluster/routes); without a map (embedded mode, or none yet) to any node. 'any': never asks.
   */
  routing?: 'owner' | 'any'
  /** Where the route map is; default: /cluster/routes of each node in `url`, in turn until one answers. */
  routesUrl?: string
  /** The route map is asked again this often (default 30000). */
  routesRefreshMs?: number
  /** Tries per call at most, the first included (default 4). */
  attempts?: number
  /** The first retry waits up to this long, doubling with each (default 100). */
  backoffBaseMs?: number
  /** A retry waits at most this long (default 2000) … */
  backoffMaxMs?: number
  /** … or, when the server sent Retry-After, up to this long (default 10000). */
  retryAfterMaxMs?: number
  /** An answer slower than this is given up (a `timeout`, retried where the call allows; default 10000). */
  timeoutMs?: number
  /** Keep-alive connections per node at most (default 16). */
  connectionsPerNode?: number
  /** Told of every attempt: the node it went to, whether chosen as the owner, its status. */
  onAttempt?: (info: AttemptInfo) => void
  /** Time and waiting, injected for tests (defaults: Date.now, a timer, Math.random). */
  nowMs?: () => number
  sleep?: (ms: number) => Promise<void>
  random?: () => number
}

export interface ParsedOptions {
  nodes: string[]
  adminKey: string | null
  account: string | null
  token: string | null
  routing: 'owner' | 'any'
  routesUrl: string | null
  routesRefreshMs: number
  attempts: number
  backoff: { baseMs: number, maxMs: number, retryAfterMaxMs: number }
  timeoutMs: number
  connectionsPerNode: number
  onAttempt: ((info: AttemptInfo) => void) | null
  nowMs: () => number
  sleep: (ms: number) => Promise<void>
  random: () => number
}

/** A Beacon-Route hint refreshes the map at most this often. */
export const HINT_REFRESH_INTERVAL_MS = 1000

export function parseOptions (options: ClientOptions): ParsedOptions {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('options: expected an object with at least `url`')
  const urls = typeof options.url === 'string' ? [options.url] : options.url
  if (!Array.isArray(urls) || urls.length === 0) throw new InvalidArgumentError('url: expected a base URL like http://127.0.0.1:8080, or a non-empty list of them')
  const routing = options.routing ?? 'owner'
  if (routing !== 'owner' && routing !== 'any') throw new InvalidArgumentError(`routing: expected 'owner' or 'any', got ${JSON.stringify(routing)}`)
  return {
    nodes: urls.map((url, i) => baseUrl(url, `url[${i}]`)),
    adminKey: text(options.adminKey, 'adminKey'),
    account: text(options.account, 'account')?.toLowerCase() ?? null,
    token: text(options.token, 'token'),
    routing,
    routesUrl: options.routesUrl === undefined ? null : baseUrl(options.routesUrl, 'routesUrl'),
    routesRefreshMs: whole(options.routesRefreshMs, 'routesRefreshMs', 30_000, 1),
    attempts: whole(options.attempts, 'attempts', 4, 1),
    backoff: {
      baseMs: whole(options.backoffBaseMs, 'backoffBaseMs', 100, 0),
      maxMs: whole(options.backoffMaxMs, 'backoffMaxMs', 2000, 0),
      retryAfterMaxMs: whole(options.retryAfterMaxMs, 'retryAfterMaxMs', 10_000, 0),
    },
    timeoutMs: whole(options.timeoutMs, 'timeoutMs', 10_000, 1),
    connectionsPerNode: whole(options.connectionsPerNode, 'connectionsPerNode', 16, 1),
    onAttempt: fn(options.onAttempt, 'onAttempt') ?? null,
    nowMs: fn(options.nowMs, 'nowMs') ?? Date.now,
    sleep: fn(options.sleep, 'sleep') ?? wait,
    random: fn(options.random, 'random') ?? Math.random,
  }
}

function wait (ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}

function baseUrl (value: unknown, name: string): string {
  if (typeof value === 'string') {
    try {
      const url = new URL(value)
      if (url.protocol === 'http:' || url.protocol === 'https:') return value.replace(/\/+$/, '')
    } catch {}
  }
  throw new InvalidArgumentError(`${name}: expected an http:// or https:// URL, got ${JSON.stringify(value)}`)
}

function text (value: unknown, name: string): string | null {
  if (value === undefined) return null
  if (typeof value !== 'string' || value === '') throw new InvalidArgumentError(`${name}: expected a non-empty string`)
  return value
}

function whole (value: unknown, name: string, fallback: number, minimum: number): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < minimum) throw new InvalidArgumentError(`${name}: expected a whole number ≥ ${minimum}, got ${JSON.stringify(value)}`)
  return value
}

function fn<F> (value: F | undefined, name: string): F | undefined {
  if (value !== undefined && typeof value !== 'function') throw new InvalidArgumentError(`${name}: expected a function`)
  return value
}
