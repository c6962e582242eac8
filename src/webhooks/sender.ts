// Sender: one HTTP attempt of one request, classified. One per process: it owns the shared undici
// Agent (a Pool per origin, created by the Agent as origins appear) and a cache of ProxyAgents, one per
// proxy URL. sendOnce never throws: every failure is an outcome.
//
// Classification: 2xx delivered; 408, 429 and 5xx retry (Retry-After honoured, capped); any other
// status (3xx, 4xx) terminal; timeouts and connection errors retry; an SSRF refusal or a request that
// cannot be built is terminal.
//
// SSRF and proxies (see ssrf.ts): without a proxy Beacon connects to the target, and guardedLookup
// checks the address connected to. With a proxy Beacon connects to the proxy, so:
// - the proxy's own address goes through guardedLookup too (a webhook cannot name 169.254.169.254 as
//   its "proxy"), unless the proxy's origin is in `trustedProxies` (operator-run egress proxies, which
//   usually live on a private network);
// - the target is checked as well, since the proxy connects on Beacon's behalf: an IP-literal target
//   always, and a target name by resolving it here before the request (fail closed: a name that does
//   not resolve here is a connection error, retried). Through a trusted proxy the name is not resolved
//   here (such networks often have no outside DNS); the trusted proxy's egress rules apply.
// What remains: the proxy resolves the name again, so a name whose DNS answer changes between the two
// lookups could still reach a private address through an untrusted proxy. The proxy's own egress
// policy is the last line there; docs/webhooks.md (SSRF) says so.

import { rootCertificates } from 'node:tls'
import { performance } from 'node:perf_hooks'
import { Agent, ProxyAgent, type Dispatcher } from 'undici'
import { systemClock, type Clock } from '../clock.js'
import type { CompiledWebhook } from './compile.js'
import { DELIVERY_LIMITS } from './limits.js'
import { renderRequest, type RenderedRequest } from './render.js'
import { parseRetryAfterMs } from './retry-after.js'
import { checkHostResolves, guardedLookup, TARGET_REFUSED_CODE } from './ssrf.js'
import type { DeliveryItem, SendErrorCode, SendResult } from './types.js'
import { batchIdOf } from './batch-id.js'
import { maskCredentials } from './mask-credentials.js'

export interface SenderOptions {
  /** BEACON_WEBHOOK_ALLOW_PRIVATE=true: skip every SSRF check. Default false. */
  allowPrivate?: boolean
  /** Proxy origins (e.g. "http://10.0.0.5:3128") run by the operator: their address is not checked. */
  trustedProxies?: readonly string[]
  /** For webhook-timestamp and the attempt time. Latency is measured with performance.now(). */
  clock?: Clock
  /** Sockets per origin in the shared pool. */
  connectionsPerOrigin?: number
  /** Extra CA certificates (PEM) trusted for https targets and proxies, besides Node's root store. */
  ca?: readonly string[]
}

/** The response body bytes kept for an error excerpt: UTF-8 takes at most 4 bytes a character. */
const EXCERPT_SIZE_MAX_BYTES = DELIVERY_LIMITS.errorExcerptLengthMax * 4
/** A rendered path undici takes as it is (printable ASCII); anything else goes through URL first. */
const PLAIN_PATH = /^[/?][\x21-\x7e]*$/

const RETRYABLE_ERROR_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])

export class Sender {
  private readonly allowPrivate: boolean
  private readonly trustedProxies: ReadonlySet<string>
  private readonly clock: Clock
  private readonly connectionsPerOrigin: number
  private readonly ca: string[] | null
  private readonly agent: Agent
  /** Insertion order doubles as recency order: a hit is moved to the end. */
  private readonly proxies: Map<string, ProxyAgent>
  private closed: boolean

  constructor (options: SenderOptions = {}) {
    this.allowPrivate = options.allowPrivate === true
    this.trustedProxies = new Set((options.trustedProxies ?? []).map(originOf))
    this.clock = options.clock ?? systemClock
    this.connectionsPerOrigin = options.connectionsPerOrigin ?? DELIVERY_LIMITS.connectionsPerOriginDefault
    this.ca = options.ca === undefined || options.ca.length === 0 ? null : [...rootCertificates, ...options.ca]
    this.agent = new Agent({ connections: this.connectionsPerOrigin, connect: this.connectOptions(this.allowPrivate) })
    this.proxies = new Map()
    this.closed = false
  }

  /**
   * One attempt. `items` are one request's worth (1..webhook.batchSize); timeoutMs bounds the whole
   * exchange (connect, headers, body drain).
   */
  async sendOnce (webhook: CompiledWebhook, items: readonly DeliveryItem[], timeoutMs: number = webhook.timeoutMs): Promise<SendResult> {
    if (webhook.native !== undefined) return webhook.native.send(items, timeoutMs)
    const atMs = this.clock.nowMs()
    const started = performance.now()
    let rendered: RenderedRequest
    try {
      rendered = renderRequest(webhook, items)
    } catch (err) {
      return failure('terminal', 'invalid_request', safeId(items), atMs, started, `cannot build the request: ${messageOf(err)}`)
    }
    const deliveryId = rendered.deliveryId
    if (!this.allowPrivate && webhook.targetRefusal !== null) {
      return failure('terminal', 'refused', deliveryId, atMs, started, webhook.targetRefusal.message)
    }
    let dispatcher: Dispatcher = this.agent
    if (webhook.proxy !== null) {
      const trusted = this.trustedProxies.has(webhook.proxy)
      if (!this.allowPrivate && !trusted && webhook.proxyRefusal !== null) {
        return failure('terminal', 'refused', deliveryId, atMs, started, webhook.proxyRefusal.message.replace('webhook target', 'proxy'))
      }
      if (!this.allowPrivate && !trusted) {
        const refused = await checkTarget(webhook.targetHostname)
        if (refused !== null) return failure(refused.outcome, refused.code, deliveryId, atMs, started, refused.message)
      }
      dispatcher = this.proxyAgent(webhook.proxy, trusted)
    }
    this.sign(webhook, rendered)
    let path: string
    try {
      path = pathOf(webhook, rendered.url)
    } catch (err) {
      return failure('terminal', 'invalid_request', deliveryId, atMs, started, `cannot build the request: ${messageOf(err)}`)
    }
    return new Promise<SendResult>(resolve => {
      const exchange = new Exchange(resolve, this.clock, deliveryId, atMs, started, timeoutMs)
      try {
        dispatcher.dispatch({ origin: webhook.origin, path, method: rendered.method, headers: rendered.headers, body: rendered.body }, exchange)
      } catch (err) {
        exchange.onResponseError(null, err as Error)
      }
    })
  }

  /** Close the pool and every proxy agent; in-flight requests finish first. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    const closing: Promise<void>[] = [this.agent.close()]
    for (const proxy of this.proxies.values()) closing.push(proxy.close())
    this.proxies.clear()
    await Promise.all(closing)
  }

  private sign (webhook: CompiledWebhook, rendered: RenderedRequest): void {
    const nowMs = this.clock.nowMs()
    rendered.headers.push('webhook-id', rendered.deliveryId, 'webhook-timestamp', String(Math.floor(nowMs / 1000)))
    if (webhook.signer !== null) rendered.headers.push('webhook-signature', webhook.signer.sign(rendered.deliveryId, new Date(nowMs), rendered.body ?? ''))
  }

  private proxyAgent (proxy: string, trusted: boolean): ProxyAgent {
    const cached = this.proxies.get(proxy)
    if (cached !== undefined) {
      this.proxies.delete(proxy)
      this.proxies.set(proxy, cached)
      return cached
    }
    if (this.proxies.size >= DELIVERY_LIMITS.proxyAgentsMax) {
      const [oldestUrl, oldest] = this.proxies.entries().next().value as [string, ProxyAgent]
      this.proxies.delete(oldestUrl)
      void oldest.close()
    }
    const agent = new ProxyAgent({
      uri: proxy,
      // http targets are forwarded in absolute form (what every HTTP proxy understands); https targets
      // always go through a CONNECT tunnel, so the proxy never sees the request or its secrets.
      proxyTunnel: false,
      connections: this.connectionsPerOrigin,
      proxyTls: this.connectOptions(this.allowPrivate || trusted),
      requestTls: this.ca === null ? {} : { ca: this.ca },
    })
    this.proxies.set(proxy, agent)
    return agent
  }

  private connectOptions (allowPrivate: boolean): { lookup?: typeof guardedLookup, ca?: string[] } {
    const options: { lookup?: typeof guardedLookup, ca?: string[] } = {}
    if (!allowPrivate) options.lookup = guardedLookup
    if (this.ca !== null) options.ca = this.ca
    return options
  }
}

async function checkTarget (hostname: string): Promise<{ outcome: 'terminal' | 'retry', code: SendErrorCode, message: string } | null> {
  try {
    const refused = await checkHostResolves(hostname)
    return refused === null ? null : { outcome: 'terminal', code: 'refused', message: refused.message }
  } catch (err) {
    return { outcome: 'retry', code: 'connection', message: `cannot resolve ${hostname} to check it: ${messageOf(err)}` }
  }
}

function classifyError (err: unknown): { outcome: 'retry' | 'terminal', code: SendErrorCode } {
  const code = (err as { code?: unknown } | null)?.code
  const name = (err as { name?: unknown } | null)?.name
  if (code === TARGET_REFUSED_CODE) return { outcome: 'terminal', code: 'refused' }
  if (name === 'TimeoutError' || (typeof code === 'string' && RETRYABLE_ERROR_CODES.has(code))) return { outcome: 'retry', code: 'timeout' }
  // A header value or option undici refuses: the same request would be refused again.
  if (code === 'UND_ERR_INVALID_ARG') return { outcome: 'terminal', code: 'invalid_request' }
  return { outcome: 'retry', code: 'connection' }
}

/**
 * One exchange, as an undici dispatch handler: the outcome is decided by the status line, the body is
 * read and discarded up to the drain limit (kept up to an excerpt on a failure status) so the socket
 * goes back to the pool, and a timer bounds the whole exchange (waiting for a socket, connect,
 * headers, body). No response stream, no promise per stage, no AbortSignal: AbortSignal.timeout
 * cannot be cancelled, so every request left a timer and a weakly held signal alive for the whole
 * timeout, which halved the request rate (bench/results/2026-11-history.md).
 */
class Exchange implements Dispatcher.DispatchHandler {
  private readonly resolve: (result: SendResult) => void
  private readonly clock: Clock
  private readonly deliveryId: string
  private readonly atMs: number
  private readonly started: number
  private readonly timeoutMs: number
  private readonly timer: NodeJS.Timeout
  private controller: Dispatcher.DispatchController | null = null
  private status = 0
  private retryAfter: string | string[] | undefined = undefined
  private read = 0
  private excerpt: Buffer[] | null = null
  private kept = 0
  private done = false

  constructor (resolve: (result: SendResult) => void, clock: Clock, deliveryId: string, atMs: number, started: number, timeoutMs: number) {
    this.resolve = resolve
    this.clock = clock
    this.deliveryId = deliveryId
    this.atMs = atMs
    this.started = started
    this.timeoutMs = timeoutMs
    this.timer = setTimeout(() => this.timeout(), timeoutMs)
  }

  onRequestStart (controller: Dispatcher.DispatchController): void {
    this.controller = controller
    // Timed out while waiting for a socket: the result is given already; do not send.
    if (this.done) controller.abort(new Error('timed out'))
  }

  onResponseStart (_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[]>): void {
    if (statusCode < 200 || this.done) return // 1xx: the real answer follows
    this.status = statusCode
    if (statusCode >= 300) this.excerpt = []
    if (statusCode === 408 || statusCode === 429 || statusCode >= 500) this.retryAfter = headers['retry-after']
  }

  onResponseData (controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.read += chunk.length
    if (this.excerpt !== null && this.kept < EXCERPT_SIZE_MAX_BYTES) {
      this.excerpt.push(chunk)
      this.kept += chunk.length
    }
    // Past the drain limit the socket is not worth keeping: answer now and close it.
    if (this.read > DELIVERY_LIMITS.responseDrainMaxBytes && !this.done) {
      this.answered()
      controller.abort(new Error('response body over the drain limit'))
    }
  }

  onResponseEnd (): void {
    if (!this.done) this.answered()
  }

  onResponseError (_controller: Dispatcher.DispatchController | null, err: Error): void {
    if (this.done) return
    // A body that fails after the status line does not change the outcome the status decided.
    if (this.status !== 0) return this.answered()
    const { outcome, code } = classifyError(err)
    this.finish(failure(outcome, code, this.deliveryId, this.atMs, this.started, code === 'timeout' ? `timed out after ${this.timeoutMs} ms` : messageOf(err)))
  }

  private timeout (): void {
    if (this.done) return
    if (this.status !== 0) this.answered()
    else this.finish(failure('retry', 'timeout', this.deliveryId, this.atMs, this.started, `timed out after ${this.timeoutMs} ms`))
    this.controller?.abort(new Error('timed out'))
  }

  /** The result the status line decided. */
  private answered (): void {
    const status = this.status
    const latencyMs = elapsedMs(this.started)
    if (status < 300) return this.finish({ outcome: 'delivered', deliveryId: this.deliveryId, atMs: this.atMs, status, latencyMs })
    const excerpt = maskCredentials(Buffer.concat(this.excerpt ?? []).toString('utf8').replace(/\s+/g, ' ').trim())
    const retryable = status === 408 || status === 429 || status >= 500
    const result: SendResult = {
      outcome: retryable ? 'retry' : 'terminal',
      deliveryId: this.deliveryId,
      atMs: this.atMs,
      status,
      latencyMs,
      error: clip(excerpt === '' ? `HTTP ${status}` : `HTTP ${status}: ${excerpt}`),
      errorCode: 'http_status',
    }
    if (retryable) {
      const retryAfterMs = parseRetryAfterMs(this.retryAfter, this.clock.nowMs())
      if (retryAfterMs !== undefined) result.retryAfterMs = retryAfterMs
    }
    this.finish(result)
  }

  private finish (result: SendResult): void {
    this.done = true
    clearTimeout(this.timer)
    this.resolve(result)
  }
}

/** The request target (path and query) of a rendered url whose origin is the webhook's. */
function pathOf (webhook: CompiledWebhook, url: string): string {
  if (url.startsWith(webhook.urlPrefix)) {
    const rest = url.slice(webhook.urlPrefix.length)
    if (rest === '') return '/'
    if (PLAIN_PATH.test(rest)) return rest[0] === '/' ? rest : '/' + rest
  }
  const parsed = new URL(url)
  return parsed.pathname + parsed.search
}

function failure (outcome: 'retry' | 'terminal', code: SendErrorCode, deliveryId: string, atMs: number, started: number, message: string): SendResult {
  return { outcome, deliveryId, atMs, latencyMs: elapsedMs(started), error: clip(message), errorCode: code }
}

function clip (text: string): string {
  const max = DELIVERY_LIMITS.errorExcerptLengthMax
  return text.length <= max ? text : text.slice(0, max - 1) + '…'
}

function elapsedMs (started: number): number {
  return Math.round((performance.now() - started) * 10) / 10
}

function messageOf (err: unknown): string {
  if (!(err instanceof Error)) return String(err)
  const code = (err as { code?: unknown }).code
  return typeof code === 'string' && !err.message.includes(code) ? `${code}: ${err.message}` : err.message
}

function safeId (items: readonly DeliveryItem[]): string {
  try {
    return batchIdOf(items)
  } catch {
    return ''
  }
}

function originOf (url: string): string {
  try {
    return new URL(url).origin
  } catch {
    return url
  }
}
