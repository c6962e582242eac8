// One call of the API as the client makes it: where it goes (the owner of its key, else any node),
// how often it is tried, and what it resolves with or throws. Retries are bounded (`attempts`), wait
// with backoff and jitter (backoff.ts), and happen only where repeating cannot apply a write twice:
//   - 429: refused before anything was done, always retried;
//   - 503 and no answer at all (connection refused or broken, timeout): retried when the call is
//     idempotent (a read, a PUT or DELETE, a public write with its Idempotency-Key kept across the
//     retries, a batch whose events carry messageIds);
//   - any other refusal: thrown at once as a BeaconError.
// In cluster mode a 503 partition_moved refreshes the route map before the retry, and a Beacon-Route
// header naming another node than the one chosen refreshes it beside the answer.

import { BeaconConnectionError, BeaconError, type ErrorItem } from './errors.js'
import { retryDelayMs, type BackoffOptions } from './backoff.js'
import type { RouteMap } from './route-map.js'
import type { Answer, Exchange, Transport } from './transport.js'

export interface Call {
  method: Exchange['method']
  path: string
  body?: unknown
  /** Sends the admin key. */
  admin: boolean
  /** The entity the call is about (account and id as the server keys it), sent to its owner; null: any node. */
  key: { account: string, id: string } | null
  idempotent: boolean
  idempotencyKey: string | null
}

/** What each attempt did, for a caller that wants to see routing at work (tests, benchmarks). */
export interface AttemptInfo {
  /** The base URL the attempt went to. */
  node: string
  /** Chosen as the key's owner from the route map (false: any node). */
  routed: boolean
  attempt: number
  /** The answer's status; null when none came. */
  status: number | null
  /** The Beacon-Route header of the answer, when there was one. */
  route: string | null
}

export interface CallerOptions {
  transport: Transport
  nodes: readonly string[]
  routes: RouteMap | null
  adminKey: string | null
  attempts: number
  backoff: BackoffOptions
  sleep: (ms: number) => Promise<void>
  random: () => number
  onAttempt: ((info: AttemptInfo) => void) | null
}

const ROUTE_HEADER = 'beacon-route'

export class Caller {
  private readonly options: CallerOptions
  private next = 0

  constructor (options: CallerOptions) {
    this.options = options
  }

  async call<T> (call: Call): Promise<T> {
    const { transport, routes, attempts, backoff, sleep, random, onAttempt } = this.options
    const exchange: Exchange = { method: call.method, path: call.path, headers: this.headersOf(call), body: call.body === undefined ? null : JSON.stringify(call.body) }
    /** Nodes that gave no answer during this call: not chosen again while another is left. */
    const failed = new Set<string>()
    for (let attempt = 1; ; attempt++) {
      const owner = routes !== null && call.key !== null ? routes.ownerOf(call.key.account, call.key.id) : null
      const node = owner !== null && !failed.has(owner.url) ? owner.url : this.anyNode(failed)
      const routed = owner !== null && node === owner.url
      let answer: Answer
      try {
        answer = await transport.send(node, exchange)
      } catch (error) {
        onAttempt?.({ node, routed, attempt, status: null, route: null })
        if (!(error instanceof BeaconConnectionError) || error.code === 'bad_answer' || !call.idempotent || attempt >= attempts) throw withAttempts(error, attempt)
        failed.add(node)
        // The owner may be gone: its partitions move, the map tells where.
        if (routed) void routes!.refresh()
        await sleep(retryDelayMs(attempt, undefined, backoff, random))
        continue
      }
      const route = headerOf(answer, ROUTE_HEADER)
      onAttempt?.({ node, routed, attempt, status: answer.status, route })
      if (routes !== null && route !== null && route !== (routed ? owner!.node : routes.nodeAt(node))) routes.stale()
      if (answer.status < 400) return answer.body as T
      const error = refusalOf(answer, node, attempt)
      const retry = answer.status === 429 || (answer.status === 503 && call.idempotent)
      if (!retry || attempt >= attempts) throw error
      if (error.code === 'partition_moved' && routes !== null) await routes.refresh()
      await sleep(retryDelayMs(attempt, answer.headers['retry-after'], backoff, random))
    }
  }

  private headersOf (call: Call): Record<string, string> {
    const headers: Record<string, string> = {}
    if (call.body !== undefined) headers['content-type'] = 'application/json'
    if (call.admin && this.options.adminKey !== null) headers.authorization = `Bearer ${this.options.adminKey}`
    if (call.idempotencyKey !== null) headers['idempotency-key'] = call.idempotencyKey
    return headers
  }

  /** The next node in turn, skipping those that failed this call while another is left. */
  private anyNode (failed: ReadonlySet<string>): string {
    const nodes = this.options.nodes
    for (let i = 0; i < nodes.length; i++) {
      const node = nodes[this.next++ % nodes.length]!
      if (!failed.has(node)) return node
    }
    return nodes[this.next++ % nodes.length]!
  }
}

function headerOf (answer: Answer, name: string): string | null {
  const value = answer.headers[name]
  return (Array.isArray(value) ? value[0] : value) ?? null
}

interface ErrorBody { message?: unknown, errors?: unknown }

function refusalOf (answer: Answer, node: string, attempts: number): BeaconError {
  const body = (typeof answer.body === 'object' && answer.body !== null ? answer.body : {}) as ErrorBody
  const items = Array.isArray(body.errors) ? body.errors as ErrorItem[] : []
  const message = typeof body.message === 'string' ? body.message : `HTTP ${answer.status}`
  return new BeaconError(answer.status, message, items, node, attempts)
}

function withAttempts (error: unknown, attempts: number): unknown {
  if (!(error instanceof BeaconConnectionError)) return error
  return new BeaconConnectionError(error.code, attempts > 1 ? `${error.message}; ${attempts} attempts` : error.message, error.node, attempts, error.cause)
}
