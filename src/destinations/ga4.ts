// ga4: Google Analytics 4 Measurement Protocol. POST {apiBaseUrl}/mp/collect?measurement_id=…&api_secret=…
// with {client_id, user_id?, timestamp_micros, events: [{name, params}]}: one request per visitor (the
// client id belongs to the request), at most 25 events each. Beacon's events map to GA4's recommended
// events (page_view, view_item, purchase; other kinds by their own name when GA4 allows it). The test
// send goes to the validation server (/debug/mp/collect) and shows its validationMessages. GA4 takes no
// personal data: user_id is the SHA-256 of the profile id, and no email or phone is sent.

import Type from 'typebox'
import { jsonOf, outcomeOf } from './answers.js'
import { normalizeExternalId, sha256Hex } from './normalize.js'
import type { Prepared, ProviderDefinition, ProviderOutcome } from './provider.js'

export const GA4_EVENTS_MAX = 25
const EVENT_NAME = /^[A-Za-z][A-Za-z0-9_]{0,39}$/

const Settings = Type.Object({
  measurementId: Type.String({ pattern: '^G-[A-Z0-9]{4,20}$', description: 'The web stream\'s measurement id (G-…): Admin → Data streams.' }),
  currency: Type.Optional(Type.String({ pattern: '^[A-Za-z]{3}$' })),
})
const Credentials = Type.Object({ apiSecret: Type.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: false })

export interface Ga4Settings {
  measurementId: string
  currency?: string
}

export const ga4: ProviderDefinition<Ga4Settings, { apiSecret: string }> = {
  type: 'ga4',
  label: 'Google Analytics 4 (Measurement Protocol)',
  purpose: 'analytics',
  takes: { events: true, audiences: false },
  needsContact: false,
  batchMax: GA4_EVENTS_MAX,
  apiBaseUrl: 'https://www.google-analytics.com',
  settings: Settings,
  credentials: Credentials,
  async send (context, batch, test) {
    const byClient = new Map<string, Prepared[]>()
    for (const prepared of batch) {
      const client = prepared.item.context.visitorId ?? prepared.item.context.profileId ?? prepared.item.id
      const list = byClient.get(client)
      if (list === undefined) byClient.set(client, [prepared])
      else list.push(prepared)
    }
    let last: ProviderOutcome | null = null
    for (const [clientId, items] of byClient) {
      const profileId = normalizeExternalId(items[0]!.item.context.profileId)
      const body: Record<string, unknown> = {
        client_id: clientId,
        timestamp_micros: items[0]!.item.occurredAtMs * 1000,
        events: items.map(prepared => ga4Event(prepared, context.settings)),
      }
      if (profileId !== null) body.user_id = sha256Hex(profileId)
      const text = JSON.stringify(body)
      const url = `${context.apiBaseUrl}/${test ? 'debug/mp/collect' : 'mp/collect'}?measurement_id=${encodeURIComponent(context.settings.measurementId)}&api_secret=${encodeURIComponent(context.credentials.apiSecret)}`
      const answer = await context.http.call({ method: 'POST', url, body: text }, context.timeoutMs)
      const outcome = outcomeOf(answer, `POST ${url} ${text}`, context.nowMs())
      if (test && outcome.outcome === 'delivered') {
        const messages = (jsonOf(answer) as { validationMessages?: Array<{ fieldPath?: string, description?: string }> } | null)?.validationMessages ?? []
        if (messages.length > 0) {
          return { ...outcome, outcome: 'terminal', error: `GA4 validation: ${messages.map(m => `${m.fieldPath ?? ''} ${m.description ?? ''}`.trim()).join('; ')}` }
        }
      }
      if (outcome.outcome !== 'delivered') return outcome
      last = outcome
    }
    return last!
  },
}

/** One event as GA4's recommended events name it. */
export function ga4Event ({ item }: Prepared, settings: Ga4Settings): { name: string, params: Record<string, unknown> } {
  const context = item.context
  const fields = context.eventFields ?? {}
  const kind = context.event ?? 'event'
  const currency = (typeof fields.currency === 'string' ? fields.currency : settings.currency)?.toUpperCase()
  const params: Record<string, unknown> = { engagement_time_msec: 1 }
  if (typeof fields.path === 'string') params.page_location = fields.path
  if (kind === 'pageView') return { name: 'page_view', params }
  if (kind === 'productView') {
    if (typeof fields.sku === 'string') params.items = [{ item_id: fields.sku, ...(typeof fields.price === 'number' ? { price: fields.price } : {}) }]
    if (typeof fields.price === 'number' && currency !== undefined) Object.assign(params, { value: fields.price, currency })
    return { name: 'view_item', params }
  }
  if (kind === 'purchase') {
    if (typeof fields.orderId === 'string') params.transaction_id = fields.orderId
    if (typeof fields.orderTotal === 'number') params.value = fields.orderTotal
    if (currency !== undefined) params.currency = currency
    if (Array.isArray(fields.purchasedItems)) params.items = fields.purchasedItems.map(id => ({ item_id: String(id) }))
    return { name: 'purchase', params }
  }
  return { name: EVENT_NAME.test(kind) ? kind : kind.replace(/[^A-Za-z0-9_]/g, '_').replace(/^[^A-Za-z]+/, 'e_').slice(0, 40), params }
}
