// The seven public endpoints of SEED-API.md. Order of checks, the same everywhere: schema (400),
// account (404), token (401, 403), rate (429), attribute permissions (403); then the actor.

import { ApiError, errorItem } from '../errors.js'
import { allowsAttribute, canRead, canWrite, parseToken, secretMatches, type TokenRecord } from '../auth/tokens.js'
import type { Clock } from '../clock.js'
import type { Registry } from '../store/registry.js'
import type { ActorRuntime } from '../../actors/runtime.js'
import type { EntityView } from '../../actors/entity.js'
import type { Campaign, EventBody, VisitorKind } from '../../actors/visitor.js'
import type { ProfileKind } from '../../actors/profile.js'
import * as S from './schemas.js'
import { validator } from './validate.js'
import type { Reply, Route } from './server.js'

export interface PublicDeps {
  registry: Registry
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
  /** Report counting of each answered event (src/reports/counters.ts): in memory, no write. */
  countEvent?: ((account: string, kind: string, visitorId: string, campaigns: readonly { id: string }[], campaignId: unknown, nowMs: number) => void) | null
}

const validateEvent = validator(S.EventRequest)
const validateProfileQuery = validator(S.ProfileQuery)
const validateVisitorQuery = validator(S.VisitorQuery)
const validateProfileAttributes = validator(S.ProfileAttributes)
const validateVisitorAttributes = validator(S.VisitorAttributes)
const validateProfileSegments = validator(S.ProfileSegments)
const validateVisitorSegments = validator(S.VisitorSegments)

type Mode = 'read' | 'write'

export function publicRoutes ({ registry, runtime, clock, visitors, profiles, outboxMark, afterWrite, countEvent = null }: PublicDeps): Route[] {
  function requireAccount (account: string): void {
    if (registry.activeAccount(account) === undefined) throw new ApiError('account_not_found')
  }

  function authenticate (account: string, token: string | undefined, mode: Mode): TokenRecord {
    if (token === undefined) throw new ApiError('token_missing', 'This endpoint needs a token: send it in the "token" field.', '/token')
    const parsed = parseToken(token)
    const live = parsed === null ? undefined : registry.token(parsed.id)
    if (parsed === null || live === undefined || !secretMatches(parsed.secret, live.record.hash) || live.record.revokedAt !== null) {
      throw new ApiError('token_invalid', undefined, '/token')
    }
    const record = live.record
    if (record.account !== account) throw new ApiError('token_wrong_account', undefined, '/token')
    if (mode === 'read' && !canRead(record)) throw new ApiError('token_write_only', 'The token may only write; this endpoint reads.', '/token')
    if (mode === 'write' && !canWrite(record)) throw new ApiError('token_read_only', 'The token may only read; this endpoint writes.', '/token')
    if (live.limiter !== null) {
      const waitMs = live.limiter.take(clock.nowMs())
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

  async function campaignsQuery (body: unknown): Promise<Reply> {
    const event = validateEvent(body) as EventBody
    requireAccount(event.account)
    const type = registry.eventType(event.account, event.event)
    if (type === undefined) throw new ApiError('unknown_event_type', `The event type "${event.event}" is not built in and was not defined for this account.`, '/event')
    const missing = type.required.filter(field => !Object.hasOwn(event, field) || event[field] === null)
    if (missing.length > 0) {
      throw ApiError.of(missing.map(field => errorItem('invalid_field', `/${field}`, `${field} is required for ${event.event} events.`)))
    }
    let custom = 0
    for (const field in event) if (!S.EVENT_FIELDS.has(field)) custom++
    if (custom > S.LIMITS.customFieldsMax) {
      throw new ApiError('invalid_field', `An event carries at most ${S.LIMITS.customFieldsMax} custom fields; this one has ${custom}.`)
    }
    const mark = outboxMark()
    const nowMs = clock.nowMs()
    const campaigns = await runtime.send(visitors, event.account, event.visitorId, { type: 'event', event, nowMs }) as Campaign[]
    const sync = afterWrite(event.account, mark)
    if (sync !== null) await sync
    if (countEvent !== null) countEvent(event.account, event.event, event.visitorId, campaigns, event.campaignId, nowMs)
    return { status: 200, body: { status: 200, message: 'Campaigns executed.', campaigns } }
  }

  async function entityQuery (kind: VisitorKind | ProfileKind, account: string, id: string, token: string | undefined, names: string[] | undefined, segments: string[] | undefined): Promise<Reply> {
    requireAccount(account)
    const record = authenticate(account, token, 'read')
    if (names !== undefined) checkAttributes(record, names, '/attributes')
    const query = { attributes: names ?? null, segments: segments ?? null, allowed: (name: string) => allowsAttribute(record, name) }
    return queryReply(await runtime.send(kind as VisitorKind, account, id, { type: 'query', query }) as EntityView)
  }

  async function attributesUpdate (kind: VisitorKind | ProfileKind, account: string, id: string, token: string | undefined, attributes: Record<string, S.ProfileAttributes['attributes'][string]>): Promise<void> {
    requireAccount(account)
    const record = authenticate(account, token, 'write')
    checkAttributes(record, Object.keys(attributes), '/attributes')
    const mark = outboxMark()
    await runtime.send(kind as VisitorKind, account, id, { type: 'attributes', attributes })
    await afterWrite(account, mark)
  }

  /** The segments after the change, or null for a write-only token (the list is a read). */
  async function segmentsUpdate (kind: VisitorKind | ProfileKind, account: string, id: string, token: string | undefined, assign: string[] | undefined, remove: string[] | undefined): Promise<string[] | null> {
    requireAccount(account)
    const record = authenticate(account, token, 'write')
    const computed = registry.segmentSet(account).computedNames
    const refused = [...(assign ?? []).map((name, i) => [name, `/assignees/${i}`]), ...(remove ?? []).map((name, i) => [name, `/removes/${i}`])]
      .filter(([name]) => computed.has(name!))
      .map(([name, field]) => errorItem('segment_computed', field, `"${name}" is computed from its rule; it cannot be assigned or removed by hand.`))
    if (refused.length > 0) throw ApiError.of(refused)
    const mark = outboxMark()
    const segments = await runtime.send(kind as VisitorKind, account, id, { type: 'segments', assign: assign ?? [], remove: remove ?? [] }) as string[]
    await afterWrite(account, mark)
    return canRead(record) ? segments : null
  }

  function segmentsReply (who: Record<string, string>, segments: string[] | null): Reply {
    const body = { status: 200, ...who, message: 'Segments saved.', errors: [] }
    return { status: 200, body: segments === null ? body : { ...body, segments } }
  }

  const post = (pattern: string, handler: (body: unknown) => Promise<Reply>): Route => ({ method: 'post', pattern, body: true, handler: request => handler(lowerCaseIds(request.body)) })

  return [
    post('/campaigns/query', campaignsQuery),
    post('/profiles/query', async body => {
      const q = validateProfileQuery(body)
      return entityQuery(profiles, q.account, q.profileId, q.token, q.attributes, q.segments)
    }),
    post('/visitors/query', async body => {
      const q = validateVisitorQuery(body)
      return entityQuery(visitors, q.account, q.visitorId, q.token, q.attributes, q.segments)
    }),
    post('/profiles/attributes', async body => {
      const u = validateProfileAttributes(body)
      await attributesUpdate(profiles, u.account, u.profileId, u.token, u.attributes)
      return { status: 200, body: { status: 200, profileId: u.profileId, message: 'Attributes saved.', errors: [] } }
    }),
    post('/visitors/attributes', async body => {
      const u = validateVisitorAttributes(body)
      await attributesUpdate(visitors, u.account, u.visitorId, u.token, u.attributes)
      return { status: 200, body: { status: 200, visitorId: u.visitorId, message: 'Attributes saved.', errors: [] } }
    }),
    post('/profiles/segments', async body => {
      const u = validateProfileSegments(body)
      return segmentsReply({ profileId: u.profileId }, await segmentsUpdate(profiles, u.account, u.profileId, u.token, u.assignees, u.removes))
    }),
    post('/visitors/segments', async body => {
      const u = validateVisitorSegments(body)
      return segmentsReply({ visitorId: u.visitorId }, await segmentsUpdate(visitors, u.account, u.visitorId, u.token, u.assignees, u.removes))
    }),
  ]
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
