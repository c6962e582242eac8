// The admin API (the panel's operations): accounts, tokens, event types, campaigns, segments, webhooks,
// people. JSON, REST. Each route is declared once with who may call it (its `role`: the least panel
// role; 'admin': the admin key only; the admin key may call all: src/http/access.ts guards every /admin
// route as src/app.ts assembles them) and what /openapi.json says of it (src/http/route.ts).

import type { TSchema } from 'typebox'
import { ApiError, errorItem } from '../errors.js'
import type { TokenRecord } from '../auth/tokens.js'
import type { Catalogs } from '../catalog/catalogs.js'
import type { PageRequest } from '../catalog/config-rows.js'
import type { ChangedBy, RateLimit } from '../catalog/accounts.js'
import { principalOf } from './access.js'
import { PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX } from '../store/limits.js'
import type { ActorRuntime } from '../../actors/runtime.js'
import { visitorKey, type VisitorKind } from '../../actors/visitor.js'
import type { ProfileKind } from '../../actors/profile.js'
import { deliveryView, profileView, visitorView } from './admin-views.js'
import type { Erasure } from '../jobs/erasure.js'
import { backfillView, type SegmentBackfills } from '../jobs/segment-backfill.js'
import type { AccountDeletions } from '../jobs/account-deletion.js'
import type { DeliveryHub } from '../delivery/hub.js'
import { CLUSTER_CURSOR_LENGTH_MAX, LIST_PAGE_MAX } from '../delivery/limits.js'
import { DELIVERY_STATUSES, type DeliveryRecord, type DeliveryStatus } from '../delivery/record.js'
import { redactWebhook, WebhookConfigSchema } from '../webhooks/index.js'
import { assertCampaign } from '../matching/index.js'
import { validateSegment, type SegmentDef } from '../segments/rules.js'
import { originProblem } from '../auth/origins.js'
import * as S from './schemas.js'
import { validator } from '../validator.js'
import { NAME_PATTERN } from '../patterns.js'
import type { Handler, Reply, Request, Route, RouteRole } from './server.js'
import { json, type QueryParameter, type RouteDefinition, type RouteDoc } from './route.js'
import * as R from './reply-schemas.js'

const validateAccountCreate = validator(S.AccountCreate)
const validateAccountPatch = validator(S.AccountPatch)
const validateTokenCreate = validator(S.TokenCreate)
const validateEventTypePut = validator(S.EventTypePut)
const NAME = new RegExp(NAME_PATTERN)
const validateReplay = validator(S.WebhookReplay)
const validateIdentityRotate = validator(S.IdentitySecretRotate)

export interface AdminDeps {
  catalogs: Catalogs
  runtime: ActorRuntime
  visitors: VisitorKind
  profiles: ProfileKind
  deliveries: DeliveryHub
  erasure: Erasure
  accountDeletions: AccountDeletions
  /** BEACON_ACCOUNT_RATE_PER_SECOND and _BURST: the operator's rate for accounts without one of their own. */
  defaultRate?: RateLimit
  /**
   * The segments' current member counts (eventually consistent: src/reports/counters.ts); cluster mode:
   * every live node's share added (src/reports/cluster-reports.ts), a 503 when one does not answer.
   */
  segmentMembers: (account: string, segments: readonly string[]) => number[] | Promise<number[]>
  /** Backfills of segments over the retained event log; null: no log kept (retention 0): `backfill: true` is 501. */
  backfills: SegmentBackfills | null
  /** Cluster mode: the deliveries log of every live node (src/delivery/cluster-history.ts); null or absent: this node's. */
  clusterDeliveries?: ClusterDeliveriesLog | null
}

/** A webhook's deliveries log across the nodes of a cluster, listed with an opaque cursor. */
export interface ClusterDeliveriesLog {
  /** `cursor`: '' for the first page, else the `next` of the previous one; a malformed one is 400 invalid_field. */
  list: (account: string, webhookId: string, status: DeliveryStatus | null, cursor: string, limit: number) => Promise<{ deliveries: DeliveryRecord[], next: string | null }>
  replay: (account: string, webhookId: string, ids: readonly string[] | null, fromMs: number, toMs: number) => Promise<number>
}

/** `?cursor=&limit=` of every admin listing (items in id or name order). */
const PAGE_QUERY: QueryParameter[] = [
  { name: 'cursor', description: 'The `next` of the previous page (omitted: the first page).', schema: { type: 'string', maxLength: 300 } as TSchema },
  { name: 'limit', description: `Page size (default ${PAGE_LIMIT_DEFAULT}, at most ${PAGE_LIMIT_MAX}).`, schema: { type: 'integer', minimum: 1, maximum: PAGE_LIMIT_MAX } as TSchema },
]

/** What GET shows of a token: never the secret nor its hash. */
export function publicToken (record: TokenRecord): Omit<TokenRecord, 'hash'> {
  const { hash: _hash, ...rest } = record
  return rest
}

export function adminRoutes ({ catalogs, runtime, visitors, profiles, deliveries, erasure, accountDeletions, segmentMembers, backfills, clusterDeliveries = null, defaultRate = { perSecond: 0 } }: AdminDeps): RouteDefinition[] {
  const route = (method: Route['method'], pattern: string, role: RouteRole, doc: RouteDoc, handler: Handler): RouteDefinition =>
    ({ method, pattern, body: method === 'post' || method === 'put' || method === 'patch', role, doc, handler })
  const ok = (body: unknown, status = 200): Reply => ({ status, body })
  /** A route about one visitor or profile (the path's second parameter): cluster mode serves it at the owner of its partition. */
  const keyed = (kind: 'visitor' | 'profile', definition: RouteDefinition): RouteDefinition => ({
    ...definition,
    partitionKey: request => ({ account: param(request, 0), id: kind === 'visitor' ? visitorKey(param(request, 1)) : param(request, 1) }),
  })
  // The first parameter of every path is the account id: a UUID, in lower case whatever the spelling.
  const param = (request: Request, index: number): string => index === 0 ? (request.params[0] ?? '').toLowerCase() : request.params[index] ?? ''
  /** The account of the path, once it is known to exist (404 account_not_found otherwise). */
  const knownAccount = (request: Request): string => {
    const account = param(request, 0)
    catalogs.accounts.get(account)
    return account
  }

  /** The name in the path (event type, campaign id), checked like every other name. */
  function pathName (request: Request, what: string): string {
    const name = param(request, 1)
    if (!NAME.test(name)) throw new ApiError('invalid_field', `A ${what} is 1 to 128 characters of A-Z a-z 0-9 _ . : -`, '/name')
    return name
  }

  return [
    route('post', '/admin/accounts', 'admin', {
      summary: 'Create an account',
      tag: 'Accounts',
      description: 'New accounts require verified identity (identityVerification "required"); the answer carries the first identity secret, shown only here.',
      body: { schema: S.AccountCreate, example: { name: 'My shop' } },
      ok: json(201, 'The new account, with its identity secret.', R.AccountWithSecret),
      errors: ['conflict'],
    }, async request => {
      const { name } = validateAccountCreate(request.body)
      const { account, identitySecret } = await catalogs.accounts.create(name)
      return ok({ ...account, identitySecret }, 201)
    }),
    route('get', '/admin/accounts', 'admin', {
      summary: 'List accounts', tag: 'Accounts',
      query: PAGE_QUERY,
      ok: json(200, 'A page of accounts, in id order.', R.AccountList), errors: ['invalid_field'],
    }, request => {
      const { items, next } = catalogs.accounts.list(pageRequest(request))
      return ok({ accounts: items, next })
    }),
    route('get', '/admin/accounts/:account', 'viewer', {
      summary: 'Read an account', tag: 'Accounts',
      ok: json(200, 'The account.', R.AccountRecord), errors: ['account_not_found'],
    }, request => ok(catalogs.accounts.get(param(request, 0)))),
    route('patch', '/admin/accounts/:account', 'owner', {
      summary: 'Change an account: name, suspension, rate, browser access, identity verification',
      description: 'A suspended account answers 404 account_not_found on the public API. `rateLimit` is the account\'s rate on the public endpoints (perSecond 0: unlimited); null goes back to BEACON_ACCOUNT_RATE_PER_SECOND. A rate set with the admin key is the operator\'s: an owner may lower it (null: back to it), never raise or remove it (403 role_forbidden); without one, an owner stays within BEACON_ACCOUNT_RATE_PER_SECOND. allowedOrigins replaces the list (exact origins or https://*.shop.example); docs/sdk.md.',
      tag: 'Accounts',
      body: { schema: S.AccountPatch, example: { name: 'My shop (EU)', allowedOrigins: ['https://shop.example', 'https://*.shop.example'], identityVerification: 'required' } },
      ok: json(200, 'The account.', R.AccountRecord), errors: ['account_not_found'],
    }, async request => {
      const patch = validateAccountPatch(request.body)
      if (patch.allowedOrigins !== undefined) patch.allowedOrigins = checkOrigins(patch.allowedOrigins)
      const by: ChangedBy = principalOf(request)?.type === 'user' ? { type: 'owner', defaultRate } : { type: 'operator' }
      return ok(await catalogs.accounts.update(param(request, 0), patch, by))
    }),
    route('post', '/admin/accounts/:account/identity-secret/rotate', 'owner', {
      summary: 'Rotate the identity secret',
      description: 'A new secret, shown only in this answer. The one it replaces stays valid for graceSeconds (default a day), then only the new one is; an older one is dropped at once.',
      tag: 'Accounts',
      body: { schema: S.IdentitySecretRotate, example: { graceSeconds: 3600 } },
      ok: json(200, 'The account, with its new identity secret.', R.AccountWithSecret), errors: ['account_not_found'],
    }, async request => {
      const { graceSeconds = S.IDENTITY_GRACE_SECONDS_DEFAULT } = validateIdentityRotate(request.body)
      const { account, identitySecret } = await catalogs.accounts.rotateIdentitySecret(param(request, 0), graceSeconds * 1000)
      return ok({ ...account, identitySecret })
    }),
    // Served no more at once; its data goes in the background (src/jobs/account-deletion.ts).
    route('del', '/admin/accounts/:account', 'admin', {
      summary: 'Delete an account and all its data',
      description: 'From this answer on nothing of the account is served (404 account_not_found everywhere); its visitors, profiles, links, configuration, tokens, outbox rows, deliveries and indexes are removed in the background, in batches, resuming after a restart. Deleting again answers the same job.',
      tag: 'Accounts',
      ok: json(202, 'The deletion job, started.', R.AccountDeletion), errors: ['account_not_found'],
    }, async request => ok(await accountDeletions.delete(param(request, 0)), 202)),
    route('get', '/admin/accounts/:account/deletion', 'admin', {
      summary: 'Progress of an account\'s deletion', tag: 'Accounts',
      ok: json(200, 'The deletion job.', R.AccountDeletion), errors: ['account_not_found', 'deletion_not_found'],
    }, request => ok(accountDeletions.progress(param(request, 0)))),

    route('post', '/admin/accounts/:account/tokens', 'owner', {
      summary: 'Create a token',
      description: 'The secret `token` is in this answer only; Beacon keeps a SHA-256 of it.',
      tag: 'Tokens',
      body: { schema: S.TokenCreate, example: { name: 'backend', attributes: ['*'], access: 'read-write', ratePerSecond: 100 } },
      ok: json(201, 'The token, with its secret.', R.TokenCreated), errors: ['account_not_found', 'conflict'],
    }, async request => {
      const spec = validateTokenCreate(request.body)
      if (spec.attributes.includes('*') && spec.attributes.length > 1) {
        throw new ApiError('invalid_field', '"*" allows every attribute and must stand alone.', '/attributes')
      }
      const { record, token } = await catalogs.tokens.create(param(request, 0), spec)
      return ok({ ...publicToken(record), token }, 201)
    }),
    route('get', '/admin/accounts/:account/tokens', 'owner', {
      summary: 'List tokens (without secrets)', tag: 'Tokens',
      query: PAGE_QUERY,
      ok: json(200, 'The account\'s tokens, revoked ones included.', R.TokenList), errors: ['invalid_field', 'account_not_found'],
    }, request => {
      const { items, next } = catalogs.tokens.list(param(request, 0), pageRequest(request))
      return ok({ tokens: items.map(publicToken), next })
    }),
    route('del', '/admin/accounts/:account/tokens/:id', 'owner', {
      summary: 'Revoke a token', description: 'Refused at once from then on.', tag: 'Tokens',
      ok: json(200, 'The revoked token (revokedAt set).', R.TokenRecord), errors: ['account_not_found', 'token_not_found'],
    }, async request => {
      catalogs.accounts.get(param(request, 0))
      return ok(publicToken(await catalogs.tokens.revoke(param(request, 0), param(request, 1))))
    }),

    route('get', '/admin/accounts/:account/event-types', 'viewer', {
      summary: 'List event types', tag: 'Event types',
      query: PAGE_QUERY,
      ok: json(200, 'Built-in event types, then the account\'s.', R.EventTypeList), errors: ['invalid_field', 'account_not_found'],
    }, request => {
      const { items, next } = catalogs.eventTypes.list(param(request, 0), pageRequest(request))
      return ok({ eventTypes: items, next })
    }),
    route('put', '/admin/accounts/:account/event-types/:name', 'editor', {
      summary: 'Create or replace a custom event type', tag: 'Event types',
      body: { schema: S.EventTypePut, example: { required: ['plan'] } },
      ok: json(200, 'The event type.', R.EventType), errors: ['account_not_found', 'conflict'],
    }, async request => {
      const name = pathName(request, 'event type name')
      const { required } = validateEventTypePut(request.body)
      return ok(await catalogs.eventTypes.put(param(request, 0), { name, required: [...new Set(required)] }))
    }),
    route('get', '/admin/accounts/:account/event-types/:name', 'viewer', {
      summary: 'Read an event type', tag: 'Event types',
      ok: json(200, 'The event type.', R.EventType), errors: ['account_not_found', 'event_type_not_found'],
    }, request => {
      const account = knownAccount(request)
      const type = catalogs.eventTypes.get(account, param(request, 1))
      if (type === undefined) throw new ApiError('event_type_not_found')
      return ok(type)
    }),
    route('del', '/admin/accounts/:account/event-types/:name', 'editor', {
      summary: 'Delete a custom event type', tag: 'Event types',
      ok: json(200, 'Deleted.', R.NameDeleted), errors: ['invalid_field', 'account_not_found', 'event_type_not_found', 'conflict'],
    }, async request => {
      const name = pathName(request, 'event type name')
      await catalogs.eventTypes.delete(param(request, 0), name)
      return ok({ name, deleted: true })
    }),

    route('get', '/admin/accounts/:account/campaigns', 'viewer', {
      summary: 'List campaigns', tag: 'Campaigns',
      query: PAGE_QUERY,
      ok: json(200, 'The account\'s campaigns.', R.CampaignList), errors: ['invalid_field', 'account_not_found'],
    }, request => {
      const { items, next } = catalogs.campaigns.list(param(request, 0), pageRequest(request))
      return ok({ campaigns: items.map(({ id, campaign }) => ({ id, ...campaign })), next })
    }),
    route('put', '/admin/accounts/:account/campaigns/:id', 'editor', {
      summary: 'Create or replace a campaign', description: 'Compiled when saved; every problem is reported at once with its JSON pointer.',
      tag: 'Campaigns',
      body: {
        schema: R.CampaignPut,
        example: {
          name: 'Summer shoes', status: 'active', priority: 10, trigger: { events: ['productView'] }, rule: { fact: 'event.price', op: 'gte', value: 50 }, content: { banner: 'shoes.png' },
          variants: [{ id: 'control', weight: 1, control: true }, { id: 'red', weight: 1, content: { banner: 'shoes-red.png' } }],
          goals: [{ event: 'purchase', metric: 'conversion', windowDays: 14 }],
        },
      },
      ok: json(200, 'The campaign.', R.Campaign), errors: ['account_not_found', 'invalid_campaign', 'unknown_event_type', 'conflict'],
    }, async request => {
      const id = pathName(request, 'campaign id')
      const def = request.body
      assertCampaign(def)
      refuseUnknownEvents(catalogs, param(request, 0), def.trigger.events ?? [])
      refuseUnknownEvents(catalogs, param(request, 0), (def.goals ?? []).map(goal => goal.event), '/goals')
      const saved = await catalogs.campaigns.put(param(request, 0), id, def)
      return ok({ id, ...saved })
    }),
    route('get', '/admin/accounts/:account/campaigns/:id', 'viewer', {
      summary: 'Read a campaign', tag: 'Campaigns',
      ok: json(200, 'The campaign.', R.Campaign), errors: ['account_not_found', 'campaign_not_found'],
    }, request => {
      const id = param(request, 1)
      return ok({ id, ...catalogs.campaigns.get(param(request, 0), id) })
    }),
    route('del', '/admin/accounts/:account/campaigns/:id', 'editor', {
      summary: 'Delete a campaign', tag: 'Campaigns',
      ok: json(200, 'Deleted.', R.IdDeleted), errors: ['account_not_found', 'campaign_not_found'],
    }, async request => {
      const id = param(request, 1)
      await catalogs.campaigns.delete(param(request, 0), id)
      return ok({ id, deleted: true })
    }),

    route('get', '/admin/accounts/:account/segments', 'viewer', {
      summary: 'List segments', tag: 'Segments',
      query: PAGE_QUERY,
      ok: json(200, 'The account\'s segments.', R.SegmentList), errors: ['invalid_field', 'account_not_found', 'unavailable'],
    }, async request => {
      const { items, next } = catalogs.segments.list(param(request, 0), pageRequest(request))
      const members = await segmentMembers(param(request, 0), items.map(({ name }) => name))
      return ok({ segments: items.map(({ name, segment }, i) => ({ name, ...segment, members: members[i]! })), next })
    }),
    route('put', '/admin/accounts/:account/segments/:name', 'editor', {
      summary: 'Create or replace a segment',
      description: 'With a rule it is computed (members are re-evaluated); without, it is manual. `backfill: true` (a computed segment) evaluates it over the retained event log: follow it at GET …/segments/{name}/backfill; 409 `backfill_running` while one runs for the segment, 501 `event_log_not_kept` without a log (docs/event-log.md, "Backfilling a segment"). Saving it without `backfill`, or deleting it, cancels a running backfill.',
      tag: 'Segments',
      body: { schema: R.SegmentPut, example: { description: 'Viewed 3 products this week', rule: { fact: 'count', event: 'productView', within: '7d', op: 'gte', value: 3 }, backfill: true } },
      ok: json(200, 'The segment.', R.Segment), errors: ['account_not_found', 'invalid_segment', 'conflict', 'backfill_running', 'event_log_not_kept'],
    }, async request => {
      const name = pathName(request, 'segment name')
      const account = param(request, 0)
      // `backfill` asks for the save, it is not part of the segment.
      const isObject = typeof request.body === 'object' && request.body !== null && !Array.isArray(request.body)
      const { backfill, ...body } = (isObject ? request.body : {}) as Record<string, unknown>
      const errors = validateSegment(isObject ? body : request.body)
      if (backfill !== undefined && typeof backfill !== 'boolean') errors.push(errorItem('invalid_segment', '/backfill', 'backfill must be true or false'))
      if (backfill === true && body.rule === undefined) errors.push(errorItem('invalid_segment', '/backfill', 'only a computed segment (with a rule) can be backfilled'))
      if (errors.length > 0) throw ApiError.of(errors, 'The segment definition is invalid.')
      const def = body as SegmentDef
      if (backfill === true) {
        if (backfills === null) throw new ApiError('event_log_not_kept')
        await backfills.create(account, name, def)
      } else {
        await catalogs.segments.put(account, name, def)
        await backfills?.cancel(account, name, 'The segment was changed.')
      }
      return ok({ name, ...def })
    }),
    route('get', '/admin/accounts/:account/segments/:name', 'viewer', {
      summary: 'Read a segment', tag: 'Segments',
      ok: json(200, 'The segment.', R.Segment), errors: ['account_not_found', 'segment_not_found', 'unavailable'],
    }, async request => {
      const name = param(request, 1)
      const segment = catalogs.segments.get(param(request, 0), name)
      const [members] = await segmentMembers(param(request, 0), [name])
      return ok({ name, ...segment, members: members! })
    }),
    route('get', '/admin/accounts/:account/segments/:name/backfill', 'viewer', {
      summary: 'Read a segment\'s backfill', tag: 'Segments',
      description: 'The progress of the segment\'s last backfill over the event log (docs/event-log.md, "Backfilling a segment"): `state` (running, done, cancelled), events read, visitors updated, members now.',
      ok: json(200, 'The backfill.', R.SegmentBackfill), errors: ['account_not_found', 'segment_not_found', 'backfill_not_found', 'event_log_not_kept', 'unavailable'],
    }, async request => {
      const account = param(request, 0)
      const name = param(request, 1)
      catalogs.segments.get(account, name)
      if (backfills === null) throw new ApiError('event_log_not_kept')
      const row = backfills.get(account, name)
      const [members] = await segmentMembers(account, [name])
      return ok(backfillView(row, members!))
    }),
    route('del', '/admin/accounts/:account/segments/:name', 'editor', {
      summary: 'Delete a segment', tag: 'Segments',
      ok: json(200, 'Deleted.', R.NameDeleted), errors: ['account_not_found', 'segment_not_found'],
    }, async request => {
      const name = param(request, 1)
      await catalogs.segments.delete(param(request, 0), name)
      await backfills?.cancel(param(request, 0), name, 'The segment was deleted.')
      return ok({ name, deleted: true })
    }),

    route('get', '/admin/accounts/:account/webhooks', 'viewer', {
      summary: 'List webhooks', tag: 'Webhooks',
      ok: json(200, 'The account\'s webhooks, secrets redacted.', { type: 'object', required: ['webhooks', 'next'], properties: { webhooks: { type: 'array', items: R.webhookAnswer(WebhookConfigSchema) }, next: R.Next } } as TSchema),
      query: PAGE_QUERY,
      errors: ['invalid_field', 'account_not_found'],
    }, request => {
      const { items, next } = catalogs.webhooks.list(param(request, 0), pageRequest(request))
      return ok({ webhooks: items.map(({ id, webhook }) => ({ id, ...webhook })), next })
    }),
    route('put', '/admin/accounts/:account/webhooks/:id', 'editor', {
      summary: 'Create or replace a webhook',
      description: 'Validated and compiled when saved (templates, URL, SSRF, cron). A secret sent back as "[redacted]" keeps its saved value.',
      tag: 'Webhooks',
      body: {
        schema: WebhookConfigSchema,
        example: {
          name: 'Orders to the CRM', enabled: true,
          trigger: { kind: 'event', events: ['purchase'] },
          request: { method: 'POST', url: 'https://crm.example.com/hooks/beacon', auth: { type: 'bearer', token: 'crm-secret' } },
          delivery: { mode: 'async', timeoutMs: 5000, batchSize: 1 },
        },
      },
      ok: json(200, 'The webhook, secrets redacted.', R.webhookAnswer(WebhookConfigSchema)), errors: ['account_not_found', 'conflict'],
    }, async request => {
      const id = pathName(request, 'webhook id')
      const webhook = await catalogs.webhooks.put(param(request, 0), id, request.body)
      return ok({ id, ...redactWebhook(webhook.config) })
    }),
    route('get', '/admin/accounts/:account/webhooks/:id', 'viewer', {
      summary: 'Read a webhook', tag: 'Webhooks',
      ok: json(200, 'The webhook, secrets redacted.', R.webhookAnswer(WebhookConfigSchema)), errors: ['account_not_found', 'webhook_not_found'],
    }, request => {
      const id = param(request, 1)
      return ok({ id, ...redactWebhook(catalogs.webhooks.webhook(param(request, 0), id).config) })
    }),
    route('del', '/admin/accounts/:account/webhooks/:id', 'editor', {
      summary: 'Delete a webhook', tag: 'Webhooks',
      ok: json(200, 'Deleted.', R.IdDeleted), errors: ['account_not_found', 'webhook_not_found'],
    }, async request => {
      const id = param(request, 1)
      await catalogs.webhooks.delete(param(request, 0), id)
      return ok({ id, deleted: true })
    }),
    route('get', '/admin/accounts/:account/webhooks/:id/deliveries', 'viewer', {
      summary: 'List a webhook\'s deliveries',
      description: 'Oldest first, a page at a time. In cluster mode every live node\'s records, merged by creation time (ties by node id, then seq): following `next` lists each record of the cluster once; a node that does not answer within 5 s makes it a 503 `unavailable` (Retry-After: 1).',
      tag: 'Webhooks',
      query: [
        { name: 'status', description: 'Only deliveries in this status.', schema: { type: 'string', enum: [...DELIVERY_STATUSES] } as TSchema },
        {
          name: 'after',
          description: 'The `next` of the previous page, passed back as it is (omitted: the first page). Embedded mode: a whole number (a seq). Cluster mode: an opaque string holding each node\'s position; anything else is refused (400 invalid_field).',
          schema: { anyOf: [{ type: 'integer', minimum: 0 }, { type: 'string', pattern: '^[A-Za-z0-9_-]*$', maxLength: CLUSTER_CURSOR_LENGTH_MAX }] } as TSchema,
        },
        { name: 'limit', description: `Page size (default 100, at most ${LIST_PAGE_MAX}).`, schema: { type: 'integer', minimum: 1, maximum: LIST_PAGE_MAX } as TSchema },
      ],
      ok: json(200, 'A page of deliveries.', R.DeliveryPage), errors: ['invalid_field', 'account_not_found', 'webhook_not_found', 'unavailable'],
    }, async request => {
      const account = param(request, 0)
      const id = param(request, 1)
      catalogs.webhooks.webhook(account, id)
      const query = new URLSearchParams(request.query)
      const status = query.get('status')
      if (status !== null && !(DELIVERY_STATUSES as readonly string[]).includes(status)) {
        throw new ApiError('invalid_field', `status must be one of ${DELIVERY_STATUSES.join(', ')}.`, '/status')
      }
      const limit = wholeNumber(query.get('limit'), 1, LIST_PAGE_MAX, 'limit', 100)
      if (clusterDeliveries !== null) {
        const page = await clusterDeliveries.list(account, id, status as DeliveryStatus | null, query.get('after') ?? '', limit)
        return ok({ deliveries: page.deliveries.map(deliveryView), next: page.next })
      }
      const after = wholeNumber(query.get('after'), 0, Number.MAX_SAFE_INTEGER, 'after')
      const page = await deliveries.list(account, id, status as DeliveryStatus | null, after, limit)
      return ok({ deliveries: page.deliveries.map(deliveryView), next: page.next })
    }),
    route('post', '/admin/accounts/:account/webhooks/:id/replay', 'editor', {
      summary: 'Queue deliveries again',
      description: 'The deliveries named, or the dead ones that occurred in [from, to); each starts again from attempt 1. In cluster mode each named delivery is replayed at the node that holds it, and a time range at every live node (the answer is their sum); a node that does not answer within 5 s makes it a 503 `unavailable` (Retry-After: 1).',
      tag: 'Webhooks',
      body: { schema: S.WebhookReplay, example: { from: '2026-01-01T00:00:00Z' } },
      ok: json(200, 'How many were queued again.', R.Replayed), errors: ['account_not_found', 'webhook_not_found', 'unavailable'],
    }, async request => {
      const { deliveryIds, from, to } = validateReplay(request.body)
      const fromMs = from === undefined ? 0 : Date.parse(from)
      const toMs = to === undefined ? Number.MAX_SAFE_INTEGER : Date.parse(to)
      if (Number.isNaN(fromMs)) throw new ApiError('invalid_field', 'from must be an ISO-8601 time.', '/from')
      if (Number.isNaN(toMs)) throw new ApiError('invalid_field', 'to must be an ISO-8601 time.', '/to')
      const account = param(request, 0)
      const id = param(request, 1)
      if (clusterDeliveries === null) return ok({ replayed: await deliveries.replay(account, id, deliveryIds ?? null, fromMs, toMs) })
      catalogs.webhooks.webhook(account, id) // 404 here, before asking the nodes
      return ok({ replayed: await clusterDeliveries.replay(account, id, deliveryIds ?? null, fromMs, toMs) })
    }),

    // Privacy: everything held on a person, and its erasure (the profile and every device ever linked
    // to it: src/jobs/erasure.ts), and the erasure of one anonymous device.
    keyed('profile', route('get', '/admin/accounts/:account/profiles/:profileId/export', 'owner', {
      summary: 'Export everything held on a person', description: 'The profile and each linked visitor (data subject access).', tag: 'People',
      ok: json(200, 'The person\'s data.', R.PersonExport), errors: ['account_not_found'],
    }, async request => {
      const account = knownAccount(request)
      const profileId = param(request, 1)
      const { profile, visitors: devices } = await erasure.exportProfile(account, profileId)
      return ok({ profileId, profile: profileView(profileId, profile), visitors: devices.map(({ id, state }) => visitorView(id, state)) })
    })),
    keyed('profile', route('del', '/admin/accounts/:account/profiles/:profileId', 'owner', {
      summary: 'Erase a person', tag: 'People',
      description: 'The profile, every visitor ever linked to it (not only its latest devices) unless linked to another profile since, and the outbox rows and webhook delivery records (deliveries log, dead letters) carrying them. In cluster mode the delivery records of every node go (the erasure is stored for them; `deliveries` counts the answering node\'s), and a 503 `unavailable` (Retry-After: 1) says it could not be stored: retry. See docs/privacy.md.',
      ok: json(200, 'What was erased.', R.Erased), errors: ['account_not_found', 'profile_not_found', 'unavailable'],
    }, async request => {
      const account = knownAccount(request)
      const id = param(request, 1)
      const erased = await erasure.eraseProfile(account, id)
      if (!erased.found) throw new ApiError('profile_not_found')
      return ok({ profileId: id, erased: { profiles: erased.profile ? 1 : 0, visitors: erased.visitors, deliveries: erased.deliveries }, keptVisitors: erased.keptVisitors })
    })),
    keyed('visitor', route('del', '/admin/accounts/:account/visitors/:visitorId', 'owner', {
      summary: 'Erase a visitor', tag: 'People',
      description: 'One device: its record, its indexes, its copy in a linked profile, and the outbox rows and webhook delivery records carrying its id (in cluster mode on every node, as for a person). A visitor erased already is 404, its delivery records erased again first.',
      ok: json(200, 'What was erased.', R.VisitorErased), errors: ['account_not_found', 'visitor_not_found', 'unavailable'],
    }, async request => {
      const account = knownAccount(request)
      const id = visitorKey(param(request, 1))
      const erased = await erasure.eraseVisitor(account, id)
      if (erased === null) throw new ApiError('visitor_not_found')
      return ok({ visitorId: id, erased: { visitors: 1, deliveries: erased.deliveries }, unlinkedFrom: erased.profileId })
    })),

    // Everything Beacon holds on one visitor or profile (attributes, segments, tracked behaviour).
    keyed('visitor', route('get', '/admin/accounts/:account/visitors/:visitorId', 'viewer', {
      summary: 'Everything held on a visitor', tag: 'People',
      ok: json(200, 'The visitor\'s record.', R.VisitorSnapshot), errors: ['account_not_found'],
    }, async request => {
      const account = knownAccount(request)
      const id = visitorKey(param(request, 1))
      return ok(visitorView(id, await runtime.send(visitors, account, id, { type: 'snapshot' })))
    })),
    keyed('profile', route('get', '/admin/accounts/:account/profiles/:profileId', 'viewer', {
      summary: 'Everything held on a profile', tag: 'People',
      ok: json(200, 'The profile\'s record.', R.ProfileSnapshot), errors: ['account_not_found'],
    }, async request => {
      const account = knownAccount(request)
      const profileId = param(request, 1)
      return ok(profileView(profileId, await runtime.send(profiles, account, profileId, { type: 'snapshot' })))
    })),
  ]
}

/** `?limit=&cursor=` of a listing: the `next` of the previous page, and the page size. */
export function pageRequest (request: Request): PageRequest {
  const query = new URLSearchParams(request.query)
  const cursor = query.get('cursor') ?? ''
  if (cursor.length > 300) throw new ApiError('invalid_field', 'cursor must be the next of a previous page (at most 300 characters).', '/cursor')
  return { cursor, limit: wholeNumber(query.get('limit'), 1, PAGE_LIMIT_MAX, 'limit', PAGE_LIMIT_DEFAULT) }
}

/** A campaign triggered by an event type the account does not know could never show: refused, naming each. */
function refuseUnknownEvents (catalogs: Catalogs, account: string, events: readonly string[], at = '/trigger/events'): void {
  catalogs.accounts.get(account)
  const items = events.flatMap((name, i) => catalogs.eventTypes.get(account, name) !== undefined ? [] : [errorItem('unknown_event_type', at === '/goals' ? `/goals/${i}/event` : `${at}/${i}`,
    `The event type "${name}" is not built in and was not defined for this account: define it first (PUT /admin/accounts/{account}/event-types/${name}).`)])
  if (items.length > 0) throw ApiError.of(items)
}

export function wholeNumber (raw: string | null, min: number, max: number, name: string, fallback = min): number {
  if (raw === null || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) throw new ApiError('invalid_field', `${name} must be a whole number from ${min} to ${max}.`, `/${name}`)
  return n
}

/** Every origin pattern checked (all problems at once), duplicates dropped. */
function checkOrigins (patterns: string[]): string[] {
  const problems = patterns.flatMap((pattern, i) => {
    const problem = originProblem(pattern)
    return problem === null ? [] : [errorItem('invalid_field', `/allowedOrigins/${i}`, `${JSON.stringify(pattern)} ${problem}.`)]
  })
  if (problems.length > 0) throw ApiError.of(problems)
  return [...new Set(patterns)]
}
