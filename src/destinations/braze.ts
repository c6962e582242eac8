// braze: Braze /users/track. POST {apiBaseUrl}/users/track with a Bearer REST API key and
// {attributes, events, purchases}, at most 75 of each a request. People are known by their profile id
// as external_id (a visitor without one by a user alias {alias_name: visitor id, alias_label:
// "beacon_visitor"}). Beacon's events become custom events, purchases become purchases (one per order,
// product_id the order's first item or "order"). Audience membership is an array attribute
// (settings.audienceAttribute, add/remove of the segment) or, per segment in
// settings.subscriptionGroups, a subscription group state. Braze answers 201 with `errors` for the
// objects it refused: recorded as a partial failure. A 429 is retried after X-RateLimit-Reset.

import Type from 'typebox'
import { jsonOf, outcomeOf } from './answers.js'
import type { Prepared, ProviderDefinition, ProviderOutcome } from './provider.js'

export const BRAZE_OBJECTS_MAX = 75

const Settings = Type.Object({
  audienceAttribute: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_]{1,128}$', description: 'The array attribute holding the segments a person is in (default beacon_audiences).' })),
  subscriptionGroups: Type.Optional(Type.Record(Type.String({ pattern: '^[A-Za-z0-9_.:-]{1,128}$' }), Type.String({ minLength: 1, maxLength: 64 }), { maxProperties: 100, description: 'A subscription group id per segment: entering subscribes, leaving unsubscribes.' })),
  currency: Type.Optional(Type.String({ pattern: '^[A-Za-z]{3}$' })),
})
const Credentials = Type.Object({ apiKey: Type.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: false })

export interface BrazeSettings {
  audienceAttribute?: string
  subscriptionGroups?: Record<string, string>
  currency?: string
}

export const braze: ProviderDefinition<BrazeSettings, { apiKey: string }> = {
  type: 'braze',
  label: 'Braze',
  purpose: 'analytics',
  takes: { events: true, audiences: true },
  needsContact: false,
  batchMax: BRAZE_OBJECTS_MAX,
  apiBaseUrl: 'https://rest.iad-01.braze.com',
  settings: Settings,
  credentials: Credentials,
  async send (context, batch) {
    const body = trackBody(batch, context.settings)
    const text = JSON.stringify(body)
    const url = `${context.apiBaseUrl}/users/track`
    const answer = await context.http.call({ method: 'POST', url, headers: { authorization: `Bearer ${context.credentials.apiKey}` }, body: text }, context.timeoutMs)
    const outcome: ProviderOutcome = outcomeOf(answer, `POST ${url} ${text}`, context.nowMs())
    if (outcome.outcome === 'retry' && outcome.retryAfterMs === undefined) {
      const reset = Number(answer.headers['x-ratelimit-reset'])
      if (Number.isFinite(reset) && reset > 0) outcome.retryAfterMs = Math.min(3_600_000, Math.max(0, reset * 1000 - context.nowMs()))
    }
    if (outcome.outcome === 'delivered') {
      const errors = (jsonOf(answer) as { errors?: Array<{ type?: string, input_array?: string, index?: number }> } | null)?.errors ?? []
      if (errors.length > 0) outcome.error = `Braze refused ${errors.length} object(s): ${errors.slice(0, 5).map(e => `${e.input_array ?? '?'}[${e.index ?? '?'}] ${e.type ?? ''}`).join('; ')}`
    }
    return outcome
  },
}

export function trackBody (batch: readonly Prepared[], settings: BrazeSettings): { attributes?: unknown[], events?: unknown[], purchases?: unknown[] } {
  const attributes: Record<string, unknown>[] = []
  const events: unknown[] = []
  const purchases: unknown[] = []
  const audienceAttribute = settings.audienceAttribute ?? 'beacon_audiences'
  for (const { item } of batch) {
    const context = item.context
    const who: Record<string, unknown> = context.profileId !== undefined
      ? { external_id: context.profileId }
      : { user_alias: { alias_name: context.visitorId ?? item.id, alias_label: 'beacon_visitor' } }
    const time = new Date(item.occurredAtMs).toISOString()
    if (context.audience !== undefined) {
      const enter = context.change === 'enter'
      const group = settings.subscriptionGroups?.[context.audience]
      const attribute: Record<string, unknown> = { ...who }
      if (group !== undefined) attribute.subscription_groups = [{ subscription_group_id: group, subscription_state: enter ? 'subscribed' : 'unsubscribed' }]
      else attribute[audienceAttribute] = enter ? { add: [context.audience] } : { remove: [context.audience] }
      attributes.push(attribute)
      continue
    }
    const fields = context.eventFields ?? {}
    if (context.event === 'purchase') {
      const items = Array.isArray(fields.purchasedItems) ? fields.purchasedItems : []
      purchases.push({
        ...who, product_id: items.length > 0 ? String(items[0]) : 'order', currency: (typeof fields.currency === 'string' ? fields.currency : settings.currency ?? 'USD').toUpperCase(),
        price: typeof fields.orderTotal === 'number' ? fields.orderTotal : 0, quantity: 1, time,
        properties: typeof fields.orderId === 'string' ? { order_id: fields.orderId } : {},
      })
      continue
    }
    events.push({ ...who, name: context.event ?? 'event', time, properties: eventProperties(fields) })
  }
  const body: { attributes?: unknown[], events?: unknown[], purchases?: unknown[] } = {}
  if (attributes.length > 0) body.attributes = attributes
  if (events.length > 0) body.events = events
  if (purchases.length > 0) body.purchases = purchases
  return body
}

/** Fields of the request that are not the event's own (who, where from, credentials). */
const NOT_PROPERTIES = new Set(['account', 'event', 'visitorId', 'profileId', 'profileIdSignature', 'token', 'platform', 'device', 'clientIp', 'userAgent'])

/** The event's own fields Braze can take as properties: strings, numbers, booleans. */
function eventProperties (fields: Record<string, unknown>): Record<string, unknown> {
  const properties: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(fields)) {
    if (NOT_PROPERTIES.has(name)) continue
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') properties[name] = value
  }
  return properties
}
