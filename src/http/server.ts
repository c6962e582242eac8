// The HTTP frontend on uWebSockets.js, with no framework on top. Every request is handled the same
// way: register onAborted first, copy what is needed out of `req` before anything async, read the body
// with onData (bounded), then run the route's handler and write the reply inside `cork`, unless the
// client went away.

import uWS from 'uWebSockets.js'
import { ApiError, type ErrorItem } from '../errors.js'
import { checkForbiddenKeys } from './validate.js'

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
  readonly contentType: string
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
}

export type Handler = (request: Request) => Reply | Promise<Reply>

/** Who may call an admin route: a role of the account's panel users, 'admin' (the admin key only) or 'public'. */
export type RouteRole = 'viewer' | 'editor' | 'owner' | 'admin' | 'public'

export interface Route {
  method: 'get' | 'post' | 'put' | 'patch' | 'del' | 'options'
  pattern: string
  /** Whether the route takes a JSON body; 'raw': any body, handed over as a Buffer (uploads). */
  body: boolean | 'raw'
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
}

const STATUS_LINES: Record<number, string> = {
  200: '200 OK', 201: '201 Created', 204: '204 No Content', 301: '301 Moved Permanently', 304: '304 Not Modified', 400: '400 Bad Request', 401: '401 Unauthorized',
  403: '403 Forbidden', 404: '404 Not Found', 405: '405 Method Not Allowed', 409: '409 Conflict',
  413: '413 Payload Too Large', 415: '415 Unsupported Media Type', 429: '429 Too Many Requests',
  500: '500 Internal Server Error', 503: '503 Service Unavailable',
}

// Fatal: invalid UTF-8 is refused (400), never silently turned into U+FFFD.
const decoder = new TextDecoder('utf-8', { fatal: true })

/** Per-request state, set whole in the constructor so every request has the same shape. */
class Exchange {
  aborted = false
  done = false
  /** Counted in `inflight` (requests turned away at the door are not). */
  counted = false
  readonly server: HttpServer
  readonly res: uWS.HttpResponse
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
  readonly remoteAddress: string
  /** Why the request's framing is refused (RFC 9112: 400 and close), or null. */
  readonly framingError: string | null
  readonly observer: RouteObserver | null
  readonly startMs: number
  auth: unknown = undefined
  constructor (server: HttpServer, res: uWS.HttpResponse, req: uWS.HttpRequest, paramCount: number, observer: RouteObserver | null) {
    this.server = server
    this.res = res
    this.observer = observer
    this.startMs = observer === null ? 0 : performance.now()
    this.method = req.getMethod()
    this.url = req.getUrl()
    this.params = []
    for (let i = 0; i < paramCount; i++) this.params.push(decodeParam(req.getParameter(i) ?? ''))
    this.contentType = req.getHeader('content-type')
    this.contentLength = req.getHeader('content-length')
    this.authorization = req.getHeader('authorization')
    this.query = req.getQuery() ?? ''
    this.origin = req.getHeader('origin')
    this.cookie = req.getHeader('cookie')
    this.host = req.getHeader('host')
    this.ifNoneMatch = req.getHeader('if-none-match')
    this.forwardedProto = req.getHeader('x-forwarded-proto')
    this.remoteAddress = Buffer.from(res.getRemoteAddressAsText()).toString()
    this.framingError = this.contentLength === '' && req.getHeader('transfer-encoding') === '' ? null : framingError(req)
  }
}

// Scratch of framingError's header walk (synchronous, so one set of counters serves every request).
let contentLengths = 0
let firstContentLength = ''
let contentLengthsDiffer = false

function countFraming (key: string, value: string): void {
  if (key !== 'content-length') return
  if (contentLengths === 0) firstContentLength = value
  else if (value !== firstContentLength) contentLengthsDiffer = true
  contentLengths++
}

/**
 * What RFC 9112 says to refuse with 400 and close, among what uWebSockets.js lets through to a
 * handler: a transfer coding other than chunked (uWS would read the body as chunked anyway), and
 * Content-Length headers that disagree (uWS reads the first; a proxy in front may read another: request
 * smuggling). Only requests that carry either header pay for the walk over their headers.
 */
function framingError (req: uWS.HttpRequest): string | null {
  const coding = req.getHeader('transfer-encoding')
  if (coding !== '' && coding.trim().toLowerCase() !== 'chunked') return `Transfer-Encoding "${coding.slice(0, 40)}" is not supported; only chunked is.`
  contentLengths = 0
  contentLengthsDiffer = false
  req.forEach(countFraming)
  if (contentLengthsDiffer) return 'The request has Content-Length headers that disagree.'
  return null
}

function onAbort (this: Exchange): void {
  this.aborted = true
  // A client gone mid-body (or a connection uWS dropped for bad framing) must free its slot.
  if (!this.done) {
    this.done = true
    if (this.observer !== null) this.observer(499, performance.now() - this.startMs, this.params)
    if (this.counted) this.server.settled()
  }
}

/** `R`: the routes' own type (src/http/route.ts adds their documentation), handed back by routes(). */
export class HttpServer<R extends Route = Route> {
  private readonly app: uWS.TemplatedApp
  private readonly options: ServerOptions<R>
  /** A body declared larger than this is refused with the connection closed, rather than read and dropped. */
  private readonly discardMaxBytes: number
  private listenSocket: uWS.us_listen_socket | null = null
  inflight = 0
  draining = false
  /** Called whenever inflight drops to zero while draining. */
  private idleWaiters: (() => void)[] = []

  constructor (options: ServerOptions<R>) {
    this.options = options
    this.discardMaxBytes = Math.max(1 << 20, 4 * options.bodySizeMaxBytes)
    this.app = uWS.App()
    const observe = options.observe ?? null
    const allowed = new Map<string, string[]>()
    for (const route of options.routes) {
      const paramCount = (route.pattern.match(/\/:/g) ?? []).length
      const observer = observe === null ? null : observe({ method: route.method, pattern: route.pattern })
      this.app[route.method](route.pattern, (res, req) => this.accept(res, req, route, paramCount, observer))
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
      const { LIBUS_LISTEN_EXCLUSIVE_PORT } = uWS as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }
      listen.call(this.app, this.options.host, this.options.port, LIBUS_LISTEN_EXCLUSIVE_PORT, (socket) => {
        if (socket === false) return reject(new Error(`cannot listen on ${this.options.host}:${this.options.port} (in use by another process, or not permitted)`))
        this.listenSocket = socket
        resolve(uWS.us_socket_local_port(socket))
      })
    })
  }

  /** Stop accepting connections; resolves when no request is in flight. */
  drain (): Promise<void> {
    this.draining = true
    if (this.listenSocket !== null) {
      uWS.us_listen_socket_close(this.listenSocket)
      this.listenSocket = null
    }
    if (this.inflight === 0) return Promise.resolve()
    return new Promise(resolve => { this.idleWaiters.push(resolve) })
  }

  private accept (res: uWS.HttpResponse, req: uWS.HttpRequest, route: Route, paramCount: number, observer: RouteObserver | null): void {
    const exchange = new Exchange(this, res, req, paramCount, observer)
    res.onAborted(onAbort.bind(exchange))
    if (exchange.framingError !== null) return this.finish(exchange, errorReply(new ApiError('bad_framing', exchange.framingError)), true)
    if (this.draining && route.whileDraining !== true) return this.finish(exchange, errorReply(new ApiError('shutting_down')), true)
    if (route.uncounted !== true) {
      if (this.inflight >= this.options.inflightMax) return this.finish(exchange, errorReply(new ApiError('overloaded')), false)
      this.inflight++
      exchange.counted = true
    }
    if (route.guard !== undefined) {
      try {
        exchange.auth = route.guard(exchange)
      } catch (error) {
        return this.finish(exchange, errorReply(error as ApiError), route.body !== false)
      }
    }
    if (!route.body) return this.dispatch(exchange, route, undefined)

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
        if (isLast) this.dispatch(exchange, route, Buffer.concat(chunks, size))
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
      this.dispatchBody(exchange, route, text)
    })
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
    this.dispatch(exchange, route, body)
  }

  private dispatch (exchange: Exchange, route: Route, body: unknown): void {
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
      contentType: exchange.contentType,
      remoteAddress: exchange.remoteAddress,
      body,
      auth: exchange.auth,
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

  private failure (error: unknown, request: Request, route: Route): Reply {
    if (error instanceof ApiError) return errorReply(error)
    this.options.onError(error, request.method, route.pattern)
    return errorReply(new ApiError('internal'))
  }

  private finish (exchange: Exchange, reply: Reply, closeConnection: boolean): void {
    if (exchange.done) return
    exchange.done = true
    if (!exchange.aborted) {
      exchange.res.cork(() => this.write(exchange.res, reply, closeConnection))
    }
    if (exchange.observer !== null) exchange.observer(reply.status, performance.now() - exchange.startMs, exchange.params)
    if (exchange.counted) this.settled()
  }

  settled (): void {
    this.inflight--
    if (this.inflight === 0 && this.idleWaiters.length > 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve()
    }
  }

  private respond (res: uWS.HttpResponse, reply: Reply, observer: RouteObserver | null): void {
    const startMs = observer === null ? 0 : performance.now()
    res.cork(() => this.write(res, reply, false))
    if (observer !== null) observer(reply.status, performance.now() - startMs, NO_PARAMS)
  }

  private write (res: uWS.HttpResponse, reply: Reply, closeConnection: boolean): void {
    const text = reply.contentType !== undefined
    res.writeStatus(STATUS_LINES[reply.status] ?? `${reply.status} Unknown`)
    res.writeHeader('Content-Type', text ? reply.contentType! : 'application/json')
    if (reply.headers !== undefined) for (const name in reply.headers) res.writeHeader(name, reply.headers[name]!)
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

function noop (): void {}
