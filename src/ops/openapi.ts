// The OpenAPI 3.1 document, built from one table: `METHOD /path/{param}` → summary, tag, auth, request
// body (the TypeBox schemas that validate requests, from src/http/schemas.ts and the webhook config;
// descriptive ones from openapi-schemas.ts where hand-written code validates), the success answer and
// the error codes the operation can refuse with. Error responses are generated per status from
// src/errors.ts, so a code's status and message are stated in one place. Built once, served as text.
//
// test/ops/openapi.test.ts holds the table to the server: every route it serves is here, every entry
// here answers, and the answers match the documented bodies.

import type { TSchema } from 'typebox'
import { ERRORS, type ErrorCode } from '../errors.js'
import * as S from '../http/schemas.js'
import { WebhookConfigSchema } from '../webhooks/config.js'
import { DELIVERY_STATUSES, LIST_PAGE_MAX } from '../../actors/delivery.js'
import * as R from './openapi-schemas.js'
import { CONTENT_TYPE as METRICS_CONTENT_TYPE } from './metrics.js'
import { VERSION } from './version.js'
import { PANEL_OPERATIONS, PANEL_TAGS } from './openapi-panel.js'

export type Auth = 'admin' | 'token-read' | 'token-write' | 'none'

export const TAGS = {
  Events: 'Fire a visitor event and get the eligible campaigns (public).',
  Profiles: 'Read and change a known person\'s attributes and segments (public, token).',
  Visitors: 'Read and change an anonymous device\'s attributes and segments (public, token).',
  Accounts: 'Tenants (admin).',
  Tokens: 'API tokens of an account (admin).',
  'Event types': 'Custom event types and their required fields (admin).',
  Campaigns: 'Campaigns answered by /campaigns/query (admin).',
  Segments: 'Manual and computed segments (admin).',
  Webhooks: 'Webhooks, their deliveries and replay (admin); see docs/webhooks.md.',
  People: 'Everything held on a visitor or profile; export and erasure (admin).',
  Operations: 'Health, readiness, metrics and this document (no key).',
  ...PANEL_TAGS,
} as const
export type Tag = keyof typeof TAGS

export interface Answer {
  status: number
  description: string
  /** Absent: no body (204). */
  schema?: TSchema
  /** Default application/json. */
  contentType?: string
}

export interface QueryParameter {
  name: string
  description: string
  schema: TSchema
}

export interface Operation {
  summary: string
  description?: string
  tag: Tag
  auth: Auth
  /** The request body's schema and an example (the coverage test sends the example); `raw`: bytes of that type, not JSON. */
  body?: { schema: TSchema, example: Record<string, unknown>, raw?: string }
  query?: QueryParameter[]
  /** The success answer. */
  ok: Answer
  /** Other answers that are not refusals (e.g. /readyz's 503). */
  also?: Answer[]
  /** Refusals specific to the operation; the common ones follow from auth and body. */
  errors: ErrorCode[]
}

// Refusals every operation may answer, and those that follow from a body or from authentication.
const ALWAYS: ErrorCode[] = ['overloaded', 'shutting_down', 'internal']
const BODY: ErrorCode[] = ['invalid_json', 'invalid_field', 'unknown_field', 'forbidden_key', 'body_too_large', 'unsupported_media_type', 'bad_framing']
const RAW_BODY: ErrorCode[] = ['body_too_large', 'bad_framing']
/** With a panel session instead of the admin key: outside the role or the account, or a change without the Origin. */
const SESSION: ErrorCode[] = ['role_forbidden', 'csrf_refused']
const AUTH: Record<Auth, ErrorCode[]> = {
  admin: ['admin_unauthorized'],
  'token-read': ['token_missing', 'token_invalid', 'token_wrong_account', 'token_write_only', 'rate_limited'],
  'token-write': ['token_missing', 'token_invalid', 'token_wrong_account', 'token_read_only', 'rate_limited'],
  none: [],
}

/** Placeholders in examples; the coverage test replaces them with a real account and token. */
export const EXAMPLE_ACCOUNT = '6f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f'
export const EXAMPLE_TOKEN = 'bk_0123456789abcdef_s3cr3t'
const VISITOR = '2b7e1b8e-7c0e-4c7e-9a4e-1b2c3d4e5f60'

export const json = (status: number, description: string, schema: TSchema): Answer => ({ status, description, schema })

export const OPERATIONS: Readonly<Record<string, Operation>> = {
  // ---- public ----
  'POST /campaigns/query': {
    summary: 'Fire an event; answer the eligible campaigns',
    description: 'Records the event on the visitor (durably, before answering) and answers the campaigns the visitor is eligible for. No token needed: browsers call it.',
    tag: 'Events', auth: 'none',
    body: { schema: S.EventRequest, example: { account: EXAMPLE_ACCOUNT, visitorId: VISITOR, platform: 'web', event: 'pageView', path: '/shoes' } },
    ok: json(200, 'The eligible campaigns.', R.CampaignsAnswer),
    errors: ['account_not_found', 'unknown_event_type'],
  },
  'POST /profiles/query': {
    summary: 'Read a profile\'s attributes and segments',
    tag: 'Profiles', auth: 'token-read',
    body: { schema: S.ProfileQuery, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, profileId: 'ana@example.com', attributes: ['plan'] } },
    ok: json(200, 'The unified view of the profile (never seen: empty).', R.EntityAnswer),
    errors: ['account_not_found', 'attribute_forbidden'],
  },
  'POST /visitors/query': {
    summary: 'Read a visitor\'s attributes and segments',
    tag: 'Visitors', auth: 'token-read',
    body: { schema: S.VisitorQuery, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, visitorId: VISITOR } },
    ok: json(200, 'The visitor\'s data, with profileId when linked (never seen: empty).', R.EntityAnswer),
    errors: ['account_not_found', 'attribute_forbidden'],
  },
  'POST /profiles/attributes': {
    summary: 'Set or delete (null) a profile\'s attributes',
    tag: 'Profiles', auth: 'token-write',
    body: { schema: S.ProfileAttributes, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, profileId: 'ana@example.com', attributes: { plan: 'pro', tags: ['a', 'b'], old: null } } },
    ok: json(200, 'Saved (durably).', R.savedAnswer('profileId', false)),
    errors: ['account_not_found', 'attribute_forbidden', 'entity_full'],
  },
  'POST /visitors/attributes': {
    summary: 'Set or delete (null) a visitor\'s attributes',
    tag: 'Visitors', auth: 'token-write',
    body: { schema: S.VisitorAttributes, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, visitorId: VISITOR, attributes: { color: 'red' } } },
    ok: json(200, 'Saved (durably).', R.savedAnswer('visitorId', false)),
    errors: ['account_not_found', 'attribute_forbidden', 'entity_full'],
  },
  'POST /profiles/segments': {
    summary: 'Assign or remove a profile\'s manual segments',
    tag: 'Profiles', auth: 'token-write',
    body: { schema: S.ProfileSegments, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, profileId: 'ana@example.com', assignees: ['vip'], removes: ['trial'] } },
    ok: json(200, 'Saved (durably); the manual segments after the change (a read: absent for a write-only token).', R.savedAnswer('profileId', true)),
    errors: ['account_not_found', 'segment_computed', 'entity_full'],
  },
  'POST /visitors/segments': {
    summary: 'Assign or remove a visitor\'s manual segments',
    tag: 'Visitors', auth: 'token-write',
    body: { schema: S.VisitorSegments, example: { account: EXAMPLE_ACCOUNT, token: EXAMPLE_TOKEN, visitorId: VISITOR, assignees: ['returning'] } },
    ok: json(200, 'Saved (durably); the manual segments after the change (a read: absent for a write-only token).', R.savedAnswer('visitorId', true)),
    errors: ['account_not_found', 'segment_computed', 'entity_full'],
  },

  // ---- admin: accounts and tokens ----
  'POST /admin/accounts': {
    summary: 'Create an account',
    tag: 'Accounts', auth: 'admin',
    body: { schema: S.AccountCreate, example: { name: 'My shop' } },
    ok: json(201, 'The new account.', R.AccountRecord),
    errors: [],
  },
  'GET /admin/accounts': {
    summary: 'List accounts', tag: 'Accounts', auth: 'admin',
    ok: json(200, 'Every account.', R.AccountList), errors: [],
  },
  'GET /admin/accounts/{account}': {
    summary: 'Read an account', tag: 'Accounts', auth: 'admin',
    ok: json(200, 'The account.', R.AccountRecord), errors: ['account_not_found'],
  },
  'PATCH /admin/accounts/{account}': {
    summary: 'Rename or suspend an account',
    description: 'A suspended account answers 404 account_not_found on the public API.',
    tag: 'Accounts', auth: 'admin',
    body: { schema: S.AccountPatch, example: { name: 'My shop (EU)' } },
    ok: json(200, 'The account.', R.AccountRecord), errors: ['account_not_found'],
  },
  'POST /admin/accounts/{account}/tokens': {
    summary: 'Create a token',
    description: 'The secret `token` is in this answer only; Beacon keeps a SHA-256 of it.',
    tag: 'Tokens', auth: 'admin',
    body: { schema: S.TokenCreate, example: { name: 'backend', attributes: ['*'], access: 'read-write', ratePerSecond: 100 } },
    ok: json(201, 'The token, with its secret.', R.TokenCreated), errors: ['account_not_found'],
  },
  'GET /admin/accounts/{account}/tokens': {
    summary: 'List tokens (without secrets)', tag: 'Tokens', auth: 'admin',
    ok: json(200, 'The account\'s tokens, revoked ones included.', R.TokenList), errors: ['account_not_found'],
  },
  'DELETE /admin/accounts/{account}/tokens/{id}': {
    summary: 'Revoke a token', description: 'Refused at once from then on.', tag: 'Tokens', auth: 'admin',
    ok: json(200, 'The revoked token (revokedAt set).', R.TokenRecord), errors: ['account_not_found', 'token_not_found'],
  },

  // ---- admin: event types ----
  'GET /admin/accounts/{account}/event-types': {
    summary: 'List event types', tag: 'Event types', auth: 'admin',
    ok: json(200, 'Built-in event types, then the account\'s.', R.EventTypeList), errors: ['account_not_found'],
  },
  'PUT /admin/accounts/{account}/event-types/{name}': {
    summary: 'Create or replace a custom event type', tag: 'Event types', auth: 'admin',
    body: { schema: S.EventTypePut, example: { required: ['plan'] } },
    ok: json(200, 'The event type.', R.EventType), errors: ['account_not_found', 'conflict'],
  },
  'GET /admin/accounts/{account}/event-types/{name}': {
    summary: 'Read an event type', tag: 'Event types', auth: 'admin',
    ok: json(200, 'The event type.', R.EventType), errors: ['account_not_found', 'event_type_not_found'],
  },
  'DELETE /admin/accounts/{account}/event-types/{name}': {
    summary: 'Delete a custom event type', tag: 'Event types', auth: 'admin',
    ok: json(200, 'Deleted.', R.NameDeleted), errors: ['invalid_field', 'account_not_found', 'event_type_not_found', 'conflict'],
  },

  // ---- admin: campaigns ----
  'GET /admin/accounts/{account}/campaigns': {
    summary: 'List campaigns', tag: 'Campaigns', auth: 'admin',
    ok: json(200, 'The account\'s campaigns.', R.CampaignList), errors: ['account_not_found'],
  },
  'PUT /admin/accounts/{account}/campaigns/{id}': {
    summary: 'Create or replace a campaign', description: 'Compiled when saved; every problem is reported at once with its JSON pointer.',
    tag: 'Campaigns', auth: 'admin',
    body: { schema: R.CampaignPut, example: { name: 'Summer shoes', status: 'active', priority: 10, trigger: { events: ['productView'] }, rule: { fact: 'event.price', op: 'gte', value: 50 }, content: { banner: 'shoes.png' } } },
    ok: json(200, 'The campaign.', R.Campaign), errors: ['account_not_found', 'invalid_campaign', 'unknown_event_type', 'conflict'],
  },
  'GET /admin/accounts/{account}/campaigns/{id}': {
    summary: 'Read a campaign', tag: 'Campaigns', auth: 'admin',
    ok: json(200, 'The campaign.', R.Campaign), errors: ['account_not_found', 'campaign_not_found'],
  },
  'DELETE /admin/accounts/{account}/campaigns/{id}': {
    summary: 'Delete a campaign', tag: 'Campaigns', auth: 'admin',
    ok: json(200, 'Deleted.', R.IdDeleted), errors: ['account_not_found', 'campaign_not_found'],
  },

  // ---- admin: segments ----
  'GET /admin/accounts/{account}/segments': {
    summary: 'List segments', tag: 'Segments', auth: 'admin',
    ok: json(200, 'The account\'s segments.', R.SegmentList), errors: ['account_not_found'],
  },
  'PUT /admin/accounts/{account}/segments/{name}': {
    summary: 'Create or replace a segment', description: 'With a rule it is computed (members are re-evaluated); without, it is manual.',
    tag: 'Segments', auth: 'admin',
    body: { schema: R.SegmentPut, example: { description: 'Viewed 3 products this week', rule: { fact: 'count', event: 'productView', within: '7d', op: 'gte', value: 3 } } },
    ok: json(200, 'The segment.', R.Segment), errors: ['account_not_found', 'invalid_segment', 'conflict'],
  },
  'GET /admin/accounts/{account}/segments/{name}': {
    summary: 'Read a segment', tag: 'Segments', auth: 'admin',
    ok: json(200, 'The segment.', R.Segment), errors: ['account_not_found', 'segment_not_found'],
  },
  'DELETE /admin/accounts/{account}/segments/{name}': {
    summary: 'Delete a segment', tag: 'Segments', auth: 'admin',
    ok: json(200, 'Deleted.', R.NameDeleted), errors: ['account_not_found', 'segment_not_found'],
  },

  // ---- admin: webhooks ----
  'GET /admin/accounts/{account}/webhooks': {
    summary: 'List webhooks', tag: 'Webhooks', auth: 'admin',
    ok: json(200, 'The account\'s webhooks, secrets redacted.', { type: 'object', required: ['webhooks'], properties: { webhooks: { type: 'array', items: R.webhookAnswer(WebhookConfigSchema) } } } as TSchema),
    errors: ['account_not_found'],
  },
  'PUT /admin/accounts/{account}/webhooks/{id}': {
    summary: 'Create or replace a webhook',
    description: 'Validated and compiled when saved (templates, URL, SSRF, cron). A secret sent back as "[redacted]" keeps its saved value.',
    tag: 'Webhooks', auth: 'admin',
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
  },
  'GET /admin/accounts/{account}/webhooks/{id}': {
    summary: 'Read a webhook', tag: 'Webhooks', auth: 'admin',
    ok: json(200, 'The webhook, secrets redacted.', R.webhookAnswer(WebhookConfigSchema)), errors: ['account_not_found', 'webhook_not_found'],
  },
  'DELETE /admin/accounts/{account}/webhooks/{id}': {
    summary: 'Delete a webhook', tag: 'Webhooks', auth: 'admin',
    ok: json(200, 'Deleted.', R.IdDeleted), errors: ['account_not_found', 'webhook_not_found'],
  },
  'GET /admin/accounts/{account}/webhooks/{id}/deliveries': {
    summary: 'List a webhook\'s deliveries', description: 'Oldest first, a page at a time.', tag: 'Webhooks', auth: 'admin',
    query: [
      { name: 'status', description: 'Only deliveries in this status.', schema: { type: 'string', enum: [...DELIVERY_STATUSES] } as TSchema },
      { name: 'after', description: 'The `next` of the previous page.', schema: { type: 'integer', minimum: 0 } as TSchema },
      { name: 'limit', description: `Page size (default 100, at most ${LIST_PAGE_MAX}).`, schema: { type: 'integer', minimum: 1, maximum: LIST_PAGE_MAX } as TSchema },
    ],
    ok: json(200, 'A page of deliveries.', R.DeliveryPage), errors: ['invalid_field', 'account_not_found', 'webhook_not_found'],
  },
  'POST /admin/accounts/{account}/webhooks/{id}/replay': {
    summary: 'Queue deliveries again',
    description: 'The deliveries named, or the dead ones that occurred in [from, to); each starts again from attempt 1.',
    tag: 'Webhooks', auth: 'admin',
    body: { schema: S.WebhookReplay, example: { from: '2026-01-01T00:00:00Z' } },
    ok: json(200, 'How many were queued again.', R.Replayed), errors: ['account_not_found', 'webhook_not_found'],
  },

  // ---- admin: people ----
  'GET /admin/accounts/{account}/visitors/{visitorId}': {
    summary: 'Everything held on a visitor', tag: 'People', auth: 'admin',
    ok: json(200, 'The visitor\'s record.', R.VisitorSnapshot), errors: ['account_not_found'],
  },
  'GET /admin/accounts/{account}/profiles/{profileId}': {
    summary: 'Everything held on a profile', tag: 'People', auth: 'admin',
    ok: json(200, 'The profile\'s record.', R.ProfileSnapshot), errors: ['account_not_found'],
  },
  'GET /admin/accounts/{account}/profiles/{profileId}/export': {
    summary: 'Export everything held on a person', description: 'The profile and each linked visitor (data subject access).', tag: 'People', auth: 'admin',
    ok: json(200, 'The person\'s data.', R.PersonExport), errors: ['account_not_found'],
  },
  'DELETE /admin/accounts/{account}/profiles/{profileId}': {
    summary: 'Erase a person', description: 'The profile and its linked visitors.', tag: 'People', auth: 'admin',
    ok: json(200, 'What was erased.', R.Erased), errors: ['account_not_found', 'profile_not_found'],
  },

  // ---- operations ----
  'GET /healthz': {
    summary: 'Liveness: the process answers', tag: 'Operations', auth: 'none',
    ok: json(200, 'Up.', R.Liveness), errors: [],
  },
  'GET /readyz': {
    summary: 'Readiness: LMDB open, NATS connected when configured, not draining', tag: 'Operations', auth: 'none',
    description: 'Send traffic while it answers 200. While draining the server answers 503 shutting_down before this check runs.',
    ok: json(200, 'Ready.', R.Readiness),
    also: [json(503, 'Not ready: `reason` says why.', R.Readiness)],
    errors: [],
  },
  'GET /metrics': {
    summary: 'Prometheus metrics', tag: 'Operations', auth: 'none',
    description: 'Requests by route and status, latency histograms, actors, LMDB, outbox, process. Off with BEACON_METRICS=false.',
    ok: { status: 200, description: 'Prometheus text format.', schema: R.MetricsText, contentType: METRICS_CONTENT_TYPE },
    errors: ['not_found'],
  },
  'GET /openapi.json': {
    summary: 'This document', tag: 'Operations', auth: 'none',
    ok: json(200, 'OpenAPI 3.1.', R.OpenApiDocument), errors: [],
  },
  ...PANEL_OPERATIONS,
}

/** The key of a route in OPERATIONS: `GET /admin/accounts/{account}` for get + `/admin/accounts/:account`. */
export function operationKey (method: string, pattern: string): string {
  const verb = method === 'del' ? 'DELETE' : method.toUpperCase()
  return `${verb} ${pattern.replace(/:([A-Za-z]+)/g, '{$1}')}`
}

/** Paths compared without their parameter names (`/x/{id}` and `/x/:name` are the same route). */
export function shapeOf (key: string): string {
  return key.replace(/\{[^}]+\}|:[A-Za-z]+/g, '{}')
}

export function buildOpenApi (): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const [key, operation] of Object.entries(OPERATIONS)) {
    const [method, path] = key.split(' ') as [string, string]
    paths[path] ??= {}
    paths[path]![method.toLowerCase()] = operationObject(method, path, operation)
  }
  const doc = {
    openapi: '3.1.0',
    info: {
      title: 'Beacon',
      version: VERSION,
      summary: 'Audience and personalization engine: visitor events in, eligible campaigns out, webhooks to everything else.',
      description: 'Public endpoints take a JSON body (POST, Content-Type: application/json); those that read or write ' +
        'attributes and segments authenticate with a `token` field in the body. The admin API takes ' +
        '`Authorization: Bearer <admin key>`. Every refusal has the body `{status, message, errors: [{code, field?, message}]}`; ' +
        'switch on `code`. docs/api.md is the guide.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      securitySchemes: {
        adminKey: { type: 'http', scheme: 'bearer', description: 'The admin key: BEACON_ADMIN_KEY, or generated into <data dir>/admin.key on first start.' },
        session: {
          type: 'apiKey', in: 'cookie', name: 'beacon_session',
          description: 'A panel session (POST /admin/session): only the user\'s own account, within their role; changes need the Origin header of the site itself.',
        },
      },
      schemas: { Condition: R.Condition, SegmentCondition: R.SegmentCondition },
    },
  }
  // TypeBox schemas are JSON Schema plus non-enumerable bookkeeping: a JSON round trip keeps the schema.
  return JSON.parse(JSON.stringify(doc)) as Record<string, unknown>
}

function operationObject (method: string, path: string, operation: Operation): Record<string, unknown> {
  const out: Record<string, unknown> = {
    operationId: operationId(method, path),
    summary: operation.summary,
    tags: [operation.tag],
    security: operation.auth === 'admin' ? [{ adminKey: [] }, { session: [] }] : [],
  }
  const description = [operation.description, authNote(operation.auth)].filter(Boolean).join(' ')
  if (description !== '') out.description = description
  const parameters = [
    ...[...path.matchAll(/\{([A-Za-z]+)\}/g)].map(([, name]) => ({ name, in: 'path', required: true, description: paramDescription(path, name!), schema: { type: 'string' } })),
    ...(operation.query ?? []).map(q => ({ name: q.name, in: 'query', required: false, description: q.description, schema: q.schema })),
  ]
  if (parameters.length > 0) out.parameters = parameters
  if (operation.body?.raw !== undefined) {
    out.requestBody = { required: true, content: { [operation.body.raw]: { schema: operation.body.schema } } }
  } else if (operation.body !== undefined) {
    out.requestBody = { required: true, content: { 'application/json': { schema: operation.body.schema, example: operation.body.example } } }
  }
  out.responses = responses(operation)
  return out
}

function responses (operation: Operation): Record<string, unknown> {
  const body = operation.body === undefined ? [] : operation.body.raw === undefined ? BODY : RAW_BODY
  const session = operation.auth === 'admin' ? SESSION : []
  const codes = new Set<ErrorCode>([...operation.errors, ...AUTH[operation.auth], ...session, ...body, ...ALWAYS])
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of Object.keys(ERRORS) as ErrorCode[]) {
    if (!codes.has(code)) continue
    const status = ERRORS[code][0]
    byStatus.set(status, [...(byStatus.get(status) ?? []), code])
  }
  const out: Record<string, { description: string, content?: Record<string, { schema: TSchema }> }> = {}
  for (const answer of [operation.ok, ...(operation.also ?? [])]) {
    out[String(answer.status)] = answer.schema === undefined
      ? { description: answer.description }
      : { description: answer.description, content: { [answer.contentType ?? 'application/json']: { schema: answer.schema } } }
  }
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    const error = R.ErrorBody(list)
    const existing = out[String(status)]
    if (existing === undefined) {
      out[String(status)] = { description: R.errorDescription(list), content: { 'application/json': { schema: error } } }
    } else {
      // A status that is both an answer and a refusal (/readyz's 503): either body.
      const content = existing.content!['application/json']!
      existing.description += ' Or refused: ' + R.errorDescription(list)
      content.schema = { anyOf: [content.schema, error] } as TSchema
    }
  }
  return out
}

function authNote (auth: Auth): string {
  switch (auth) {
    case 'token-read': return 'Authentication: a token with read access in the body\'s `token` field.'
    case 'token-write': return 'Authentication: a token with write access in the body\'s `token` field.'
    default: return ''
  }
}

const PARAMS: Record<string, string> = {
  account: 'The account id (UUID).',
  visitorId: 'The visitor id (UUID v4).',
  profileId: 'The profile id (e-mail, user id…), URL-encoded.',
}

/** Nouns of the collections a path parameter names a member of. */
const NOUNS: Record<string, string> = { tokens: 'token', 'event-types': 'event type', campaigns: 'campaign', segments: 'segment', webhooks: 'webhook' }

function paramDescription (path: string, name: string): string {
  if (PARAMS[name] !== undefined) return PARAMS[name]
  const segments = path.split('/')
  const collection = segments[segments.indexOf(`{${name}}`) - 1] ?? ''
  return `The ${NOUNS[collection] ?? collection}'s ${name} (1–128 characters of A-Z a-z 0-9 _ . : -).`
}

function operationId (method: string, path: string): string {
  const words = path.split('/').filter(Boolean).map(segment => {
    const param = /^\{(.+)\}$/.exec(segment)
    return param === null ? segment : `by-${param[1]}`
  })
  return method.toLowerCase() + words.join('-').split(/[-.]/).map(word => word.charAt(0).toUpperCase() + word.slice(1)).join('')
}
