// The Node client of Beacon's HTTP API (docs/client.md): the public API and, with the admin key, the
// admin API (client.admin). Typed from the route schemas (types.ts); every public write carries an
// Idempotency-Key (made per call unless given, kept across its retries); retries, routing to the owner
// of each key in cluster mode and errors as call.ts says.

import { randomUUID } from 'node:crypto'
import { AdminApi } from './admin.js'
import { Caller, type Call } from './call.js'
import { InvalidArgumentError } from './errors.js'
import { HINT_REFRESH_INTERVAL_MS, parseOptions, type ClientOptions, type ParsedOptions } from './options.js'
import { RouteMap, validMap } from './route-map.js'
import { Transport } from './transport.js'
import type * as T from './types.js'

/** Options of one write. */
export interface WriteOptions {
  /** The Idempotency-Key to send (1 to 255 printable ASCII characters); default a new UUID per call. */
  idempotencyKey?: string
}

export class BeaconClient {
  /** The admin API (needs `adminKey`). */
  readonly admin: AdminApi
  private readonly options: ParsedOptions
  private readonly transport: Transport
  private readonly routes: RouteMap | null
  private readonly caller: Caller

  constructor (options: ClientOptions) {
    this.options = parseOptions(options)
    this.transport = new Transport({ connectionsPerNode: this.options.connectionsPerNode, timeoutMs: this.options.timeoutMs })
    this.routes = this.options.routing === 'owner'
      ? new RouteMap({ source: () => this.fetchRoutes(), refreshMs: this.options.routesRefreshMs, hintIntervalMs: HINT_REFRESH_INTERVAL_MS, nowMs: this.options.nowMs })
      : null
    this.caller = new Caller({
      transport: this.transport, nodes: this.options.nodes, routes: this.routes, adminKey: this.options.adminKey,
      attempts: this.options.attempts, backoff: this.options.backoff, sleep: this.options.sleep, random: this.options.random, onAttempt: this.options.onAttempt,
    })
    this.admin = new AdminApi(call => this.caller.call(call), this.options.adminKey !== null)
  }

  /** Fire an event; answers the campaigns the visitor is eligible for (POST /campaigns/query). */
  campaignsQuery (event: T.EventRequest, options?: WriteOptions): Promise<T.CampaignsAnswer> {
    const body = this.withAccount(event, false)
    return this.write('/campaigns/query', body, visitorKey(body), options)
  }

  /** Link the visitor to a profile: an event with the profileId and its signature (docs/api.md, "Identity"). */
  identify (event: T.IdentifyRequest, options?: WriteOptions): Promise<T.CampaignsAnswer> {
    return this.campaignsQuery(event, options)
  }

  /**
   * Record many events at once (POST /events/batch). An event without a messageId gets one (a UUID), so
   * that a retry of the batch applies no event twice; each event's outcome is in `results`, in order.
   */
  eventsBatch (batch: T.EventBatch): Promise<T.BatchAnswer> {
    const body = this.withAccount(batch, false)
    const events = body.events.map(event => event.messageId === undefined ? { ...event, messageId: randomUUID() } : event)
    const first = events[0]
    // Any node places each event at its owner; the first event's owner saves that hop for it at least.
    const key = first === undefined || typeof first.visitorId !== 'string' ? null : { account: body.account, id: first.visitorId.toLowerCase() }
    return this.caller.call({ method: 'POST', path: '/events/batch', body: { ...body, events }, admin: false, key, idempotent: true, idempotencyKey: null })
  }

  visitorsQuery (query: T.VisitorQuery): Promise<T.EntityAnswer> {
    const body = this.withAccount(query, true)
    return this.read('/visitors/query', body, visitorKey(body))
  }

  profilesQuery (query: T.ProfileQuery): Promise<T.EntityAnswer> {
    const body = this.withAccount(query, true)
    return this.read('/profiles/query', body, profileKey(body))
  }

  visitorsAttributes (update: T.VisitorAttributes, options?: WriteOptions): Promise<T.VisitorSaved> {
    const body = this.withAccount(update, true)
    return this.write('/visitors/attributes', body, visitorKey(body), options)
  }

  profilesAttributes (update: T.ProfileAttributes, options?: WriteOptions): Promise<T.ProfileSaved> {
    const body = this.withAccount(update, true)
    return this.write('/profiles/attributes', body, profileKey(body), options)
  }

  visitorsSegments (change: T.VisitorSegments, options?: WriteOptions): Promise<T.VisitorSegmentsSaved> {
    const body = this.withAccount(change, true)
    return this.write('/visitors/segments', body, visitorKey(body), options)
  }

  profilesSegments (change: T.ProfileSegments, options?: WriteOptions): Promise<T.ProfileSegmentsSaved> {
    const body = this.withAccount(change, true)
    return this.write('/profiles/segments', body, profileKey(body), options)
  }

  /** Ask for the route map now (cluster mode); resolves with its version, null when none is known. */
  async refreshRoutes (): Promise<number | null> {
    if (this.routes === null) return null
    await this.routes.refresh()
    return this.routes.version
  }

  /** Closes every connection; calls made afterwards fail. */
  close (): Promise<void> {
    return this.transport.close()
  }

  private write<R> (path: string, body: object, key: Call['key'], options: WriteOptions | undefined): Promise<R> {
    const idempotencyKey = options?.idempotencyKey ?? randomUUID()
    return this.caller.call({ method: 'POST', path, body, admin: false, key, idempotent: true, idempotencyKey })
  }

  private read<R> (path: string, body: object, key: Call['key']): Promise<R> {
    return this.caller.call({ method: 'POST', path, body, admin: false, key, idempotent: true, idempotencyKey: null })
  }

  /** The body with the client's account (and token, for token endpoints) where it names none; the account first, as the server reads it. */
  private withAccount<B extends { account?: string, token?: string }> (body: B, token: boolean): B & { account: string } {
    if (typeof body !== 'object' || body === null) throw new InvalidArgumentError('the request body must be an object')
    const account = body.account ?? this.options.account
    if (account === null || account === undefined) throw new InvalidArgumentError('account: name it in the body or in the client\'s options')
    const filled = { ...body, account }
    if (token && filled.token === undefined && this.options.token !== null) filled.token = this.options.token
    return filled
  }

  /** GET /cluster/routes: of `routesUrl`, else of each node in turn; null when none serves one. */
  private async fetchRoutes (): Promise<T.RouteMapAnswer | null> {
    const exchange = { method: 'GET' as const, path: '/cluster/routes', headers: {}, body: null }
    const sources = this.options.routesUrl === null ? this.options.nodes : [this.options.routesUrl]
    for (const source of sources) {
      try {
        const answer = this.options.routesUrl === null
          ? await this.transport.send(source, exchange)
          : await this.transport.send(source, { ...exchange, path: '' })
        if (answer.status === 200 && validMap(answer.body)) return answer.body
      } catch {}
    }
    return null
  }
}

/** The key of a visitor's call as the server places it: account and visitorId in lower case. */
function visitorKey (body: { account: string, visitorId?: unknown }): Call['key'] {
  return typeof body.visitorId === 'string' ? { account: body.account.toLowerCase(), id: body.visitorId.toLowerCase() } : null
}

/** A profile's: the account in lower case, the profileId as it is. */
function profileKey (body: { account: string, profileId?: unknown }): Call['key'] {
  return typeof body.profileId === 'string' ? { account: body.account.toLowerCase(), id: body.profileId } : null
}
