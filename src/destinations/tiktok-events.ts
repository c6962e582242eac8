// tiktok-events: TikTok Events API (web events). POST {apiBaseUrl}/open_api/v1.3/event/track/ with the
// Access-Token header and {event_source: "web", event_source_id: pixel code, test_event_code?, data:
// [events]}; at most 1,000 events a request. Identifiers are SHA-256 of the normalized email, phone
// (E.164 with its "+") and external id. TikTok answers HTTP 200 with a code: 0 is success; 40100 (too
// many requests) and 5xxxx are retried, any other code is final.

import Type from 'typebox'
import { jsonOf, outcomeOf } from './answers.js'
import { sha256Hex } from './normalize.js'
import type { Prepared, ProviderDefinition, ProviderOutcome } from './provider.js'

export const TIKTOK_BATCH_MAX = 1000
const STANDARD_EVENTS: Readonly<Record<string, string>> = { pageView: 'Pageview', productView: 'ViewContent', purchase: 'CompletePayment' }

const Settings = Type.Object({
  pixelCode: Type.String({ pattern: '^[A-Z0-9]{10,40}$', description: 'The pixel code (Events Manager → Web events → the pixel).' }),
  testEventCode: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  currency: Type.Optional(Type.String({ pattern: '^[A-Za-z]{3}$' })),
  siteUrl: Type.Optional(Type.String({ pattern: '^https?://', maxLength: 2048 })),
})
const Credentials = Type.Object({ accessToken: Type.String({ minLength: 1, maxLength: 4096 }) }, { additionalProperties: false })

export interface TiktokSettings {
  pixelCode: string
  testEventCode?: string
  currency?: string
  siteUrl?: string
}

export const tiktokEvents: ProviderDefinition<TiktokSettings, { accessToken: string }> = {
  type: 'tiktok-events',
  label: 'TikTok Events API',
  purpose: 'ads',
  takes: { events: true, audiences: false },
  needsContact: false,
  batchMax: TIKTOK_BATCH_MAX,
  apiBaseUrl: 'https://business-api.tiktok.com',
  settings: Settings,
  credentials: Credentials,
  async send (context, batch, test) {
    const body: Record<string, unknown> = { event_source: 'web', event_source_id: context.settings.pixelCode, data: batch.map(prepared => tiktokEvent(prepared, context.settings)) }
    const testCode = context.settings.testEventCode ?? (test ? 'TEST_BEACON' : undefined)
    if (testCode !== undefined) body.test_event_code = testCode
    const text = JSON.stringify(body)
    const url = `${context.apiBaseUrl}/open_api/v1.3/event/track/`
    const answer = await context.http.call({ method: 'POST', url, headers: { 'access-token': context.credentials.accessToken }, body: text }, context.timeoutMs)
    return tiktokOutcome(answer, `POST ${url} ${text}`, context.nowMs())
  },
}

export function tiktokEvent ({ item, ids }: Prepared, settings: TiktokSettings): Record<string, unknown> {
  const context = item.context
  const fields = context.eventFields ?? {}
  const kind = context.event ?? 'event'
  const user: Record<string, unknown> = {}
  if (ids.email !== null) user.email = sha256Hex(ids.email)
  if (ids.phone !== null) user.phone = sha256Hex('+' + ids.phone)
  if (ids.externalId !== null) user.external_id = sha256Hex(ids.externalId)
  if (typeof fields.clientIp === 'string') user.ip = fields.clientIp
  if (typeof fields.userAgent === 'string') user.user_agent = fields.userAgent
  if (typeof fields.ttp === 'string') user.ttp = fields.ttp
  if (typeof fields.ttclid === 'string') user.ttclid = fields.ttclid
  const event: Record<string, unknown> = {
    event: STANDARD_EVENTS[kind] ?? kind,
    event_time: Math.floor(item.occurredAtMs / 1000),
    event_id: typeof fields.eventId === 'string' ? fields.eventId : item.messageId ?? item.id,
    user,
  }
  if (typeof fields.path === 'string' && settings.siteUrl !== undefined) event.page = { url: new URL(fields.path, settings.siteUrl).href }
  const properties: Record<string, unknown> = {}
  const currency = (typeof fields.currency === 'string' ? fields.currency : settings.currency)?.toUpperCase()
  if (kind === 'productView' && typeof fields.sku === 'string') {
    properties.content_type = 'product'
    properties.contents = [{ content_id: fields.sku, ...(typeof fields.price === 'number' ? { price: fields.price } : {}) }]
    if (typeof fields.price === 'number') properties.value = fields.price
  }
  if (kind === 'purchase') {
    if (typeof fields.orderTotal === 'number') properties.value = fields.orderTotal
    if (typeof fields.orderId === 'string') properties.order_id = fields.orderId
    if (Array.isArray(fields.purchasedItems)) {
      properties.content_type = 'product'
      properties.contents = fields.purchasedItems.map(id => ({ content_id: String(id) }))
    }
  }
  if (properties.value !== undefined && currency !== undefined) properties.currency = currency
  if (Object.keys(properties).length > 0) event.properties = properties
  return event
}

/** TikTok's code decides, whatever the HTTP status: 0 delivered, 40100 and 5xxxx retried, others final. */
export function tiktokOutcome (answer: Parameters<typeof outcomeOf>[0], request: string, nowMs: number): ProviderOutcome {
  if (answer.status < 200 || answer.status >= 300) return outcomeOf(answer, request, nowMs)
  const body = jsonOf(answer) as { code?: unknown, message?: unknown } | null
  const code = typeof body?.code === 'number' ? body.code : null
  if (code === 0) return outcomeOf(answer, request, nowMs)
  const message = `TikTok code ${code ?? '?'}: ${typeof body?.message === 'string' ? body.message : answer.body.slice(0, 300)}`
  const retry = code === null || code === 40100 || code >= 50000
  return { ...outcomeOf(answer, request, nowMs, message, true), outcome: retry ? 'retry' : 'terminal' }
}
