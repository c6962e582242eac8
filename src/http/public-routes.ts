// The eight public endpoints (docs/api.md, "Public API"). Order of checks, the same everywhere: the account's
// in-flight share and rate when the body names an existing account (503, 429: account-limits.ts),
// schema (400), account (404), verified identity (401, /campaigns/query), token (401, 403), the
// token's rate (429), attribute permissions (403); then the actor.
//
// Browsers (any request with an Origin header) are checked against the account's allowed origins
// before the schema, compiled when the account changes. A preflight carries no body, so browser calls
// name the account in the query string too (`?account=<id>`): the preflight is answered from it, and
// the body's account must be the same. Token endpoints answer browsers only when the account allows it.

import type { TSchema } from 'typebox'
import { ApiError, errorItem } from '../errors.js'
import { fieldsExcept } from '../fields-except.js'
import type { CorsHeaders } from '../auth/origins.js'
import { allowsAttribute, canRead, canWrite, parseToken, secretMatches, type TokenRecord } from '../auth/tokens.js'
import type { Clock } from '../clock.js'
import type { Catalogs } from '../catalog/catalogs.js'
import type { BrowserAccess } from '../catalog/accounts.js'
import type { ActorRuntime, ReplyOf } from '../../actors/runtime.js'
import type { EntityView } from '../../actors/entity.js'
import type { EventBody, VisitorKind, VisitorMessage, VisitorReplies } from '../../actors/visitor.js'
import type { ProfileKind, ProfileMessage, ProfileReplies } from '../../actors/profile.js'
import * as S from './schemas.js'
import { validator } from '../validator.js'
import { errorReply, type EntityKey, type Reply, type Request } from './server.js'
import { EXAMPLE_ACCOUNT, EXAMPLE_TOKEN, EXAMPLE_VISITOR, json, type QueryParameter, type RouteDefinition, type RouteDoc } from './route.js'
import * as R from './reply-schemas.js'
import { answerOf, claimOf } from './idempotency-key.js'
import { clientAddress } from './client-address.js'
import type { IdempotencyClaim } from '../../actors/idempotent.js'
import type { AccountLimits, AccountSlot } from './account-limits.js'
import { BATCH_PATTERN, eventBatch, LOCAL_PLACEMENT, type EventPlacement } from './event-batch.js'

export interface PublicDeps {
  catalogs: Catalogs
  runtime: ActorRuntime
  clock: Clock
  visitors: VisitorKind
  profiles: ProfileKind
  /**
   * After a durable write: the outbox position it started from; returns a promise when the account has
   * sync webhooks to call before the answer (bounded by their timeouts), else null.
   */
  outboxMark: () => number
  afterWrite: (account: string, fromSeq: number) => Promise<void> | null
  accountLimits: AccountLimits
  /** Cluster mode: this node's share of each token's rate, in (0, 1] (src/cluster/rate-shares.ts); default all of it. */
  rateShare?: () => number
  /** Report counting of each answered event (src/reports/counters.ts): in memory, no write. */
  countEvent?: ((account: string, kind: string, visitorId: string, campaigns: readonly { id: string }[], campaignId: unknown, nowMs: number) => void) | null
  /** Where each event of a batch is applied (cluster mode: its partition's owner); default here. */
  placement?: EventPlacement
  /** The proxies whose X-Forwarded-For names the client (trustedProxySet of BEACON_TRUSTED_PROXIES). */
  trustedProxies?: ReadonlySet<string>
}

const NO_PROXIES: ReadonlySet<string> = new Set()

/** The event with `clientIp` and `userAgent` of the request that brought it, where it has none of its own. */
function withClient (event: EventBody, request: Request, trustedProxies: ReadonlySet<string>): EventBody {
  const stamped: EventBody = { ...event }
  if (typeof event.clientIp !== 'string') {
    const address = clientAddress(request.remoteAddress, request.forwardedFor, trustedProxies)
    if (address !== '') stamped.clientIp = address
  }
  if (typeof event.userAgent !== 'string' && request.userAgent !== '') stamped.userAgent = request.userAgent.slice(0, USER_AGENT_MAX)
  return stamped
}

/** The longest user agent kept (real ones are a few hundred characters). */
const USER_AGENT_MAX = 512

const validateEvent = validator(S.EventRequest)
const validateProfileQuery = validator(S.ProfileQuery)
const validateVisitorQuery = validator(S.VisitorQuery)
const validateProfileAttributes = validator(S.ProfileAttributes)
const validateVisitorAttributes = validator(S.VisitorAttributes)
const validateProfileSegments = validator(S.ProfileSegments)
const validateVisitorSegments = validator(S.VisitorSegments)

type Mode = 'read' | 'write'

/** How long a browser may cache a preflight answer: an origin removed from allowedOrigins is refused by then. */
export const PREFLIGHT_MAX_AGE_SECONDS = 600

/** Browsers name the account in the query string too: their preflight carries no body. */
const ACCOUNT_QUERY: QueryParameter = {
  name: 'account',
  description: 'The account (browser calls): the preflight is answered for it; when the body names one too, they must be equal.',
  schema: { type: 'string', format: 'uuid' } as TSchema,
}
/** The public writes take an Idempotency-Key (docs/retries-and-limits.md, "Idempotent writes"). */
const IDEMPOTENCY_KEY: QueryParameter = {
  name: 'Idempotency-Key',
  description: 'Makes the write safe to retry: a retry with the same key, endpoint and body within 24 hours gets the first answer ' +
    '(with the response header Idempotent-Replayed: true) and changes nothing more; the key with another body is refused (422). ' +
    '1 to 255 printable ASCII characters; one per write, kept across its retries.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' } as TSchema,
}
const IDEMPOTENCY_ERRORS = ['invalid_idempotency_key', 'idempotency_key_reused'] as const
const BROWSER_ERRORS = ['origin_not_allowed'] as const
const TOKEN_BROWSER_ERRORS = ['origin_not_allowed', 'browser_token_forbidden'] as const

/** The documentation of a public endpoint's preflight; `tokens`: a token endpoint. */
function preflightDoc (tokens: boolean): RouteDoc {
  return {
    summary: 'CORS preflight',
    description: 'With an Origin header: 204 with Access-Control-Allow-Origin (the origin), -Methods, -Headers and -Max-Age when the ' +
      'account (query string) allows the origin' + (tokens ? ' and allowBrowserTokens is on' : '') + '; refused otherwise, without CORS headers. ' +
      'Without an Origin header: 204 with Allow.',
    tag: 'Browsers', query: [ACCOUNT_QUERY],
    ok: { status: 204, description: 'Allowed (CORS headers), or a plain OPTIONS (Allow).', schema: R.NoBody, contentType: null },
    errors: ['account_not_found', ...(tokens ? TOKEN_BROWSER_ERRORS : BROWSER_ERRORS)],
  }
}

/** The proof of a signed identity: checked, never recorded nor passed on. */
const SIGNATURE: ReadonlySet<string> = new Set(['profileIdSignature'])

export function publicRoutes ({ catalogs, runtime, clock, visitors, profiles, outboxMark, afterWrite, accountLimits, rateShare = whole, countEvent = null, placement = LOCAL_PLACEMENT, trustedProxies = NO_PROXIES }: PublicDeps): RouteDefinition[] {
  function requireAccount (account: string): void {
    if (catalogs.accounts.active(account) === undefined) throw new ApiError('account_not_found')
  }

  function authenticate (account: string, token: string | undefined, mode: Mode): TokenRecord {
    if (token === undefined) throw new ApiError('token_missing', 'This endpoint needs a token: send it in the "token" field.', '/token')
    const parsed = parseToken(token)
    const live = parsed === null ? undefined : catalogs.tokens.get(parsed.id)
    if (parsed === null || live === undefined || !secretMatches(parsed.secret, live.record.hash) || live.record.revokedAt !== null) {
      throw new ApiError('token_invalid', undefined, '/token')
    }
    const record = live.record
    if (record.account !== account) throw new ApiError('token_wrong_account', undefined, '/token')
    if (mode === 'read' && !canRead(record)) throw new ApiError('token_write_only', 'The token may only write; this endpoint reads.', '/token')
    if (mode === 'write' && !canWrite(record)) throw new ApiError('token_read_only', 'The token may only read; this endpoint writes.', '/token')
    if (live.limiter !== null) {
      const waitMs = live.limiter.take(clock.nowMs(), rateShare())
      if (waitMs > 0) {
        throw new ApiError('rate_limited', `The token allows ${record.ratePerSecond} requests per second.`, undefined, { 'Retry-After': String(Math.ceil(waitMs / 1000)) })
      }
    }
    return record
  }

  function checkAttributes (token: TokenRecord, names: Iterable<string>, pointer: string): void {
    const items = []
    for (const name of names) {
      if (!allowsAttribute(token, name)) items.push(errorItem('attribute_forbidden', `${pointer}/${name}`, `The token does not allow the attribute "${name}".`))
    }
    if (items.length > 0) throw ApiError.of(items)
  }

  function queryReply (view: EntityView): Reply {
    const body = { status: 200, message: 'OK', errors: [], attributes: view.attributes, segments: view.segments }
    // A visitor linked to a profile says which (the seed's shape plus this one field).
    return { status: 200, body: view.profileId === undefined ? body : { ...body, profileId: view.profileId } }
  }

  /** The account a browser call is about: the query string's (`named`), else the body's. */
  function browserAccount (named: string | null, request: Request): string {
    const inBody = (request.body as { account?: unknown } | undefined)?.account
    return named ?? (typeof inBody === 'string' ? inBody : '')
  }

  /** When the query string and the body both name an account, they name the same one. */
  function sameAccount (named: string | null, request: Request): void {
    const inBody = (request.body as { account?: unknown }).account
    if (named !== null && inBody !== undefined && inBody !== named) {
      throw new ApiError('invalid_field', 'The account in the body differs from the account in the query string.', '/account')
    }
  }

  /** The CORS headers for a browser's call, or a refusal (which carries none: the browser hides it). */
  function allowBrowser (request: Request, account: string, tokens: boolean): CorsHeaders {
    if (account === '') throw new ApiError('origin_not_allowed', 'Browser calls name the account in the query string: ?account=<id>.')
    requireAccount(account)
    const access = catalogs.accounts.browserAccessOf(account)!
    const headers = access.origins.headersFor(request.origin)
    if (headers === null) throw new ApiError('origin_not_allowed', `The origin ${JSON.stringify(request.origin.slice(0, 200))} is not in the account's allowedOrigins.`)
    if (tokens && !access.allowBrowserTokens) throw new ApiError('browser_token_forbidden')
    return headers
  }

  /** A browser's call: origin checked first; every answer after that carries the CORS headers. */
  async function browserCall (request: Request, tokens: boolean, handler: (body: unknown, request: Request) => Promise<Reply>): Promise<Reply> {
    const named = queryAccount(request.query)
    const headers = allowBrowser(request, browserAccount(named, request), tokens)
    let reply: Reply
    try {
      sameAccount(named, request)
      reply = await handler(request.body, request)
    } catch (error) {
      if (!(error instanceof ApiError)) throw error
      reply = errorReply(error)
    }
    reply.headers = reply.headers === undefined ? headers : { ...reply.headers, ...headers }
    return reply
  }

  /** A profileId is believed only with its signature, unless the account turned verification off. */
  function verifyIdentity (access: BrowserAccess, event: EventBody): void {
    if (access.identity === null) return
    const signature = event.profileIdSignature as string | undefined
    if (signature === undefined) {
      throw new ApiError('identity_unverified', 'A profileId needs its profileIdSignature: the hex HMAC-SHA256 of the profileId under the account\'s identity secret.', '/profileIdSignature')
    }
    if (access.identity === 'none') {
      throw new ApiError('identity_unverified', 'The account has no identity secret yet: rotate one with the admin API, or set identityVerification "off".', '/profileIdSignature')
    }
    if (!access.identity.verify(event.profileId!, signature, clock.nowMs())) {
      throw new ApiError('identity_unverified', 'The profileIdSignature does not match the profileId under the account\'s identity secret.', '/profileIdSignature')
    }
  }

  /**
   * The checks of an event after its schema, shared by /campaigns/query and each event of /events/batch:
   * the verified identity (401), the event type and its required fields, the custom-field limit (400).
   * Returns the event to record (without its profileIdSignature, with the request's client address and
   * user agent where a destination wants them). The account exists (checked before).
   */
  function checkEvent (validated: EventBody, request: Request): EventBody {
    let event = validated
    if (event.profileId !== undefined) verifyIdentity(catalogs.accounts.browserAccessOf(event.account)!, event)
    if (event.profileIdSignature !== undefined) {
      // Proof, not data: never recorded nor passed on (a copy only on these calls, so others keep their shape).
      event = fieldsExcept(event, SIGNATURE) as unknown as EventBody
    }
    checkEventFields(catalogs, event)
    // For the destinations sent this event kind (Meta and TikTok match on them): the client's address and
    // user agent, unless the event carries its own (a site's backend sending for the browser).
    if (catalogs.destinations.wantsEvent(event.account, event.event)) event = withClient(event, request, trustedProxies)
    return event
  }

  async function campaignsQuery (body: unknown, request: Request): Promise<Reply> {
    const claim = claimOf(request, '/campaigns/query')
    const validated = validateEvent(body) as EventBody
    requireAccount(validated.account)
    const event = checkEvent(validated, request)
    const mark = outboxMark()
    const nowMs = clock.nowMs()
    const campaigns = await runtime.send(visitors, event.account, event.visitorId, { type: 'event', event, nowMs, idem: claim })
    // A retry answered from its Idempotency-Key's record: nothing was written, nothing more to wait for or count.
    if (claim?.replayed === true) return answerOf({ status: 200, body: { status: 200, message: 'Campaigns executed.', campaigns } }, claim)
    const sync = afterWrite(event.account, mark)
    if (sync !== null) await sync
    if (countEvent !== null) countEvent(event.account, event.event, event.visitorId, campaigns, event.campaignId, nowMs)
    return { status: 200, body: { status: 200, message: 'Campaigns executed.', campaigns } }
  }

  const batchHandler = eventBatch({ runtime, visitors, clock, placement, requireAccount, checkEvent, outboxMark, afterWrite, countEvent })

  /** A message both kinds take alike, to the visitor or the profile: its reply, typed. */
  function sendEither<T extends Extract<VisitorMessage, ProfileMessage>> (kind: VisitorKind | ProfileKind, account: string, id: string, message: T): Promise<ReplyOf<VisitorReplies, T> | ReplyOf<ProfileReplies, T>> {
    return kind === visitors ? runtime.send(visitors, account, id, message) : runtime.send(profiles, account, id, message)
  }

  async function entityQuery (kind: VisitorKind | ProfileKind, account: string, id: string, token: string | undefined, names: string[] | undefined, segments: string[] | undefined): Promise<Reply> {
    requireAccount(account)
    const record = authenticate(account, token, 'read')
    if (names !== undefined) checkAttributes(record, names, '/attributes')
    const query = { attributes: names ?? null, segments: segments ?? null, allowed: (name: string) => allowsAttribute(record, name) }
    return queryReply(await sendEither(kind, account, id, { type: 'query', query }))
  }

  /** `claim.replayed` tells whether the answer is repeated from the Idempotency-Key's record (nothing applied). */
  async function attributesUpdate (kind: VisitorKind | ProfileKind, account: string, id: string, token: string | undefined, attributes: Record<string, S.ProfileAttributes['attributes'][string]>, claim: IdempotencyClaim | undefined): Promise<void> {
    requireAccount(account)
    const record = authenticate(account, token, 'write')
    checkAttributes(record, Object.keys(attributes), '/attributes')
    const mark = outboxMark()
    await sendEither(kind, account, id, { type: 'attributes', attributes, idem: claim })
    if (claim?.replayed !== true) await afterWrite(account, mark)
  }

  /** The segments after the change, or null for a write-only token (the list is a read). */
  async function segmentsUpdate (kind: VisitorKind | ProfileKind, account: string, id: string, token: string | undefined, assign: string[] | undefined, remove: string[] | undefined, claim: IdempotencyClaim | undefined): Promise<string[] | null> {
    requireAccount(account)
    const record = authenticate(account, token, 'write')
    const computed = catalogs.segments.compiledSet(account).computedNames
    const refused = [...(assign ?? []).map((name, i) => [name, `/assignees/${i}`]), ...(remove ?? []).map((name, i) => [name, `/removes/${i}`])]
      .filter(([name]) => computed.has(name!))
      .map(([name, field]) => errorItem('segment_computed', field, `"${name}" is computed from its rule; it cannot be assigned or removed by hand.`))
    if (refused.length > 0) throw ApiError.of(refused)
    const mark = outboxMark()
    const segments = await sendEither(kind, account, id, { type: 'segments', assign: assign ?? [], remove: remove ?? [], idem: claim })
    if (claim?.replayed !== true) await afterWrite(account, mark)
    return canRead(record) ? segments : null
  }

  /**
   * The account's share, taken right after the body is parsed (ids lower-cased in place first): a body
   * naming an existing, active account takes one of the account's slots and tokens (or is refused,
   * before any validation or actor work), given back once the handler settled; any other body goes on
   * to be refused by the handler (400, 404).
   */
  function admit (request: Request): AccountSlot | null {
    const id = (lowerCaseIds(request.body) as { account?: unknown }).account
    const account = typeof id === 'string' ? catalogs.accounts.active(id) : undefined
    return account === undefined ? null : accountLimits.enter(account)
  }
  const release = (slot: object): void => accountLimits.leave(slot as AccountSlot)

  function segmentsReply (who: Record<string, string>, segments: string[] | null, claim: IdempotencyClaim | undefined): Reply {
    const body = { status: 200, ...who, message: 'Segments saved.', errors: [] }
    const reply = { status: 200, body: segments === null ? body : { ...body, segments } }
    return answerOf(reply, claim)
  }

  function attributesReply (who: Record<string, string>, claim: IdempotencyClaim | undefined): Reply {
    return answerOf({ status: 200, body: { status: 200, ...who, message: 'Attributes saved.', errors: [] } }, claim)
  }

  /**
   * A public endpoint and its preflight; a token endpoint (`doc.token`) answers browsers only when the
   * account allows it. admit() lower-cased the ids of the body before the handler sees it.
   */
  const post = (pattern: string, doc: RouteDoc, handler: (body: unknown, request: Request) => Promise<Reply>): RouteDefinition[] => {
    const tokens = doc.token !== undefined
    // The writes with an Idempotency-Key: every public endpoint but the two reads and the batch (its events' messageIds).
    const batch = pattern === BATCH_PATTERN
    const write = doc.token !== 'read' && !batch
    return [
      {
        method: 'post', pattern, body: true, admit, release,
        // A batch is about many visitors: its handler places each event (event-batch.ts).
        ...(batch ? {} : { partitionKey: pattern.startsWith('/profiles/') ? profileKey : visitorKeyOf }),
        doc: write
          ? { ...doc, query: [ACCOUNT_QUERY], headers: [IDEMPOTENCY_KEY], errors: [...doc.errors, ...IDEMPOTENCY_ERRORS, ...(tokens ? TOKEN_BROWSER_ERRORS : BROWSER_ERRORS)] }
          : { ...doc, query: [ACCOUNT_QUERY], errors: [...doc.errors, ...(tokens ? TOKEN_BROWSER_ERRORS : BROWSER_ERRORS)] },
        handler: request => request.origin === '' ? handler(request.body, request) : browserCall(request, tokens, handler),
      },
      { method: 'options', pattern, body: false, doc: preflightDoc(tokens), handler: request => preflight(request, tokens) },
    ]
  }

  function preflight (request: Request, tokens: boolean): Reply {
    // Not a browser's preflight: a plain OPTIONS, answered with the methods.
    if (request.origin === '') return { status: 204, body: undefined, headers: PLAIN_OPTIONS }
    const headers = allowBrowser(request, browserAccount(queryAccount(request.query), request), tokens)
    return { status: 204, body: undefined, headers: { ...headers, ...PREFLIGHT } }
  }

  return [
    ...post('/campaigns/query', {
      summary: 'Fire an event; answer the eligible campaigns',
      description: 'Records the event on the visitor (durably, before answering) and answers the campaigns the visitor is eligible for. No token needed: browsers call it.',
      tag: 'Events',
      body: { schema: S.EventRequest, example: { account: EXAMPLE_ACCOUNT, visitorId: EXAMPLE_VISITOR, platform: 'web', event: 'pageView', path: '/shoes' } },
      ok: json(200, 'The eligible campaigns.', R.CampaignsAnswer),
      errors: ['account_not_found', 'unknown_event_type', 'rate_limited', 'identity_unverified'],
    }, campaignsQuery),
    ...post(BATCH_PATTERN, {
      summary: 'Record many events at once (tracking: no campaigns answered)',
      description: `Each event as /campaigns/query takes it (without account), with an optional messageId (dedupe: the same messageId for the same visitor within 24 hours is applied once) and timestamp (ISO 8601, at most 7 days old and 1 hour ahead). At most ${S.BATCH_EVENTS_MAX} events and BEACON_MAX_BODY_BYTES. ` +
        'Each event is checked on its own: the answer lists every event\'s outcome in order, and is sent once every accepted event is durable. No campaigns are answered or matched (docs/events.md). No token needed: browsers call it.',
      tag: 'Events',
      body: { schema: S.EventBatchDocumented, example: { account: EXAMPLE_ACCOUNT, events: [{ visitorId: EXAMPLE_VISITOR, platform: 'web', event: 'pageView', path: '/shoes', messageId: 'm-1' }] } },
      ok: json(200, 'One outcome per event, in order.', R.BatchAnswer),
      errors: ['account_not_found', 'batch_too_large'],
    }, batchHandler),
    ...post('/profiles/query', {
      summary: 'Read a profile\'s attributes and segments',
      tag: 'Profiles', token: 'read',
      body: { schema: S.ProfileQuery, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, profileId: 'ana@example.com', attributes: ['plan'] } },
      ok: json(200, 'The unified view of the profile (never seen: empty).', R.EntityAnswer),
      errors: ['account_not_found', 'attribute_forbidden'],
    }, async body => {
      const q = validateProfileQuery(body)
      return entityQuery(profiles, q.account, q.profileId, q.token, q.attributes, q.segments)
    }),
    ...post('/visitors/query', {
      summary: 'Read a visitor\'s attributes and segments',
      tag: 'Visitors', token: 'read',
      body: { schema: S.VisitorQuery, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, visitorId: EXAMPLE_VISITOR } },
      ok: json(200, 'The visitor\'s data, with profileId when linked (never seen: empty).', R.EntityAnswer),
      errors: ['account_not_found', 'attribute_forbidden'],
    }, async body => {
      const q = validateVisitorQuery(body)
      return entityQuery(visitors, q.account, q.visitorId, q.token, q.attributes, q.segments)
    }),
    ...post('/profiles/attributes', {
      summary: 'Set or delete (null) a profile\'s attributes',
      tag: 'Profiles', token: 'write',
      body: { schema: S.ProfileAttributes, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, profileId: 'ana@example.com', attributes: { plan: 'pro', tags: ['a', 'b'], old: null } } },
      ok: json(200, 'Saved (durably).', R.savedAnswer('profileId', false)),
      errors: ['account_not_found', 'attribute_forbidden', 'entity_full'],
    }, async (body, request) => {
      const claim = claimOf(request, '/profiles/attributes')
      const u = validateProfileAttributes(body)
      await attributesUpdate(profiles, u.account, u.profileId, u.token, u.attributes, claim)
      return attributesReply({ profileId: u.profileId }, claim)
    }),
    ...post('/visitors/attributes', {
      summary: 'Set or delete (null) a visitor\'s attributes',
      tag: 'Visitors', token: 'write',
      body: { schema: S.VisitorAttributes, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, visitorId: EXAMPLE_VISITOR, attributes: { color: 'red' } } },
      ok: json(200, 'Saved (durably).', R.savedAnswer('visitorId', false)),
      errors: ['account_not_found', 'attribute_forbidden', 'entity_full'],
    }, async (body, request) => {
      const claim = claimOf(request, '/visitors/attributes')
      const u = validateVisitorAttributes(body)
      await attributesUpdate(visitors, u.account, u.visitorId, u.token, u.attributes, claim)
      return attributesReply({ visitorId: u.visitorId }, claim)
    }),
    ...post('/profiles/segments', {
      summary: 'Assign or remove a profile\'s manual segments',
      tag: 'Profiles', token: 'write',
      body: { schema: S.ProfileSegments, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, profileId: 'ana@example.com', assignees: ['vip'], removes: ['trial'] } },
      ok: json(200, 'Saved (durably); the manual segments after the change (a read: absent for a write-only token).', R.savedAnswer('profileId', true)),
      errors: ['account_not_found', 'segment_computed', 'entity_full'],
    }, async (body, request) => {
      const claim = claimOf(request, '/profiles/segments')
      const u = validateProfileSegments(body)
      return segmentsReply({ profileId: u.profileId }, await segmentsUpdate(profiles, u.account, u.profileId, u.token, u.assignees, u.removes, claim), claim)
    }),
    ...post('/visitors/segments', {
      summary: 'Assign or remove a visitor\'s manual segments',
      tag: 'Visitors', token: 'write',
      body: { schema: S.VisitorSegments, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, visitorId: EXAMPLE_VISITOR, assignees: ['returning'] } },
      ok: json(200, 'Saved (durably); the manual segments after the change (a read: absent for a write-only token).', R.savedAnswer('visitorId', true)),
      errors: ['account_not_found', 'segment_computed', 'entity_full'],
    }, async (body, request) => {
      const claim = claimOf(request, '/visitors/segments')
      const u = validateVisitorSegments(body)
      return segmentsReply({ visitorId: u.visitorId }, await segmentsUpdate(visitors, u.account, u.visitorId, u.token, u.assignees, u.removes, claim), claim)
    }),
  ]
}

const PLAIN_OPTIONS = { Allow: 'POST, OPTIONS' }
const PREFLIGHT = {
  'Access-Control-Allow-Methods': 'POST',
  // Idempotency-Key: the SDK sends one with every event (docs/retries-and-limits.md, "Idempotent writes"); Beacon-Route:
  // the route hint it sends back in cluster mode (src/http/route-hint.ts).
  'Access-Control-Allow-Headers': 'content-type, idempotency-key, beacon-route',
  'Access-Control-Max-Age': String(PREFLIGHT_MAX_AGE_SECONDS),
}

/** The account a browser names in the query string (lower case, like the body's), or null. */
function queryAccount (query: string): string | null {
  return query === '' ? null : new URLSearchParams(query).get('account')?.toLowerCase() ?? null
}

/**
 * The entity a public request is about (cluster mode routes it to the owner of its partition): the
 * account and visitorId of the body, lower-cased as admit() will, or its profileId (/profiles/...);
 * null when the body names none (the handler refuses it).
 */
function visitorKeyOf (request: Request): EntityKey | null {
  const body = request.body as { account?: unknown, visitorId?: unknown }
  return typeof body.account === 'string' && typeof body.visitorId === 'string' ? { account: body.account.toLowerCase(), id: body.visitorId.toLowerCase() } : null
}

function profileKey (request: Request): EntityKey | null {
  const body = request.body as { account?: unknown, profileId?: unknown }
  return typeof body.account === 'string' && typeof body.profileId === 'string' ? { account: body.account.toLowerCase(), id: body.profileId } : null
}

/**
 * UUIDs have one spelling, lower case (iOS writes them in upper case): the account and visitor ids of a
 * body are lower-cased before anything reads them, so the actors, the replies and the webhooks see one.
 */
function lowerCaseIds (body: unknown): unknown {
  if (typeof body !== 'object' || body === null) return body
  const ids = body as { account?: unknown, visitorId?: unknown }
  if (typeof ids.account === 'string') ids.account = ids.account.toLowerCase()
  if (typeof ids.visitorId === 'string') ids.visitorId = ids.visitorId.toLowerCase()
  return body
}

function whole (): number {
  return 1
}

/**
 * The checks of an event's type (defined for the account), its required fields and its custom-field
 * limit: /campaigns/query's, each event of a batch's, each event row of an import's (src/http/import-rows.ts).
 */
export function checkEventFields (catalogs: Catalogs, event: EventBody): void {
  const type = catalogs.eventTypes.get(event.account, event.event)
  if (type === undefined) throw new ApiError('unknown_event_type', `The event type "${event.event}" is not built in and was not defined for this account.`, '/event')
  for (const field of type.required) {
    if (Object.hasOwn(event, field) && event[field] !== null) continue
    const missing = type.required.filter(name => !Object.hasOwn(event, name) || event[name] === null)
    throw ApiError.of(missing.map(name => errorItem('invalid_field', `/${name}`, `${name} is required for ${event.event} events.`)))
  }
  let custom = 0
  for (const field in event) if (!S.EVENT_FIELDS.has(field)) custom++
  if (custom > S.LIMITS.customFieldsMax) {
    throw new ApiError('invalid_field', `An event carries at most ${S.LIMITS.customFieldsMax} custom fields; this one has ${custom}.`)
  }
}
