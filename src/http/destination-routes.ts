// The admin API of native destinations (src/destinations): configuration (credentials write-only),
// the deliveries log and replay (the webhook machinery's, under the key `~<id>`), the recent exchanges
// with the provider (request and answer, masked), and a test event. Roles as for webhooks: viewers
// read, editors change.

import { randomBytes } from 'node:crypto'
import Type, { type TSchema } from 'typebox'
import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Catalogs } from '../catalog/catalogs.js'
import { destinationKey, type CompiledDestination } from '../destinations/compile.js'
import { DestinationBodySchema, DestinationPatchSchema, destinationView, settingsSchemaOf } from '../destinations/config.js'
import { PROVIDERS, PROVIDER_TYPES } from '../destinations/providers.js'
import type { DeliveryHub } from '../delivery/hub.js'
import { CLUSTER_CURSOR_LENGTH_MAX, LIST_PAGE_MAX } from '../delivery/limits.js'
import { DELIVERY_STATUSES, type DeliveryRecord, type DeliveryStatus } from '../delivery/record.js'
import type { DeliveryItem } from '../webhooks/types.js'
import { NAME_PATTERN } from '../patterns.js'
import { validator } from '../validator.js'
import { deliveryView } from './admin-views.js'
import { pageRequest, wholeNumber, type ClusterDeliveriesLog } from './admin-routes.js'
import * as S from './schemas.js'
import * as R from './reply-schemas.js'
import type { Handler, Reply, Request, Route, RouteRole } from './server.js'
import { json, type RouteDefinition, type RouteDoc } from './route.js'

export interface DestinationRouteDeps {
  catalogs: Catalogs
  clock: Clock
  deliveries: DeliveryHub
  clusterDeliveries?: ClusterDeliveriesLog | null
}

const NAME = new RegExp(NAME_PATTERN)
const validateReplay = validator(S.WebhookReplay)
const TestBody = Type.Object({
  event: Type.Optional(Type.String({ pattern: NAME_PATTERN, description: 'The event kind of the test event (default: the first the destination takes, or purchase).' })),
  audience: Type.Optional(Type.String({ pattern: NAME_PATTERN, description: 'Audience types: the segment of the test add (default: the first it takes).' })),
  attributes: Type.Optional(Type.Record(Type.String({ pattern: NAME_PATTERN }), Type.Unknown(), { maxProperties: 50, description: 'The test person\'s attributes (default email test@example.com).' })),
}, { additionalProperties: false })
const validateTest = validator(TestBody)

const DestinationAnswer = Type.Object({
  id: Type.String(), ...DestinationBodySchema.properties,
  credentialsSet: Type.Array(Type.String(), { description: 'Names of the credentials saved (their values are never shown).' }),
  health: Type.Optional(Type.Object({}, { additionalProperties: true })),
}, { description: 'A destination: credentials never shown.' })
const Exchange = Type.Object({
  at: Type.String(), items: Type.Integer(), outcome: Type.String(), status: Type.Union([Type.Integer(), Type.Null()]),
  request: Type.String(), answer: Type.String(), error: Type.Union([Type.String(), Type.Null()]), test: Type.Boolean(),
})
const EXAMPLE = {
  type: 'meta-capi', name: 'Purchases to Meta', enabled: true, events: ['purchase'],
  credentials: { accessToken: 'EAAB…' }, settings: { pixelId: '1234567890', apiBaseUrl: 'https://capi-proxy.example.com' },
}

export function destinationRoutes ({ catalogs, clock, deliveries, clusterDeliveries = null }: DestinationRouteDeps): RouteDefinition[] {
  const route = (method: Route['method'], pattern: string, role: RouteRole, doc: RouteDoc, handler: Handler): RouteDefinition =>
    ({ method, pattern, body: method === 'post' || method === 'put' || method === 'patch', role, doc, handler })
  const ok = (body: unknown, status = 200): Reply => ({ status, body })
  const account = (request: Request): string => (request.params[0] ?? '').toLowerCase()
  const id = (request: Request): string => {
    const name = request.params[1] ?? ''
    if (!NAME.test(name)) throw new ApiError('invalid_field', 'A destination id is 1 to 128 characters of A-Z a-z 0-9 _ . : -', '/id')
    return name
  }
  const view = (destination: CompiledDestination): Record<string, unknown> => ({ id: destination.id, ...destinationView(destination.config), health: healthOf(destination) })
  const path = '/admin/accounts/:account/destinations'

  return [
    route('get', `${path}-types`, 'viewer', {
      summary: 'List destination types', tag: 'Destinations',
      description: 'Each type with its settings and credentials (JSON Schema), its batch limit and what it takes: what the panel builds its forms from.',
      ok: json(200, 'The types.', Type.Object({ types: Type.Array(Type.Object({}, { additionalProperties: true })) })), errors: ['account_not_found'],
    }, request => {
      catalogs.accounts.get(account(request))
      return ok({
        types: PROVIDER_TYPES.map(type => {
          const provider = PROVIDERS.get(type)!
          return { type, label: provider.label, purpose: provider.purpose, takes: provider.takes, batchMax: provider.batchMax, apiBaseUrl: provider.apiBaseUrl, settings: settingsSchemaOf(type), credentials: provider.credentials }
        }),
      })
    }),
    route('get', path, 'viewer', {
      summary: 'List destinations', tag: 'Destinations',
      ok: json(200, 'The account\'s destinations with their health; credentials never shown.', Type.Object({ destinations: Type.Array(DestinationAnswer), next: R.Next })),
      errors: ['invalid_field', 'account_not_found'],
    }, request => {
      const { items, next } = catalogs.destinations.list(account(request), pageRequest(request))
      return ok({ destinations: items.map(view), next })
    }),
    route('post', path, 'editor', {
      summary: 'Create a destination',
      description: 'Its id is `id` of the body, or made up. Settings are checked per type (a missing one is a 400 naming it); `settings.apiBaseUrl` follows the webhook SSRF rules. Credentials are never shown again.',
      tag: 'Destinations',
      body: { schema: Type.Object({ id: Type.Optional(Type.String({ pattern: NAME_PATTERN })), ...DestinationBodySchema.properties }), example: { id: 'meta-2', ...EXAMPLE } },
      ok: json(201, 'The destination.', DestinationAnswer), errors: ['account_not_found', 'conflict'],
    }, async request => {
      const { id: given, ...body } = (request.body ?? {}) as Record<string, unknown>
      const newId = typeof given === 'string' && NAME.test(given) ? given : 'd-' + randomBytes(4).toString('hex')
      if (given !== undefined && newId !== given) throw new ApiError('invalid_field', 'id is 1 to 128 characters of A-Z a-z 0-9 _ . : -', '/id')
      if (exists(catalogs, account(request), newId)) {
        throw new ApiError('conflict', `A destination ${newId} exists; PUT or PATCH it.`, '/id')
      }
      return ok(view(await catalogs.destinations.put(account(request), newId, body)), 201)
    }),
    route('put', `${path}/:id`, 'editor', {
      summary: 'Create or replace a destination', tag: 'Destinations',
      description: 'Credentials omitted keep the saved ones while `settings.apiBaseUrl` keeps its origin; a new origin needs them again (400 naming them).',
      body: { schema: DestinationBodySchema, example: EXAMPLE },
      ok: json(200, 'The destination.', DestinationAnswer), errors: ['account_not_found', 'conflict'],
    }, async request => ok(view(await catalogs.destinations.put(account(request), id(request), request.body)))),
    route('patch', `${path}/:id`, 'editor', {
      summary: 'Change some fields of a destination', tag: 'Destinations',
      description: 'Fields given replace the saved ones; `settings` and `credentials` merge into the saved ones (a credential set to "" is removed).',
      body: { schema: DestinationPatchSchema, example: { enabled: false } },
      ok: json(200, 'The destination.', DestinationAnswer), errors: ['account_not_found', 'destination_not_found', 'conflict'],
    }, async request => ok(view(await catalogs.destinations.put(account(request), id(request), request.body, true)))),
    route('get', `${path}/:id`, 'viewer', {
      summary: 'Read a destination', tag: 'Destinations',
      ok: json(200, 'The destination.', DestinationAnswer), errors: ['account_not_found', 'destination_not_found'],
    }, request => ok(view(catalogs.destinations.destination(account(request), id(request))))),
    route('del', `${path}/:id`, 'editor', {
      summary: 'Delete a destination', tag: 'Destinations',
      ok: json(200, 'Deleted.', R.IdDeleted), errors: ['account_not_found', 'destination_not_found'],
    }, async request => {
      await catalogs.destinations.delete(account(request), id(request))
      return ok({ id: id(request), deleted: true })
    }),
    route('get', `${path}/:id/exchanges`, 'viewer', {
      summary: 'Recent requests to the provider', tag: 'Destinations',
      description: 'The last 50 exchanges of this node with the provider, newest first: request and answer, with credentials, email addresses and phone numbers masked.',
      ok: json(200, 'The exchanges.', Type.Object({ exchanges: Type.Array(Exchange) })), errors: ['account_not_found', 'destination_not_found'],
    }, request => {
      const destination = catalogs.destinations.destination(account(request), id(request))
      return ok({ exchanges: destination.exchanges.list().map(({ atMs, ...rest }) => ({ at: new Date(atMs).toISOString(), ...rest })) })
    }),
    route('post', `${path}/:id/test`, 'editor', {
      summary: 'Send a test event', tag: 'Destinations',
      description: 'One request to the provider now (its test mode where it has one: Meta\'s test_event_code, GA4\'s validation endpoint), recorded in the exchanges only; the answer shows the provider\'s.',
      body: { schema: TestBody, example: { attributes: { email: 'test@example.com' } } },
      ok: json(200, 'The provider\'s answer.', Type.Object({ outcome: Type.String(), status: Type.Union([Type.Integer(), Type.Null()]), error: Type.Union([Type.String(), Type.Null()]), exchange: Type.Union([Exchange, Type.Null()]) })),
      errors: ['account_not_found', 'destination_not_found'],
    }, async request => {
      const destination = catalogs.destinations.destination(account(request), id(request))
      const result = await destination.sendTest([testItem(destination, validateTest(request.body ?? {}), clock.nowMs())])
      const exchange = result.exchange === null ? null : (({ atMs, ...rest }) => ({ at: new Date(atMs).toISOString(), ...rest }))(result.exchange)
      return ok({ outcome: result.outcome, status: result.status ?? null, error: result.error ?? null, exchange })
    }),
    route('get', `${path}/:id/deliveries`, 'viewer', {
      summary: 'List a destination\'s deliveries', tag: 'Destinations',
      description: 'As a webhook\'s (docs/webhooks.md): oldest first, with every attempt; the person\'s email and phone attributes masked.',
      query: [
        { name: 'status', description: 'Only deliveries in this status.', schema: { type: 'string', enum: [...DELIVERY_STATUSES] } as TSchema },
        { name: 'after', description: 'The `next` of the previous page.', schema: { anyOf: [{ type: 'integer', minimum: 0 }, { type: 'string', pattern: '^[A-Za-z0-9_-]*$', maxLength: CLUSTER_CURSOR_LENGTH_MAX }] } as TSchema },
        { name: 'limit', description: `Page size (default 100, at most ${LIST_PAGE_MAX}).`, schema: { type: 'integer', minimum: 1, maximum: LIST_PAGE_MAX } as TSchema },
      ],
      ok: json(200, 'A page of deliveries.', R.DeliveryPage), errors: ['invalid_field', 'account_not_found', 'destination_not_found', 'unavailable'],
    }, async request => {
      const destination = catalogs.destinations.destination(account(request), id(request))
      const query = new URLSearchParams(request.query)
      const status = query.get('status')
      if (status !== null && !(DELIVERY_STATUSES as readonly string[]).includes(status)) throw new ApiError('invalid_field', `status must be one of ${DELIVERY_STATUSES.join(', ')}.`, '/status')
      const limit = wholeNumber(query.get('limit'), 1, LIST_PAGE_MAX, 'limit', 100)
      const key = destinationKey(destination.id)
      const masked = (record: DeliveryRecord): Record<string, unknown> => deliveryView(maskPerson(record, destination))
      if (clusterDeliveries !== null) {
        const page = await clusterDeliveries.list(destination.account, key, status as DeliveryStatus | null, query.get('after') ?? '', limit)
        return ok({ deliveries: page.deliveries.map(masked), next: page.next })
      }
      const page = await deliveries.list(destination.account, key, status as DeliveryStatus | null, wholeNumber(query.get('after'), 0, Number.MAX_SAFE_INTEGER, 'after'), limit)
      return ok({ deliveries: page.deliveries.map(masked), next: page.next })
    }),
    route('post', `${path}/:id/replay`, 'editor', {
      summary: 'Queue a destination\'s deliveries again', tag: 'Destinations',
      description: 'As a webhook\'s replay: the deliveries named, or the dead ones that occurred in [from, to), from attempt 1.',
      body: { schema: S.WebhookReplay, example: { from: '2026-01-01T00:00:00Z' } },
      ok: json(200, 'How many were queued again.', R.Replayed), errors: ['account_not_found', 'destination_not_found', 'unavailable'],
    }, async request => {
      const destination = catalogs.destinations.destination(account(request), id(request))
      const { deliveryIds, from, to } = validateReplay(request.body)
      const fromMs = from === undefined ? 0 : Date.parse(from)
      const toMs = to === undefined ? Number.MAX_SAFE_INTEGER : Date.parse(to)
      if (Number.isNaN(fromMs)) throw new ApiError('invalid_field', 'from must be an ISO-8601 time.', '/from')
      if (Number.isNaN(toMs)) throw new ApiError('invalid_field', 'to must be an ISO-8601 time.', '/to')
      const key = destinationKey(destination.id)
      const log = clusterDeliveries ?? deliveries
      return ok({ replayed: await log.replay(destination.account, key, deliveryIds ?? null, fromMs, toMs) })
    }),
  ]
}

function exists (catalogs: Catalogs, account: string, id: string): boolean {
  try {
    catalogs.destinations.destination(account, id)
    return true
  } catch (error) {
    if (error instanceof ApiError && error.items[0]?.code === 'destination_not_found') return false
    throw error
  }
}

/** ok: nothing failed last; failing: the last batch failed; idle: nothing sent since start. */
function healthOf (destination: CompiledDestination): Record<string, unknown> {
  const c = destination.counters
  const state = c.lastAtMs === null ? 'idle' : c.lastStatus !== null && c.lastStatus >= 200 && c.lastStatus < 300 ? 'ok' : 'failing'
  return { state, ...c, lastAt: c.lastAtMs === null ? null : new Date(c.lastAtMs).toISOString(), lastAtMs: undefined }
}

/** The person's email and phone attributes are not shown in the deliveries log. */
function maskPerson (record: DeliveryRecord, destination: CompiledDestination): DeliveryRecord {
  const attributes = record.item.context.attributes
  if (attributes === undefined) return record
  const masked = { ...attributes }
  for (const name of [destination.shared.emailAttribute, destination.shared.phoneAttribute]) if (masked[name] !== undefined) masked[name] = '***'
  return { ...record, item: { ...record.item, context: { ...record.item.context, attributes: masked } } }
}

/** The test event: a made-up person (the given attributes, or test@example.com) doing the first thing the destination takes. */
function testItem (destination: CompiledDestination, body: { event?: string, audience?: string, attributes?: Record<string, unknown> }, nowMs: number): DeliveryItem {
  const attributes = body.attributes ?? { [destination.shared.emailAttribute]: 'test@example.com' }
  if (attributes[destination.shared.consentAttribute] === undefined) attributes[destination.shared.consentAttribute] = [destination.config.purpose]
  const id = `test-${nowMs}`
  const base = { account: destination.account, profileId: 'beacon-test', visitorId: '00000000-0000-4000-8000-000000000000', attributes }
  const audience = body.audience ?? destination.config.audiences[0]
  if (!destination.provider.takes.events || (body.event === undefined && destination.config.events.length === 0 && audience !== undefined)) {
    return { id, occurredAtMs: nowMs, context: { ...base, audience: audience ?? 'test', change: 'enter' } }
  }
  const event = body.event ?? destination.config.events[0] ?? 'purchase'
  return { id, occurredAtMs: nowMs, context: { ...base, event, eventFields: { orderId: 'test-order', orderTotal: 1, currency: 'EUR', userAgent: 'Beacon test', path: '/', url: 'https://example.com/beacon-test' } } }
}
