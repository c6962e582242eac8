// The admin API (the panel's operations): accounts, tokens, event types. JSON, REST. Who may call each
// route is its `role` (the least panel role; the admin key may call all): see src/http/access.ts, which
// guards every /admin route as src/app.ts assembles them. A route without a role is for owners only.

import { ApiError, errorItem } from '../errors.js'
import type { TokenRecord } from '../auth/tokens.js'
import type { Registry } from '../store/registry.js'
import type { ActorRuntime } from '../../actors/runtime.js'
import { visitorKey, type VisitorKind, type VisitorState } from '../../actors/visitor.js'
import type { ProfileKind, ProfileState } from '../../actors/profile.js'
import { deliveryView, profileView, visitorView } from './admin-views.js'
import { DELIVERY_STATUSES, LIST_PAGE_MAX, type DeliveryHub, type DeliveryStatus } from '../../actors/delivery.js'
import { redactWebhook } from '../webhooks/index.js'
import { assertCampaign } from '../matching/index.js'
import { validateSegment, type SegmentDef } from '../segments/rules.js'
import * as S from './schemas.js'
import { validator } from './validate.js'
import type { Handler, Reply, Request, Route, RouteRole } from './server.js'

const validateAccountCreate = validator(S.AccountCreate)
const validateAccountPatch = validator(S.AccountPatch)
const validateTokenCreate = validator(S.TokenCreate)
const validateEventTypePut = validator(S.EventTypePut)
const NAME = new RegExp(S.NAME_PATTERN)
const validateReplay = validator(S.WebhookReplay)

export interface AdminDeps {
  registry: Registry
  runtime: ActorRuntime
  visitors: VisitorKind
  profiles: ProfileKind
  deliveries: DeliveryHub
  /** A segment's current member count (eventually consistent: src/reports/counters.ts). */
  segmentMembers: (account: string, segment: string) => number
}

/** What GET shows of a token: never the secret nor its hash. */
export function publicToken (record: TokenRecord): Omit<TokenRecord, 'hash'> {
  const { hash: _hash, ...rest } = record
  return rest
}

/**
 * The least panel role of each route below (docs/api.md has the table); a route missing here gets no
 * role, which means owners and the admin key only. 'admin': the admin key only (every account).
 */
export const ADMIN_ROLES: Readonly<Record<string, RouteRole>> = {
  'post /admin/accounts': 'admin',
  'get /admin/accounts': 'admin',
  'get /admin/accounts/:account': 'viewer',
  'patch /admin/accounts/:account': 'owner',
  'post /admin/accounts/:account/tokens': 'owner',
  'get /admin/accounts/:account/tokens': 'owner',
  'del /admin/accounts/:account/tokens/:id': 'owner',
  'get /admin/accounts/:account/event-types': 'viewer',
  'put /admin/accounts/:account/event-types/:name': 'editor',
  'get /admin/accounts/:account/event-types/:name': 'viewer',
  'del /admin/accounts/:account/event-types/:name': 'editor',
  'get /admin/accounts/:account/campaigns': 'viewer',
  'put /admin/accounts/:account/campaigns/:id': 'editor',
  'get /admin/accounts/:account/campaigns/:id': 'viewer',
  'del /admin/accounts/:account/campaigns/:id': 'editor',
  'get /admin/accounts/:account/segments': 'viewer',
  'put /admin/accounts/:account/segments/:name': 'editor',
  'get /admin/accounts/:account/segments/:name': 'viewer',
  'del /admin/accounts/:account/segments/:name': 'editor',
  'get /admin/accounts/:account/webhooks': 'viewer',
  'put /admin/accounts/:account/webhooks/:id': 'editor',
  'get /admin/accounts/:account/webhooks/:id': 'viewer',
  'del /admin/accounts/:account/webhooks/:id': 'editor',
  'get /admin/accounts/:account/webhooks/:id/deliveries': 'viewer',
  'post /admin/accounts/:account/webhooks/:id/replay': 'editor',
  'get /admin/accounts/:account/profiles/:id/export': 'owner',
  'del /admin/accounts/:account/profiles/:id': 'owner',
  'get /admin/accounts/:account/visitors/:id': 'viewer',
  'get /admin/accounts/:account/profiles/:id': 'viewer',
}

export function adminRoutes ({ registry, runtime, visitors, profiles, deliveries, segmentMembers }: AdminDeps): Route[] {
  const route = (method: Route['method'], pattern: string, handler: Handler): Route => {
    const role = ADMIN_ROLES[`${method} ${pattern}`]
    return { method, pattern, body: method === 'post' || method === 'put' || method === 'patch', handler, ...(role === undefined ? {} : { role }) }
  }
  const ok = (body: unknown, status = 200): Reply => ({ status, body })
  // The first parameter of every path is the account id: a UUID, in lower case whatever the spelling.
  const param = (request: Request, index: number): string => index === 0 ? (request.params[0] ?? '').toLowerCase() : request.params[index] ?? ''

  /** The name in the path (event type, campaign id), checked like every other name. */
  function pathName (request: Request, what: string): string {
    const name = param(request, 1)
    if (!NAME.test(name)) throw new ApiError('invalid_field', `A ${what} is 1 to 128 characters of A-Z a-z 0-9 _ . : -`, '/name')
    return name
  }

  return [
    route('post', '/admin/accounts', async request => {
      const { name } = validateAccountCreate(request.body)
      return ok(await registry.createAccount(name), 201)
    }),
    route('get', '/admin/accounts', () => ok({ accounts: registry.listAccounts() })),
    route('get', '/admin/accounts/:account', request => ok(registry.getAccount(param(request, 0)))),
    route('patch', '/admin/accounts/:account', async request => {
      const patch = validateAccountPatch(request.body)
      return ok(await registry.updateAccount(param(request, 0), patch))
    }),

    route('post', '/admin/accounts/:account/tokens', async request => {
      const spec = validateTokenCreate(request.body)
      if (spec.attributes.includes('*') && spec.attributes.length > 1) {
        throw new ApiError('invalid_field', '"*" allows every attribute and must stand alone.', '/attributes')
      }
      const { record, token } = await registry.createToken(param(request, 0), spec)
      return ok({ ...publicToken(record), token }, 201)
    }),
    route('get', '/admin/accounts/:account/tokens', request => ok({ tokens: registry.listTokens(param(request, 0)).map(publicToken) })),
    route('del', '/admin/accounts/:account/tokens/:id', async request => {
      registry.getAccount(param(request, 0))
      return ok(publicToken(await registry.revokeToken(param(request, 0), param(request, 1))))
    }),

    route('get', '/admin/accounts/:account/event-types', request => ok({ eventTypes: registry.listEventTypes(param(request, 0)) })),
    route('put', '/admin/accounts/:account/event-types/:name', async request => {
      const name = pathName(request, 'event type name')
      const { required } = validateEventTypePut(request.body)
      return ok(await registry.putEventType(param(request, 0), { name, required: [...new Set(required)] }))
    }),
    route('get', '/admin/accounts/:account/event-types/:name', request => {
      const account = param(request, 0)
      registry.getAccount(account)
      const type = registry.eventType(account, param(request, 1))
      if (type === undefined) throw new ApiError('event_type_not_found')
      return ok(type)
    }),
    route('del', '/admin/accounts/:account/event-types/:name', async request => {
      const name = pathName(request, 'event type name')
      await registry.deleteEventType(param(request, 0), name)
      return ok({ name, deleted: true })
    }),

    route('get', '/admin/accounts/:account/campaigns', request => ok({
      campaigns: registry.listCampaigns(param(request, 0)).map(({ id, campaign }) => ({ id, ...campaign })),
    })),
    route('put', '/admin/accounts/:account/campaigns/:id', async request => {
      const id = pathName(request, 'campaign id')
      const def = request.body
      assertCampaign(def)
      refuseUnknownEvents(registry, param(request, 0), def.trigger.events ?? [])
      await registry.putCampaign(param(request, 0), id, def)
      return ok({ id, ...def })
    }),
    route('get', '/admin/accounts/:account/campaigns/:id', request => {
      const id = param(request, 1)
      return ok({ id, ...registry.getCampaign(param(request, 0), id) })
    }),
    route('del', '/admin/accounts/:account/campaigns/:id', async request => {
      const id = param(request, 1)
      await registry.deleteCampaign(param(request, 0), id)
      return ok({ id, deleted: true })
    }),

    route('get', '/admin/accounts/:account/segments', request => ok({
      segments: registry.listSegments(param(request, 0)).map(({ name, segment }) => ({ name, ...segment, members: segmentMembers(param(request, 0), name) })),
    })),
    route('put', '/admin/accounts/:account/segments/:name', async request => {
      const name = pathName(request, 'segment name')
      const errors = validateSegment(request.body)
      if (errors.length > 0) throw ApiError.of(errors, 'The segment definition is invalid.')
      const def = request.body as SegmentDef
      await registry.putSegment(param(request, 0), name, def)
      return ok({ name, ...def })
    }),
    route('get', '/admin/accounts/:account/segments/:name', request => {
      const name = param(request, 1)
      return ok({ name, ...registry.getSegment(param(request, 0), name), members: segmentMembers(param(request, 0), name) })
    }),
    route('del', '/admin/accounts/:account/segments/:name', async request => {
      const name = param(request, 1)
      await registry.deleteSegment(param(request, 0), name)
      return ok({ name, deleted: true })
    }),

    route('get', '/admin/accounts/:account/webhooks', request => ok({
      webhooks: registry.listWebhooks(param(request, 0)).map(({ id, webhook }) => ({ id, ...webhook })),
    })),
    route('put', '/admin/accounts/:account/webhooks/:id', async request => {
      const id = pathName(request, 'webhook id')
      const webhook = await registry.putWebhook(param(request, 0), id, request.body)
      return ok({ id, ...redactWebhook(webhook.config) })
    }),
    route('get', '/admin/accounts/:account/webhooks/:id', request => {
      const id = param(request, 1)
      return ok({ id, ...redactWebhook(registry.webhook(param(request, 0), id).config) })
    }),
    route('del', '/admin/accounts/:account/webhooks/:id', async request => {
      const id = param(request, 1)
      await registry.deleteWebhook(param(request, 0), id)
      return ok({ id, deleted: true })
    }),
    route('get', '/admin/accounts/:account/webhooks/:id/deliveries', async request => {
      const account = param(request, 0)
      const id = param(request, 1)
      registry.webhook(account, id)
      const query = new URLSearchParams(request.query)
      const status = query.get('status')
      if (status !== null && !(DELIVERY_STATUSES as readonly string[]).includes(status)) {
        throw new ApiError('invalid_field', `status must be one of ${DELIVERY_STATUSES.join(', ')}.`, '/status')
      }
      const after = wholeNumber(query.get('after'), 0, Number.MAX_SAFE_INTEGER, 'after')
      const limit = wholeNumber(query.get('limit'), 1, LIST_PAGE_MAX, 'limit', 100)
      const page = await deliveries.list(account, id, status as DeliveryStatus | null, after, limit)
      return ok({ deliveries: page.deliveries.map(deliveryView), next: page.next })
    }),
    route('post', '/admin/accounts/:account/webhooks/:id/replay', async request => {
      const { deliveryIds, from, to } = validateReplay(request.body)
      const fromMs = from === undefined ? 0 : Date.parse(from)
      const toMs = to === undefined ? Number.MAX_SAFE_INTEGER : Date.parse(to)
      if (Number.isNaN(fromMs)) throw new ApiError('invalid_field', 'from must be an ISO-8601 time.', '/from')
      if (Number.isNaN(toMs)) throw new ApiError('invalid_field', 'to must be an ISO-8601 time.', '/to')
      return ok({ replayed: await deliveries.replay(param(request, 0), param(request, 1), deliveryIds ?? null, fromMs, toMs) })
    }),

    // Privacy: everything held on a person, and its erasure (the profile and its linked devices).
    route('get', '/admin/accounts/:account/profiles/:id/export', async request => {
      const account = param(request, 0)
      registry.getAccount(account)
      const profileId = param(request, 1)
      const profile = await runtime.send(profiles, account, profileId, { type: 'snapshot' }) as ProfileState
      const devices = await Promise.all(profile.visitors.map(async id => visitorView(id, await runtime.send(visitors, account, id, { type: 'snapshot' }) as VisitorState)))
      return ok({ profileId, profile: profileView(profileId, profile), visitors: devices })
    }),
    route('del', '/admin/accounts/:account/profiles/:id', async request => {
      const account = param(request, 0)
      registry.getAccount(account)
      const id = param(request, 1)
      const linked = await runtime.send(profiles, account, id, { type: 'erase' }) as string[] | null
      if (linked === null) throw new ApiError('profile_not_found')
      await Promise.all(linked.map(visitorId => runtime.send(visitors, account, visitorId, { type: 'erase' })))
      return ok({ profileId: id, erased: { profiles: 1, visitors: linked.length } })
    }),

    // Everything Beacon holds on one visitor or profile (attributes, segments, tracked behaviour).
    route('get', '/admin/accounts/:account/visitors/:id', async request => {
      const account = param(request, 0)
      registry.getAccount(account)
      const id = visitorKey(param(request, 1))
      return ok(visitorView(id, await runtime.send(visitors, account, id, { type: 'snapshot' }) as VisitorState))
    }),
    route('get', '/admin/accounts/:account/profiles/:id', async request => {
      const account = param(request, 0)
      registry.getAccount(account)
      const profileId = param(request, 1)
      return ok(profileView(profileId, await runtime.send(profiles, account, profileId, { type: 'snapshot' }) as ProfileState))
    }),
  ]
}

/** A campaign triggered by an event type the account does not know could never show: refused, naming each. */
function refuseUnknownEvents (registry: Registry, account: string, events: readonly string[]): void {
  registry.getAccount(account)
  const items = events.flatMap((name, i) => registry.eventType(account, name) !== undefined ? [] : [errorItem('unknown_event_type', `/trigger/events/${i}`,
    `The event type "${name}" is not built in and was not defined for this account: define it first (PUT /admin/accounts/{account}/event-types/${name}).`)])
  if (items.length > 0) throw ApiError.of(items)
}

function wholeNumber (raw: string | null, min: number, max: number, name: string, fallback = min): number {
  if (raw === null || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) throw new ApiError('invalid_field', `${name} must be a whole number from ${min} to ${max}.`, `/${name}`)
  return n
}
