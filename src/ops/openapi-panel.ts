// The OpenAPI entries of the panel's admin API (issue 19): sign-in, users, audit log, media, reports,
// campaign test, webhook test delivery. Merged into OPERATIONS (openapi.ts); the same coverage test
// holds them to the server.

import Type, { type TSchema } from 'typebox'
import * as S from '../http/schemas.js'
import { AUDIT_PAGE_MAX } from '../audit/audit-log.js'
import { MEDIA_NAME_MAX, MEDIA_PER_ACCOUNT_MAX } from '../media/media-store.js'
import { MEDIA_TYPES } from '../media/signature.js'
import { RANGE_DAYS_MAX } from '../reports/report.js'
import type { Answer, Operation } from './openapi.js'

export const PANEL_TAGS = {
  Panel: 'Panel sign-in (sessions) and users of an account; see docs/api.md for the roles.',
  Audit: 'Who changed what (owners and the admin key).',
  Media: 'Images for campaign content: uploaded by editors, served publicly at a stable URL.',
  Try: 'Trying configuration without changing anything: a campaign against an event, a webhook\'s test delivery.',
  Reports: 'Events, unique visitors, campaign impressions, views and clicks, segment changes and deliveries per hour or day.',
} as const

const json = (status: number, description: string, schema: TSchema): Answer => ({ status, description, schema })
const Iso = Type.String({ format: 'date-time' })

/** Examples the coverage test can use: it creates this owner before it calls the operations. */
export const EXAMPLE_EMAIL = 'owner@example.com'
export const EXAMPLE_PASSWORD = 'correct horse battery staple'

export const User = Type.Object({
  id: Type.String(), account: Type.String(), email: Type.String(), name: Type.String(),
  role: Type.Union([Type.Literal('owner'), Type.Literal('editor'), Type.Literal('viewer')]), createdAt: Iso,
})
const SessionAnswer = Type.Object({ user: User })
const UserList = Type.Object({ users: Type.Array(User) })

const AuditEntry = Type.Object({
  id: Type.String({ description: 'Also the cursor position.' }),
  at: Iso,
  actor: Type.Union([
    Type.Object({ type: Type.Literal('admin') }),
    Type.Object({ type: Type.Literal('user'), id: Type.String(), email: Type.String() }),
  ]),
  action: Type.String({ description: 'create, update, delete, replay, erase, revoke or sign-in.' }),
  entity: Type.String({ description: 'campaign, segment, webhook, event-type, token, user, media, account, profile or visitor.' }),
  entityId: Type.String(),
  summary: Type.String({ description: 'What changed, shortly: `field: before → after` for updates; secrets never appear.' }),
})
const AuditPage = Type.Object({ entries: Type.Array(AuditEntry), next: Type.Union([Type.String(), Type.Null()]) })

const Media = Type.Object({
  id: Type.String(), name: Type.String(), type: Type.Union(MEDIA_TYPES.map(type => Type.Literal(type))),
  bytes: Type.Integer(), url: Type.String({ description: 'The public URL path: /media/<account>/<id>.' }), createdAt: Iso,
})

const CHECKS = ['status', 'schedule', 'trigger', 'platform', 'condition', 'cap'] as const
const Explanation = Type.Object({
  matched: Type.Boolean({ description: 'Whether /campaigns/query would return the campaign for this event and visitor state.' }),
  checks: Type.Array(Type.Object({ check: Type.Union(CHECKS.map(c => Type.Literal(c))), ok: Type.Boolean(), detail: Type.String() })),
})
const TestDelivery = Type.Object({
  ok: Type.Boolean({ description: 'The target answered 2xx.' }),
  status: Type.Union([Type.Integer(), Type.Null()], { description: 'The HTTP status, null when none came (connection error, timeout, refused target).' }),
  durationMs: Type.Integer(),
  error: Type.Optional(Type.String()),
})

const Count = Type.Integer({ minimum: 0 })
const Ms = Type.Union([Type.Number(), Type.Null()])
const ReportRow = Type.Object({
  t: Iso,
  events: Type.Record(Type.String(), Count, { description: 'Events per kind.' }),
  visitors: Type.Integer({ description: 'Unique visitors: a HyperLogLog estimate (±2.3 % standard error).' }),
  campaigns: Type.Record(Type.String(), Type.Object({ impressions: Count, views: Count, clicks: Count })),
  segments: Type.Record(Type.String(), Type.Object({ enter: Count, exit: Count })),
  deliveries: Type.Object({ delivered: Count, failed: Count, dead: Count, p50Ms: Ms, p95Ms: Ms, p99Ms: Ms }),
})
const Report = Type.Object({
  granularity: Type.Union([Type.Literal('hour'), Type.Literal('day')]),
  from: Iso, to: Iso,
  lagMs: Type.Integer({ description: 'How late the numbers may be: each node folds its counts into the store this often (BEACON_REPORT_FOLD_MS).' }),
  rows: Type.Array(ReportRow),
})

export const PANEL_OPERATIONS: Readonly<Record<string, Operation>> = {
  'POST /admin/session': {
    summary: 'Sign in to the panel',
    description: 'Sets the `beacon_session` cookie (HttpOnly, SameSite=Strict, Path=/, Max-Age; Secure behind https). ' +
      'A wrong email and a wrong password get the same 401. Failed attempts are limited per email and per client address (429, Retry-After).',
    tag: 'Panel', auth: 'none',
    body: { schema: S.SignIn, example: { email: EXAMPLE_EMAIL, password: EXAMPLE_PASSWORD } },
    ok: json(200, 'Signed in; the cookie is set.', SessionAnswer),
    errors: ['invalid_credentials', 'rate_limited', 'csrf_refused'],
  },
  'GET /admin/session': {
    summary: 'Who is signed in', tag: 'Panel', auth: 'none',
    ok: json(200, 'The signed-in user.', SessionAnswer), errors: ['admin_unauthorized'],
  },
  'DELETE /admin/session': {
    summary: 'Sign out', description: 'The session ends on the server at once; the cookie is cleared.', tag: 'Panel', auth: 'none',
    ok: { status: 204, description: 'Signed out (also when no session was given).' }, errors: ['csrf_refused'],
  },
  'GET /admin/accounts/{account}/users': {
    summary: 'List the account\'s panel users', description: 'Role: owner.', tag: 'Panel', auth: 'admin',
    ok: json(200, 'The users (never their passwords).', UserList), errors: ['account_not_found'],
  },
  'POST /admin/accounts/{account}/users': {
    summary: 'Add a panel user', description: 'Role: owner. Emails are unique across the instance.', tag: 'Panel', auth: 'admin',
    body: { schema: S.UserCreate, example: { email: 'new@example.com', name: 'New Person', password: 'a long enough password', role: 'editor' } },
    ok: json(201, 'The user.', User), errors: ['account_not_found', 'conflict'],
  },
  'PATCH /admin/accounts/{account}/users/{id}': {
    summary: 'Rename a user, change their role or password', description: 'Role: owner. An account keeps at least one owner.', tag: 'Panel', auth: 'admin',
    body: { schema: S.UserPatch, example: { role: 'viewer' } },
    ok: json(200, 'The user.', User), errors: ['account_not_found', 'user_not_found', 'conflict'],
  },
  'DELETE /admin/accounts/{account}/users/{id}': {
    summary: 'Remove a user', description: 'Role: owner. Their sessions end at once. An account keeps at least one owner.', tag: 'Panel', auth: 'admin',
    ok: { status: 204, description: 'Removed.' }, errors: ['account_not_found', 'user_not_found', 'conflict'],
  },
  'GET /admin/accounts/{account}/audit': {
    summary: 'The audit log, newest first', description: 'Role: owner. One entry per change made through the admin API.', tag: 'Audit', auth: 'admin',
    query: [
      { name: 'limit', description: `Page size (default 50, at most ${AUDIT_PAGE_MAX}).`, schema: Type.Integer({ minimum: 1, maximum: AUDIT_PAGE_MAX }) },
      { name: 'cursor', description: 'The `next` of the previous page.', schema: Type.String() },
    ],
    ok: json(200, 'A page of entries.', AuditPage), errors: ['account_not_found', 'invalid_field'],
  },
  'POST /admin/accounts/{account}/media': {
    summary: 'Upload an image',
    description: 'Role: editor. The body is the image itself (any Content-Type): PNG, JPEG, GIF or WebP, decided by its bytes; ' +
      `SVG and anything else get 415. At most BEACON_MEDIA_MAX_BYTES (2 MiB by default) and ${MEDIA_PER_ACCOUNT_MAX} images per account.`,
    tag: 'Media', auth: 'admin',
    query: [{ name: 'name', description: `The file name shown in the panel (1 to ${MEDIA_NAME_MAX} characters, no slashes; default "upload").`, schema: Type.String() }],
    body: { schema: Type.String({ contentMediaType: 'application/octet-stream', description: 'The image bytes.' }), example: {}, raw: 'application/octet-stream' },
    ok: json(201, 'The stored image.', Media), errors: ['account_not_found', 'media_type_unsupported', 'invalid_field', 'conflict'],
  },
  'GET /admin/accounts/{account}/media': {
    summary: 'List the account\'s images', description: 'Role: viewer.', tag: 'Media', auth: 'admin',
    ok: json(200, 'The images (without their bytes).', Type.Object({ media: Type.Array(Media) })), errors: ['account_not_found'],
  },
  'DELETE /admin/accounts/{account}/media/{id}': {
    summary: 'Delete an image', description: 'Role: editor. Its public URL answers 404 from then on.', tag: 'Media', auth: 'admin',
    ok: { status: 204, description: 'Deleted.' }, errors: ['account_not_found', 'media_not_found'],
  },
  'POST /admin/accounts/{account}/campaigns/{id}/test': {
    summary: 'Would this campaign be returned for this event?',
    description: 'Role: editor. The event as /campaigns/query takes it (no account or token; visitorId optional: a visitor never seen). ' +
      'The visitor state is the stored visitor\'s (its behaviour plus this event, as the real query records it before matching; a linked profile\'s unified view), or the `attributes` and `segments` given. ' +
      'Each check says why not; the verdict is the real matcher\'s (same compiled pieces). Nothing is recorded: no behaviour, no impression.',
    tag: 'Try', auth: 'admin',
    body: { schema: S.CampaignTest, example: { event: { platform: 'web', event: 'productView', sku: 'A1', price: 80 }, attributes: { plan: 'pro' }, segments: ['vip'] } },
    ok: json(200, 'The verdict and each check.', Explanation), errors: ['account_not_found', 'campaign_not_found', 'unknown_event_type'],
  },
  'POST /admin/accounts/{account}/webhooks/{id}/test': {
    summary: 'Send a test delivery now',
    description: 'Role: editor. One sample request (a sample visitor, the trigger\'s first event kind or segment, `eventFields: {test: true}`) rendered with the webhook\'s template, headers, auth and signature, ' +
      'sent to its target with its timeout. Not stored in the deliveries log, never retried.',
    tag: 'Try', auth: 'admin',
    ok: json(200, 'What the target answered.', TestDelivery), errors: ['account_not_found', 'webhook_not_found'],
  },
  'GET /admin/accounts/{account}/reports': {
    summary: 'Report per hour or day',
    description: `Role: viewer. One row per bucket of [from, to), empty ones included; hour ranges up to ${RANGE_DAYS_MAX.hour} days, day ranges up to ${RANGE_DAYS_MAX.day}. ` +
      'Buckets are UTC and by arrival time. Impressions: campaigns /campaigns/query answered; views and clicks: events of the kinds campaignView and campaignClick with their campaignId. ' +
      '`format=csv` answers text/csv in long format: `t,kind,key,value`.',
    tag: 'Reports', auth: 'admin',
    query: [
      { name: 'from', description: 'ISO-8601 start (default: to minus one day for hour, 30 days for day).', schema: Type.String() },
      { name: 'to', description: 'ISO-8601 end, exclusive (default: now).', schema: Type.String() },
      { name: 'granularity', description: 'hour or day (default day).', schema: Type.Union([Type.Literal('hour'), Type.Literal('day')]) },
      { name: 'format', description: 'json (default) or csv.', schema: Type.Union([Type.Literal('json'), Type.Literal('csv')]) },
    ],
    ok: json(200, 'The rows (or CSV with format=csv).', Report), errors: ['account_not_found', 'invalid_field'],
  },
  'GET /media/{account}/{id}': {
    summary: 'An uploaded image (public)',
    description: 'Cache-Control: public, max-age=31536000, immutable; an ETag (304 on If-None-Match); X-Content-Type-Options: nosniff; ' +
      'Content-Security-Policy: default-src \'none\'; img-src \'self\'.',
    tag: 'Media', auth: 'none',
    ok: { status: 200, description: 'The image, with its stored type.', schema: Type.String({ description: 'The bytes.' }), contentType: 'image/png' },
    also: [{ status: 304, description: 'Not modified (If-None-Match held the ETag).' }],
    errors: ['media_not_found'],
  },
}
