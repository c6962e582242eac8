// Trying configuration without changing anything: whether a campaign would be returned for an event
// (and why not), and one test request of a webhook. Neither records anything.

import { randomUUID } from 'node:crypto'
import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Catalogs } from '../catalog/catalogs.js'
import { explainCampaign } from '../matching/index.js'
import type { ActorRuntime } from '../../actors/runtime.js'
import { emptyVisitor, metricsOf, recordBehaviour, type EventBody, type VisitorKind } from '../../actors/visitor.js'
import { allSegments } from '../../actors/entity.js'
import type { ProfileKind } from '../../actors/profile.js'
import type { DeliveryHub } from '../delivery/hub.js'
import type { CompiledWebhook, DeliveryItem } from '../webhooks/index.js'
import * as S from './schemas.js'
import { validator } from '../validator.js'
import { json, type RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'

const validateTest = validator(S.CampaignTest)
const validateEvent = validator(S.EventRequest)

export interface TryDeps {
  catalogs: Catalogs
  runtime: ActorRuntime
  visitors: VisitorKind
  profiles: ProfileKind
  deliveries: DeliveryHub
  clock: Clock
}

/** The visitor of a test delivery's sample (a UUID v4 no site produces: all zeros but the version bits). */
export const SAMPLE_VISITOR = '00000000-0000-4000-8000-000000000000'

export function tryRoutes ({ catalogs, runtime, visitors, profiles, deliveries, clock }: TryDeps): RouteDefinition[] {
  return [
    {
      method: 'post', pattern: '/admin/accounts/:account/campaigns/:id/test', body: true, role: 'editor', audit: false,
      doc: {
        summary: 'Would this campaign be returned for this event?',
        description: 'The event as /campaigns/query takes it (no account or token; visitorId optional: a visitor never seen). ' +
          'The visitor state is the stored visitor\'s (its behaviour plus this event, as the real query records it before matching; a linked profile\'s unified view), or the `attributes` and `segments` given. ' +
          'Each check says why not; the verdict is the real matcher\'s (same compiled pieces). Nothing is recorded: no behaviour, no impression.',
        tag: 'Try',
        body: { schema: S.CampaignTest, example: { event: { platform: 'web', event: 'productView', sku: 'A1', price: 80 }, attributes: { plan: 'pro' }, segments: ['vip'] } },
        ok: json(200, 'The verdict and each check.', R.Explanation), errors: ['account_not_found', 'campaign_not_found', 'unknown_event_type'],
      },
      async handler (request) {
        const account = request.params[0] ?? ''
        const id = request.params[1] ?? ''
        const spec = validateTest(request.body)
        const def = catalogs.campaigns.get(account, id)
        const given = spec.event as Record<string, unknown>
        const event = prefixed(() => validateEvent({ ...given, account, visitorId: given.visitorId ?? SAMPLE_VISITOR })) as EventBody
        const type = catalogs.eventTypes.get(account, event.event)
        if (type === undefined) throw new ApiError('unknown_event_type', `The event type "${event.event}" is not built in and was not defined for this account.`, '/event/event')
        const nowMs = clock.nowMs()
        // The stored visitor (a copy: nothing is written), then this event's behaviour, as the real query records it before matching.
        const state = given.visitorId === undefined ? emptyVisitor() : await runtime.send(visitors, account, event.visitorId, { type: 'snapshot' })
        recordBehaviour(state, event, nowMs)
        // A visitor linked to a profile is matched on the profile's unified view, as the real query does.
        let attributes: Record<string, unknown> = state.attributes
        let segments: readonly string[] = allSegments(state)
        const profileId = event.profileId ?? state.profileId
        if (profileId !== null && (spec.attributes === undefined || spec.segments === undefined)) {
          const { unified } = await runtime.send(profiles, account, profileId, { type: 'snapshot' })
          attributes = { ...state.attributes, ...unified.attributes }
          segments = [...allSegments(state), ...unified.segments]
        }
        const ctx = {
          event,
          attributes: (spec.attributes ?? attributes) as Record<string, unknown>,
          segments: new Set(spec.segments ?? segments),
          visitor: metricsOf(state),
          nowMs,
        }
        return { status: 200, body: explainCampaign(def, ctx, state.impressions[id] ?? null) }
      },
    },
    {
      method: 'post', pattern: '/admin/accounts/:account/webhooks/:id/test', body: false, role: 'editor', audit: false,
      doc: {
        summary: 'Send a test delivery now',
        description: 'One sample request (a sample visitor, the trigger\'s first event kind or segment, `eventFields: {test: true}`) rendered with the webhook\'s template, headers, auth and signature, ' +
          'sent to its target with its timeout. Not stored in the deliveries log, never retried.',
        tag: 'Try',
        ok: json(200, 'What the target answered.', R.TestDelivery), errors: ['account_not_found', 'webhook_not_found'],
      },
      async handler (request) {
        const account = request.params[0] ?? ''
        const webhook = catalogs.webhooks.webhook(account, request.params[1] ?? '')
        const result = await deliveries.sendTest(webhook, sampleItem(account, webhook.trigger, clock.nowMs()))
        const body: { ok: boolean, status: number | null, durationMs: number, error?: string } = {
          ok: result.outcome === 'delivered', status: result.status ?? null, durationMs: Math.round(result.latencyMs),
        }
        if (result.error !== undefined) body.error = result.error
        return { status: 200, body }
      },
    },
  ]
}

/** A sample of what the webhook is sent: its first event kind or segment, a sample visitor, a `test` marker. */
function sampleItem (account: string, trigger: DeliveryHubTrigger, nowMs: number): DeliveryItem {
  const context: DeliveryItem['context'] = { account, visitorId: SAMPLE_VISITOR, eventFields: { test: true }, attributes: {} }
  if (trigger.kind === 'event') context.event = [...trigger.events][0] ?? 'pageView'
  else {
    context.audience = [...trigger.segments][0] ?? 'test'
    context.change = 'enter'
  }
  return { id: `test-${randomUUID()}`, occurredAtMs: nowMs, context }
}

type DeliveryHubTrigger = CompiledWebhook['trigger']

/** Event validation errors point into `event`. */
function prefixed<T> (run: () => T): T {
  try {
    return run()
  } catch (error) {
    if (error instanceof ApiError) for (const item of error.items) if (item.field !== undefined) item.field = '/event' + item.field
    throw error
  }
}
