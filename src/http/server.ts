// The HTTP frontend on uWebSockets.js, with no framework on top. Every request is handled the same
// way: register onAborted first, copy what is needed out of `req` before anything async, read the body
// with onData (bounded), then run the route's handler (at the end of the event loop's turn: `bodyRead`)
// and write the reply inside `cork`, unless the client went away.
//
// Cluster mode (option `cluster`): a route that declares its `partitionKey` is, when the key's partition
// is owned by another node, not run here: once its body is read, the request is forwarded to the owner
// (src/cluster/forwarder.ts) and the owner's answer written as is. The owner runs it through
// `runForwarded`: the same pipeline (draining, in-flight limit, guard, body checks, admit, handler) on
// a request made from the forwarded one, its answer captured instead of written. Without `cluster`
// the cost is a null check when the handler is called and one when the answer is written, no allocation.
// In cluster mode every answer of such a request names its key's owner (option `routeHint`,
// src/http/route-hint.ts): this node's hint when served here, the owner's when forwarded.

import type * as uWS from 'uWebSockets.js'
import { ApiError, type ErrorItem } from '../errors.js'
import type { ForwardedReply, ForwardedRequest } from '../cluster/forwarder.js'
import { FORWARDED_KEY_PREFIX } from '../store/idempotency.js'
import { checkForbiddenKeys } from './validate.js'
import { loadUws, type UwsBinding } from './uws.js'
import type { RouteHint } from './route-hint.js'
import { BodyStream } from './body-stream.js'

export interface Request {
  readonly method: string
  readonly url: string
  readonly params: readonly string[]
  readonly authorization: string
  readonly query: string
  /** Headers beyond the ones above, '' when absent (CORS, sessions, caching, proxies). */
  readonly origin: string
  readonly cookie: string
  readonly host: string
  readonly ifNoneMatch: string
  readonly forwardedProto: string
  /** X-Forwarded-For (src/http/client-address.ts reads it behind a trusted proxy only). */
  readonly forwardedFor: string
  readonly userAgent: string
  readonly contentType: string
  /** The Idempotency-Key header of a public write ('' when absent or empty: src/http/idempotency-key.ts). */
  readonly idempotencyKey: string
  /**
   * A request another node forwarded here (cluster mode): the key that node gave it for its retries
   * (FORWARDED_KEY_PREFIX and the forward's id; src/http/idempotency-key.ts claims it when the client
   * sent no Idempotency-Key); '' otherwise.
   */
  readonly forwardedKey: string
  /** The peer's address as text (the proxy's, behind one). */
  readonly remoteAddress: string
  /** Parsed JSON body (routes declared with `body: true`), the bytes (`body: 'raw'`), else undefined. */
  readonly body: unknown
  /** What the route's guard returned (who is calling: see src/http/access.ts); undefined without a guard. */
  readonly auth?: unknown
}

/** What a guard sees: the request before its body is read. */
export type GuardRequest = Omit<Request, 'body' | 'auth'>

export interface Reply {
  status: number
  body: unknown
  headers?: Record<string, string>
  /** A body that is already text or bytes (metrics, a cached document, a file), written as is with this type. */
  contentType?: string
  /**
   * A body written as it is produced (an export), chunk by chunk with the client's backpressure, with
   * `contentType`; `body` is ignored. A failure once the status is sent closes the connection (the
   * client sees a cut answer, never a complete-looking one). Not for routes answered by another node.
   */
  stream?: AsyncIterable<string | Buffer>
}

export type Handler = (request: Request) => Reply | Promise<Reply>

/** The entity a request is about (a visitor or a profile of an account): what places it in a partition. */
export interface EntityKey {
  account: string
  id: string
}

/** How the server reaches the other nodes (cluster mode). */
export interface ClusterRouting {
  /** This node serves the key's partition now. */
  owns (key: EntityKey): boolean
  /** The owner's answer; rejects with an ApiError (503 unavailable) when no owner answered in time. */
  forward (key: EntityKey, request: ForwardedRequest): Promise<ForwardedReply>
}

/** Who may call an admin route: a role of the account's panel users, 'admin' (the admin key only) or 'public'. */
export type RouteRole = 'viewer' | 'editor' | 'owner' | 'admin' | 'public'

export interface Route {
  method: 'get' | 'post' | 'put' | 'patch' | 'del' | 'options'
  pattern: string
  /**
   * Whether the route takes a JSON body; 'raw': any body, handed over as a Buffer (uploads); 'stream':
   * any body, handed over as it arrives (a BodyStream, src/http/body-stream.ts), up to `streamMaxBytes`.
   */
  body: boolean | 'raw' | 'stream'
  /** The limit of a 'stream' body. */
  streamMaxBytes?: number
  /** A JSON body may also come as text/plain (navigator.sendBeacon cannot set application/json). */
  textJson?: boolean
  /** Checked before the body is read (credentials): throws an ApiError to refuse; what it returns is `request.auth`. */
  guard?: (request: GuardRequest) => unknown
  /**
   * For admin routes (/admin/...): the least role that may call it with a session (src/http/access.ts).
   * Unset means 'owner' (and the admin key): a route nobody classified is never open to viewers.
   */
  role?: RouteRole
  /** Audit log entry of a successful call: what it did to which entity (default: from method and path); false: none. */
  audit?: { action?: string, entity?: string } | false
  /** Still answered while draining (health and metrics: a load balancer reads why it is taken out). */
  whileDraining?: boolean
  /** Never counted against nor refused by BEACON_INFLIGHT_MAX (health and metrics: they must answer under overload). */
  uncounted?: boolean
  /**
   * Called with the parsed request right before the handler (a per-account bulkhead): throws an
   * ApiError to refuse; what it returns (null: nothing held) goes to `release` once the handler settled.
   */
  admit?: (request: Request) => object | null
  release?: (admitted: object) => void
  /**
   * The visitor or profile the request is about, from the parsed request (the body is not validated
   * yet: return null when it names none, and the handler refuses it). In cluster mode a request whose
   * key another node owns is forwarded there; unset: always served here.
   */
  partitionKey?: (request: Request) => EntityKey | null
  handler: Handler
}

/**
 * Told once per finished request: its status, how long it took from accept to answer, and the path
 * parameters. 499: the client went away before the answer.
 */
export type RouteObserver = (status: number, durationMs: number, params: readonly string[]) => void

/** What a route is to observers and to the route list: its method and uWS pattern. */
export interface RouteInfo {
  method: Route['method'] | 'any'
  pattern: string
}

/** Paths no route matches (404) are observed as this pseudo-route. */
export const UNMATCHED: RouteInfo = { method: 'any', pattern: '(unmatched)' }

export interface ServerOptions<R extends Route = Route> {
  host: string
  port: number
  bodySizeMaxBytes: number
  /** The limit of raw bodies (`body: 'raw'`: uploads); default bodySizeMaxBytes. */
  rawBodySizeMaxBytes?: number
  inflightMax: number
  routes: R[]
  /** A handler threw something other than an ApiError (a bug): told the method and route pattern, never the URL (ids). */
  onError: (error: unknown, method: string, route: string) => void
  /**
   * Asked once per route at construction (and for UNMATCHED, and each pattern's 405) for the observer of
   * its requests; null (or no `observe`) means that route pays nothing per request, not even a clock read.
   */
  observe?: ((route: RouteInfo) => RouteObserver | null) | null
  /** Cluster mode: where requests for keys of other nodes go (unset: embedded mode, every request served here). */
  cluster?: ClusterRouting | null
  /** Cluster mode: this node's route hint, written on the answers of the keyed requests it serves. */
  routeHint?: RouteHint | null
}

/** The 503s of a full or stopping server say when to come back (another node, behind a load balancer). */
const RETRY_SOON: Record<string, string> = Object.freeze({ 'Retry-After': '1' }) as Record<string, string>

const STATUS_LINES: Record<number, string> = {
  200: '200 OK', 201: '201 Created', 204: '204 No Content', 301: '301 Moved Permanently', 304: '304 Not Modified', 400: '400 Bad Request', 401: '401 Unauthorized',
  403: '403 Forbidden', 404: '404 Not Found', 405: '405 Method Not Allowed', 409: '409 Conflict',
  413: '413 Payload Too Large', 415: '415 Unsupported Media Type', 429: '429 Too Many Requests',
  500: '500 Internal Server Error', 501: '501 Not Implemented', 503: '503 Service Unavailable',
}

// Fatal: invalid UTF-8 is refused (400), never silently turned into U+FFFD.
const decoder = new TextDecoder('utf-8', { fatal: true })

/** Per-request state, set whole in the constructor so every request has the same shape. */
class Exchange {
  aborted = false
  done = false
  /** A streamed answer waiting for the socket to drain: woken by onWritable, or by an abort. */
  wake: (() => void) | null = null
  /** A 'stream' route's body while it is read. */
  bodyStream: BodyStream | null = null
  /** Counted in `inflight` (requests turned away at the door are not). */
  counted = false
  readonly server: HttpServer
  /** null: a forwarded request (runForwarded), whose answer goes to `sink`. */
  readonly res: uWS.HttpResponse | null
  readonly method: string
  readonly url: string
  readonly params: string[]
  readonly contentType: string
  readonly contentLength: string
  readonly authorization: string
  readonly query: string
  readonly origin: string
  readonly cookie: string
  readonly host: string
  readonly ifNoneMatch: string
  readonly forwardedProto: string
  readonly forwardedFor: string
  readonly userAgent: string
  readonly idempotencyKey: string
  readonly forwardedKey: string
  readonly remoteAddress: string
  /** Why the request's framing is refused (RFC 9112: 400 and close), or null. */
  readonly framingError: string | null
  readonly observer: RouteObserver | null
  readonly startMs: number
  /** A forwarded request's answer goes here (runForwarded); null for a request of this node's clients. */
  readonly sink: ((reply: Reply) => void) | null
  auth: unknown = undefined
  /** Cluster mode: served here as its key's owner, so the answer carries this node's route hint. */
  hinted = false
  /**
   * `res` null: a forwarded request (runForwarded) read from `req`, its answer given to `sink`. Both
   * kinds set the same fields in the same order (one object shape).
   */
  constructor (server: HttpServer, res: uWS.HttpResponse | null, req: uWS.HttpRequest | ForwardedRequest, paramCount: number, observer: RouteObserver | null, sink: ((reply: Reply) => void) | null, forwardId = '') {
    this.server = server
    this.res = res
    this.observer = observer
    this.startMs = observer === null ? 0 : performance.now()
    if (res !== null) {
      const r = req as uWS.HttpRequest
      this.method = r.getMethod()
      this.url = r.getUrl()
      this.params = []
      for (let i = 0; i < paramCount; i++) this.params.push(decodeParam(r.getParameter(i) ?? ''))
      this.contentType = r.getHeader('content-type')
      this.contentLength = r.getHeader('content-length')
      this.authorization = r.getHeader('authorization')
      this.query = r.getQuery() ?? ''
      this.origin = r.getHeader('origin')
      this.cookie = r.getHeader('cookie')
      this.host = r.getHeader('host')
      this.ifNoneMatch = r.getHeader('if-none-match')
      this.forwardedProto = r.getHeader('x-forwarded-proto')
      this.forwardedFor = r.getHeader('x-forwarded-for')
      this.userAgent = r.getHeader('user-agent')
      this.idempotencyKey = r.getHeader('idempotency-key')
      this.forwardedKey = ''
      this.remoteAddress = Buffer.from(res.getRemoteAddressAsText()).toString()
      this.framingError = this.contentLength === '' && r.getHeader('transfer-encoding') === '' ? null : framingError(r)
    } else {
      const f = req as ForwardedRequest
      const h = f.headers
      this.method = f.method
      this.url = f.url
      this.params = f.params
      this.contentType = h['content-type'] ?? ''
      this.contentLength = f.body === null ? '' : String(f.body.byteLength)
      this.authorization = h.authorization ?? ''
      this.query = f.query
      this.origin = h.origin ?? ''
      this.cookie = h.cookie ?? ''
      this.host = h.host ?? ''
      this.ifNoneMatch = h['if-none-match'] ?? ''
      this.forwardedProto = h['x-forwarded-proto'] ?? ''
      this.forwardedFor = h['x-forwarded-for'] ?? ''
      this.userAgent = h['user-agent'] ?? ''
      this.idempotencyKey = h['idempotency-key'] ?? ''
      this.forwardedKey = forwardId === '' ? '' : FORWARDED_KEY_PREFIX + forwardId
      this.remoteAddress = f.remoteAddress
      this.framingError = null
    }
    this.sink = sink
  }
}

/** The headers a forwarded request carries: those a route reads (Request), only when present. */
function forwardedHeaders (exchange: Exchange): Record<string, string> {
  const headers: Record<string, string> = {}
  if (exchange.contentType !== '') headers['content-type'] = exchange.contentType
  if (exchange.authorization !== '') headers.authorization = exchange.authorization
  if (exchange.origin !== '') headers.origin = exchange.origin
  if (exchange.cookie !== '') headers.cookie = exchange.cookie
  if (exchange.host !== '') headers.host = exchange.host
  if (exchange.ifNoneMatch !== '') headers['if-none-match'] = exchange.ifNoneMatch
  if (exchange.forwardedProto !== '') headers['x-forwarded-proto'] = exchange.forwardedProto
  if (exchange.forwardedFor !== '') headers['x-forwarded-for'] = exchange.forwardedFor
  if (exchange.userAgent !== '') headers['user-agent'] = exchange.userAgent
  if (exchange.idempotencyKey !== '') headers['idempotency-key'] = exchange.idempotencyKey
  return headers
}

// Scratch of framingError's header walk (synchronous, so one set of counters serves every request).
let contentLengths = 0
let codings = 0
let framingProblem: string | null = null

function countFraming (key: string, value: string): void {
  if (key === 'content-length') {
    if (++contentLengths > 1) framingProblem ??= 'The request has more than one Content-Length header.'
    else if (!/^\d+$/.test(value.trim())) framingProblem ??= `Content-Length "${value.slice(0, 40)}" is not a number.`
  } else if (key === 'transfer-encoding') {
    if (++codings > 1) framingProblem ??= 'The request has more than one Transfer-Encoding header.'
    else if (value.trim().toLowerCase() !== 'chunked') framingProblem ??= `Transfer-Encoding "${value.slice(0, 40)}" is not supported; only chunked is.`
  }
}

/**
 * What RFC 9112 says to refuse with 400 and close, among what uWebSockets.js lets through to a
 * handler: a transfer coding other than chunked (uWS would read the body as chunked anyway), and more
 * than one Content-Length or Transfer-Encoding line (uWS reads the first; a proxy in front may read
 * another, or join them: request smuggling, issue 27), or a Content-Length that is not a number. Every
 * header line is looked at, and only requests that carry either header pay for the walk.
 */
function framingError (req: uWS.HttpRequest): string | null {
  contentLengths = 0
  codings = 0
  framingProblem = null
  req.forEach(countFraming)
  return framingProblem
}

function onAbort (this: Exchange): void {
  this.aborted = true
  this.bodyStream?.fail(new ApiError('body_incomplete'))
  if (this.wake !== null) this.wake()
  // A client gone mid-body (or a connection uWS dropped for bad framing) must free its slot.
  if (!this.done) {
    this.done = true
    if (this.observer !== null) this.observer(499, performance.now() - this.startMs, this.params)
    if (this.counted) this.server.settled()
  }
}

/** `R`: the routes' own type (src/http/route.ts adds their documentation), handed back by routes(). */
export class HttpServer<R extends Route = Route> {
  /** The native binding (src/http/uws.ts picks it by the running Node's ABI). */
  private readonly uws: UwsBinding
  private readonly app: uWS.TemplatedApp
  private readonly options: ServerOptions<R>
  /** A body declared larger than this is refused with the connection closed, rather than read and dropped. */
  private readonly discardMaxBytes: number
  private readonly cluster: ClusterRouting | null
  private readonly routeHint: RouteHint | null
  /** Each route by "<method> <pattern>", the name a forwarded request gives (every node serves the same list). */
  private readonly byName = new Map<string, { route: Route, paramCount: number, observer: RouteObserver | null }>()
  private listenSocket: uWS.us_listen_socket | null = null
  inflight = 0
  draining = false
  /** Called whenever inflight drops to zero while draining. */
  private idleWaiters: (() => void)[] = []
  /** Requests whose body was read in this turn of the event loop, run at its end (`bodyRead`). */
  private readonly readExchanges: Exchange[] = []
  private readonly readRoutes: Route[] = []
  private readonly readBodies: (string | Buffer)[] = []

  constructor (options: ServerOptions<R>) {
    this.options = options
    this.cluster = options.cluster ?? null
    this.routeHint = options.routeHint ?? null
    this.discardMaxBytes = Math.max(1 << 20, 4 * options.bodySizeMaxBytes)
    this.uws = loadUws()
    this.app = this.uws.App()
    const observe = options.observe ?? null
    const allowed = new Map<string, string[]>()
    for (const route of options.routes) {
      const paramCount = (route.pattern.match(/\/:/g) ?? []).length
      const observer = observe === null ? null : observe({ method: route.method, pattern: route.pattern })
      this.app[route.method](route.pattern, (res, req) => this.accept(res, req, route, paramCount, observer))
      this.byName.set(routeName(route), { route, paramCount, observer })
      const methods = allowed.get(route.pattern) ?? []
      methods.push(route.method === 'del' ? 'DELETE' : route.method.toUpperCase())
      allowed.set(route.pattern, methods)
    }
    for (const [pattern, methods] of allowed) {
      const allow = methods.join(', ')
      const observer = observe === null ? null : observe({ method: 'any', pattern })
      this.app.any(pattern, (res) => {
        res.onAborted(noop)
        this.respond(res, { status: 405, body: errorBody(new ApiError('method_not_allowed', `This path accepts ${allow}.`)), headers: { Allow: allow } }, observer)
      })
    }
    const unmatched = observe === null ? null : observe(UNMATCHED)
    this.app.any('/*', (res) => {
      res.onAborted(noop)
      this.respond(res, { status: 404, body: errorBody(new ApiError('not_found')) }, unmatched)
    })
  }

  /** Every route served (method, uWS pattern with `:name` parameters, role…), in registration order. */
  routes (): readonly R[] {
    return this.options.routes
  }

  listen (): Promise<number> {
    return new Promise((resolve, reject) => {
      // Exclusive: uWS otherwise binds with SO_REUSEPORT, so a second Beacon started on the same port
      // would start "fine" and take half the connections (with registries of its own).
      // (The typings have no host + options overload and no value for ListenOptions; both exist at runtime.)
      const listen = this.app.listen as unknown as (host: string, port: number, options: number, cb: (socket: uWS.us_listen_socket | false) => void) => void
      const { LIBUS_LISTEN_EXCLUSIVE_PORT } = this.uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }
      listen.call(this.app, this.options.host, this.options.port, LIBUS_LISTEN_EXCLUSIVE_PORT, (socket) => {
        if (socket === false) return reject(new Error(`cannot listen on ${this.options.host}:${this.options.port} (in use by another process, or not permitted)`))
        this.listenSocket = socket
        resolve(this.uws.us_socket_local_port(socket))
      })
    })
  }

  /** Stop accepting connections; resolves when no request is in flight. */
  drain (): Promise<void> {
    this.draining = true
    if (this.listenSocket !== null) {
      this.uws.us_listen_socket_close(this.listenSocket)
      this.listenSocket = null
    }
    if (this.inflight === 0) return Promise.resolve()
    return new Promise(resolve => { this.idleWaiters.push(resolve) })
  }

  /**
   * Counts the request in flight (unless the route is uncounted) and runs the route's guard; false when
   * either refused it (then it is answered; `closeOnRefusal`: the guard's refusal closes the connection).
   */
  private admit (exchange: Exchange, route: Route, closeOnRefusal: boolean): boolean {
    if (route.uncounted !== true) {
      if (this.inflight >= this.options.inflightMax) {
        this.finish(exchange, errorReply(new ApiError('overloaded', undefined, undefined, RETRY_SOON)), false)
        return false
      }
      this.inflight++
      exchange.counted = true
    }
    if (route.guard !== undefined) {
      try {
        exchange.auth = route.guard(exchange)
      } catch (error) {
        this.finish(exchange, errorReply(error as ApiError), closeOnRefusal)
        return false
      }
    }
    return true
  }

  private accept (res: uWS.HttpResponse, req: uWS.HttpRequest, route: Route, paramCount: number, observer: RouteObserver | null): void {
    const exchange = new Exchange(this, res, req, paramCount, observer, null)
    res.onAborted(onAbort.bind(exchange))
    if (exchange.framingError !== null) return this.finish(exchange, errorReply(new ApiError('bad_framing', exchange.framingError)), true)
    if (this.draining && route.whileDraining !== true) return this.finish(exchange, errorReply(new ApiError('shutting_down', undefined, undefined, RETRY_SOON)), true)
    if (!this.admit(exchange, route, route.body !== false)) return
    if (!route.body) return this.dispatch(exchange, route, undefined, undefined)
    if (route.body === 'stream') return this.acceptStream(exchange, res, route)

    const max = route.body === 'raw' ? this.options.rawBodySizeMaxBytes ?? this.options.bodySizeMaxBytes : this.options.bodySizeMaxBytes
    const declared = exchange.contentLength === '' ? 0 : Number(exchange.contentLength)
    if (declared > Math.max(this.discardMaxBytes, 2 * max)) return this.tooLarge(exchange, max, true)
    let chunks: Buffer[] | null = null
    let size = 0
    res.onData((chunk, isLast) => {
      if (exchange.done) return
      size += chunk.byteLength
      // Answered at once; uWS reads and drops the rest of the body, so the client is not cut off
      // mid-upload and the connection stays usable.
      if (size > max) return this.tooLarge(exchange, max, false)
      if (route.body === 'raw') {
        (chunks ??= []).push(Buffer.from(new Uint8Array(chunk)))
        if (isLast) this.bodyRead(exchange, route, Buffer.concat(chunks, size))
        return
      }
      let text: string
      try {
        if (isLast && chunks === null) {
          // The common case: the whole body in one chunk, decoded straight from uWS's buffer (one copy).
          text = decoder.decode(new Uint8Array(chunk))
        } else {
          // The ArrayBuffer is only valid during this callback: copy it.
          (chunks ??= []).push(Buffer.from(new Uint8Array(chunk)))
          if (!isLast) return
          text = decoder.decode(Buffer.concat(chunks, size))
        }
      } catch {
        return this.finish(exchange, errorReply(new ApiError('invalid_json', 'The body is not valid UTF-8.')), false)
      }
      this.bodyRead(exchange, route, text)
    })
  }

  /**
   * A request whose body is read runs at the end of this turn of the event loop, not inside uWS's
   * onData: uWS answers no request while another is pending on its connection, and closes the
   * connection instead when one arrives pipelined behind it, aborting the pending one
   * (docs/retries-and-limits.md, "Pipelined requests"). Bytes read together are parsed together, so
   * a request pipelined in them has aborted this one before it runs: none of them takes effect, and
   * the client's retry of each counts once.
   */
  private bodyRead (exchange: Exchange, route: Route, body: string | Buffer): void {
    this.readExchanges.push(exchange)
    this.readRoutes.push(route)
    this.readBodies.push(body)
    if (this.readExchanges.length === 1) setImmediate(this.runRead)
  }

  private readonly runRead = (): void => {
    const exchanges = this.readExchanges
    for (let i = 0; i < exchanges.length; i++) {
      const exchange = exchanges[i]!
      if (exchange.done) continue
      const body = this.readBodies[i]!
      if (typeof body === 'string') this.dispatchBody(exchange, this.readRoutes[i]!, body)
      else this.dispatch(exchange, this.readRoutes[i]!, body, body)
    }
    exchanges.length = 0
    this.readRoutes.length = 0
    this.readBodies.length = 0
  }

  /** A 'stream' body: the handler runs at once and reads the chunks as they arrive. */
  private acceptStream (exchange: Exchange, res: uWS.HttpResponse, route: Route): void {
    const max = route.streamMaxBytes ?? this.options.bodySizeMaxBytes
    const declared = exchange.contentLength === '' ? 0 : Number(exchange.contentLength)
    if (declared > max) return this.tooLarge(exchange, max, true)
    const body = exchange.bodyStream = new BodyStream(max, () => { if (!exchange.aborted) res.pause() }, () => { if (!exchange.aborted) res.resume() })
    res.onData((chunk, isLast) => body.push(chunk, isLast))
    this.dispatch(exchange, route, body, undefined)
  }

  private tooLarge (exchange: Exchange, max: number, closeConnection: boolean): void {
    this.finish(exchange, errorReply(new ApiError('body_too_large', `The body is larger than ${max} bytes.`)), closeConnection)
  }

  private dispatchBody (exchange: Exchange, route: Route, text: string): void {
    if (!isJson(exchange.contentType) && !(route.textJson === true && isTextPlain(exchange.contentType))) {
      return this.finish(exchange, errorReply(new ApiError('unsupported_media_type', 'Only application/json is accepted; send Content-Type: application/json.')), false)
    }
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      return this.finish(exchange, errorReply(new ApiError('invalid_json', 'The body is not valid JSON.')), false)
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return this.finish(exchange, errorReply(new ApiError('invalid_json', 'The body must be a JSON object.')), false)
    }
    try {
      checkForbiddenKeys(text, body)
    } catch (error) {
      return this.finish(exchange, errorReply(error as ApiError), false)
    }
    this.dispatch(exchange, route, body, text)
  }

  /**
   * Runs a request another node forwarded (src/cluster/forwarder.ts) through the same pipeline as a
   * request of this node's clients, and resolves with its answer as bytes. Never rejects. While
   * draining it answers "moved": the sender then waits for the partition's next owner. `id`: the
   * forward's id, the same on each of the sender's retries (the request's forwardedKey).
   */
  runForwarded (request: ForwardedRequest, id: string): Promise<ForwardedReply> {
    return new Promise(resolve => {
      const entry = this.byName.get(request.route)
      if (entry === undefined) return resolve(forwardedReply(errorReply(new ApiError('not_found'))))
      if (this.draining) return resolve(MOVED)
      const { route, paramCount, observer } = entry
      // A keyed request: its answer names this node, its owner (unless "moved": the sender tries the next).
      const hint = this.routeHint !== null && route.partitionKey !== undefined ? this.routeHint : null
      const sink = hint === null ? (reply: Reply) => resolve(forwardedReply(reply)) : (reply: Reply) => resolve(forwardedReply(reply, hint, request.headers.cookie ?? ''))
      const exchange = new Exchange(this, null, request, paramCount, observer, sink, id)
      if (!this.admit(exchange, route, false)) return
      if (!route.body) return this.dispatch(exchange, route, undefined, undefined)
      const bytes = request.body ?? EMPTY
      if (route.body === 'stream') {
        const body = new BodyStream(route.streamMaxBytes ?? this.options.bodySizeMaxBytes, noop, noop)
        body.push(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer, true)
        return this.dispatch(exchange, route, body, undefined)
      }
      const max = route.body === 'raw' ? this.options.rawBodySizeMaxBytes ?? this.options.bodySizeMaxBytes : this.options.bodySizeMaxBytes
      if (bytes.byteLength > max) return this.tooLarge(exchange, max, false)
      if (route.body === 'raw') {
        const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
        return this.dispatch(exchange, route, buffer, buffer)
      }
      let text: string
      try {
        text = decoder.decode(bytes)
      } catch {
        return this.finish(exchange, errorReply(new ApiError('invalid_json', 'The body is not valid UTF-8.')), false)
      }
      this.dispatchBody(exchange, route, text)
    })
  }

  /** `raw`: the body as received (text of a JSON body, bytes of a raw one), what a forward sends. */
  private dispatch (exchange: Exchange, route: Route, body: unknown, raw: string | Buffer | undefined): void {
    const request: Request = {
      method: exchange.method,
      url: exchange.url,
      params: exchange.params,
      authorization: exchange.authorization,
      query: exchange.query,
      origin: exchange.origin,
      cookie: exchange.cookie,
      host: exchange.host,
      ifNoneMatch: exchange.ifNoneMatch,
      forwardedProto: exchange.forwardedProto,
      forwardedFor: exchange.forwardedFor,
      userAgent: exchange.userAgent,
      contentType: exchange.contentType,
      idempotencyKey: exchange.idempotencyKey,
      forwardedKey: exchange.forwardedKey,
      remoteAddress: exchange.remoteAddress,
      body,
      auth: exchange.auth,
    }
    if (this.cluster !== null && route.partitionKey !== undefined && exchange.sink === null) {
      const key = route.partitionKey(request)
      if (key !== null) {
        if (!this.cluster.owns(key)) return this.forwardTo(this.cluster, exchange, route, request, key, raw)
        return this.dispatchOwned(this.cluster, exchange, route, request, key, raw)
      }
    }
    let out: Reply | Promise<Reply>
    let admitted: object | null = null
    try {
      if (route.admit !== undefined) admitted = route.admit(request)
      out = route.handler(request)
    } catch (error) {
      if (admitted !== null) route.release!(admitted)
      return this.finish(exchange, this.failure(error, request, route), false)
    }
    if (out instanceof Promise) {
      out.then(reply => {
        if (admitted !== null) route.release!(admitted)
        this.finish(exchange, reply, false)
      }, error => {
        if (admitted !== null) route.release!(admitted)
        this.finish(exchange, this.failure(error, request, route), false)
      })
    } else {
      if (admitted !== null) route.release!(admitted)
      this.finish(exchange, out, false)
    }
  }

  /**
   * Cluster mode, a key this node owns: served here, and sent to the partition's new owner when this
   * node lost the partition while writing it (503 partition_moved: nothing was acknowledged).
   */
  private dispatchOwned (cluster: ClusterRouting, exchange: Exchange, route: Route, request: Request, key: EntityKey, raw: string | Buffer | undefined): void {
    const settle = (reply: Reply): void => {
      if (isMoved(reply)) return this.forwardTo(cluster, exchange, route, request, key, raw)
      exchange.hinted = this.routeHint !== null
      this.finish(exchange, reply, false)
    }
    let admitted: object | null = null
    const release = (): void => { if (admitted !== null) route.release!(admitted) }
    try {
      if (route.admit !== undefined) admitted = route.admit(request)
      Promise.resolve(route.handler(request)).then(reply => {
        release()
        settle(reply)
      }, error => {
        release()
        settle(this.failure(error, request, route))
      })
    } catch (error) {
      release()
      settle(this.failure(error, request, route))
    }
  }

  /** Cluster mode, a key another node owns: the request goes there and its answer is written as is. */
  private forwardTo (cluster: ClusterRouting, exchange: Exchange, route: Route, request: Request, key: EntityKey, raw: string | Buffer | undefined): void {
    const forwarded: ForwardedRequest = {
      route: routeName(route),
      method: exchange.method,
      url: exchange.url,
      query: exchange.query,
      params: exchange.params,
      headers: forwardedHeaders(exchange),
      remoteAddress: exchange.remoteAddress,
      body: raw === undefined ? null : typeof raw === 'string' ? Buffer.from(raw, 'utf8') : raw,
    }
    let out: Promise<ForwardedReply>
    try {
      out = cluster.forward(key, forwarded)
    } catch (error) {
      return this.finish(exchange, this.failure(error, request, route), false)
    }
    out.then(
      reply => this.finish(exchange, { status: reply.status, contentType: reply.contentType, body: reply.body ?? EMPTY, ...(reply.headers === null ? {} : { headers: reply.headers }) }, false),
      error => this.finish(exchange, this.failure(error, request, route), false)
    )
  }

  private failure (error: unknown, request: Request, route: Route): Reply {
    if (error instanceof ApiError) return errorReply(error)
    this.options.onError(error, request.method, route.pattern)
    return errorReply(new ApiError('internal'))
  }

  private finish (exchange: Exchange, reply: Reply, closeConnection: boolean): void {
    if (exchange.done) return
    if (reply.stream !== undefined && exchange.res !== null && !exchange.aborted) {
      this.stream(exchange, exchange.res, reply, reply.stream)
      return
    }
    exchange.done = true
    // Answered before its streamed body ended (a refusal): the rest is read and dropped.
    exchange.bodyStream?.drop()
    if (exchange.sink !== null) exchange.sink(reply)
    else if (!exchange.aborted) {
      const res = exchange.res!
      res.cork(() => this.write(res, reply, closeConnection, exchange))
    }
    if (exchange.observer !== null) exchange.observer(reply.status, performance.now() - exchange.startMs, exchange.params)
    if (exchange.counted) this.settled()
  }

  /**
   * Write a streamed answer: each chunk corked, waiting for the socket to drain when uWS buffers it.
   * The exchange stays in flight (and its slot taken) until the last chunk or an abort, which stops
   * the producer (its `return`).
   */
  private stream (exchange: Exchange, res: uWS.HttpResponse, reply: Reply, body: AsyncIterable<string | Buffer>): void {
    res.cork(() => {
      res.writeStatus(STATUS_LINES[reply.status] ?? `${reply.status} Unknown`)
      res.writeHeader('Content-Type', reply.contentType ?? 'application/octet-stream')
      if (reply.headers !== undefined) for (const name in reply.headers) res.writeHeader(name, reply.headers[name]!)
    })
    const chunks = body[Symbol.asyncIterator]()
    // With a writable handler registered, uWS no longer drains what it buffered on its own when the
    // socket can take more: the handler does (an empty cork's uncork writes it out), then wakes the pump.
    res.onWritable(() => {
      if (exchange.aborted) return true
      res.cork(noop)
      const wake = exchange.wake
      exchange.wake = null
      if (wake !== null) wake()
      return true
    })
    const pump = async (): Promise<void> => {
      for (;;) {
        const next = await chunks.next()
        if (exchange.aborted) return
        if (next.done === true) break
        let drained = true
        res.cork(() => { drained = res.write(next.value) })
        // Buffered past what the socket took: wait until it takes more (or the client goes away).
        if (!drained) await new Promise<void>(resolve => { exchange.wake = resolve })
        if (exchange.aborted) return
      }
      res.cork(() => res.end())
    }
    const done = (): void => {
      if (exchange.aborted) {
        chunks.return?.(undefined).catch(noop)
        return
      }
      if (exchange.done) return
      exchange.done = true
      if (exchange.observer !== null) exchange.observer(reply.status, performance.now() - exchange.startMs, exchange.params)
      if (exchange.counted) this.settled()
    }
    pump().then(done, (error: unknown) => {
      this.options.onError(error, exchange.method, 'stream')
      if (!exchange.aborted) res.close()
      exchange.aborted = true
      done()
    })
  }

  settled (): void {
    this.inflight--
    if (this.inflight === 0 && this.idleWaiters.length > 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve()
    }
  }

  private respond (res: uWS.HttpResponse, reply: Reply, observer: RouteObserver | null): void {
    const startMs = observer === null ? 0 : performance.now()
    res.cork(() => this.write(res, reply, false, null))
    if (observer !== null) observer(reply.status, performance.now() - startMs, NO_PARAMS)
  }

  /** `exchange`: the request answered (null: answered before one was made), for the route hint. */
  private write (res: uWS.HttpResponse, reply: Reply, closeConnection: boolean, exchange: Exchange | null): void {
    const text = reply.contentType !== undefined
    res.writeStatus(STATUS_LINES[reply.status] ?? `${reply.status} Unknown`)
    res.writeHeader('Content-Type', text ? reply.contentType! : 'application/json')
    // Errors echo what a request sent (a name, a field): never let a browser sniff them into HTML.
    if (reply.status >= 400) res.writeHeader('X-Content-Type-Options', 'nosniff')
    if (reply.headers !== undefined) for (const name in reply.headers) res.writeHeader(name, reply.headers[name]!)
    if (exchange !== null && exchange.hinted) this.routeHint!.write(res, exchange.cookie)
    res.end(reply.status === 204 || reply.status === 304 ? undefined : text ? reply.body as string | Buffer : JSON.stringify(reply.body), closeConnection)
  }
}

function isTextPlain (contentType: string): boolean {
  const semi = contentType.indexOf(';')
  return (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase() === 'text/plain'
}

function isJson (contentType: string): boolean {
  // "application/json", optionally with parameters such as "; charset=utf-8"; case-insensitive.
  if (contentType.length < 16) return false
  const semi = contentType.indexOf(';')
  const type = (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase()
  return type === 'application/json'
}

export function errorBody (error: ApiError): { status: number, message: string, errors: ErrorItem[] } {
  return { status: error.status, message: error.message, errors: error.items }
}

export function errorReply (error: ApiError): Reply {
  return error.headers === null
    ? { status: error.status, body: errorBody(error) }
    : { status: error.status, body: errorBody(error), headers: error.headers }
}

/** A malformed %-escape is kept as sent: it then simply matches no record (404), never throws. */
function decodeParam (raw: string): string {
  try {
    return decodeURIComponent(raw)
  } catch {
    return raw
  }
}

const NO_PARAMS: readonly string[] = []
const EMPTY = Buffer.alloc(0)
/** What a node that may not serve a forwarded request answers (draining): the sender tries the next owner. */
const MOVED: ForwardedReply = { status: 503, contentType: 'application/json', headers: null, body: null, moved: true }

function routeName (route: Route): string {
  return `${route.method} ${route.pattern}`
}

/** A 503 partition_moved: this node lost the key's partition while serving it, and nothing was acknowledged. */
function isMoved (reply: Reply): boolean {
  return reply.status === 503 && (reply.body as { errors?: { code?: unknown }[] } | undefined)?.errors?.[0]?.code === 'partition_moved'
}

/**
 * An answer as bytes, written as is by the node that forwarded the request (see write()); `hint`: with
 * this node's route hint (a keyed request, `cookie` the request's Cookie header).
 */
function forwardedReply (reply: Reply, hint: RouteHint | null = null, cookie = ''): ForwardedReply {
  const text = reply.contentType !== undefined
  let body: Uint8Array | null = null
  if (reply.status !== 204 && reply.status !== 304) {
    if (text) body = typeof reply.body === 'string' ? Buffer.from(reply.body, 'utf8') : reply.body as Buffer
    else {
      const json = JSON.stringify(reply.body) as string | undefined
      body = json === undefined ? null : Buffer.from(json, 'utf8')
    }
  }
  const moved = isMoved(reply)
  const headers = hint === null || moved ? reply.headers ?? null : { ...reply.headers, ...hint.headers(cookie) }
  return { status: reply.status, contentType: text ? reply.contentType! : 'application/json', headers, body, moved }
}

function noop (): void {}
