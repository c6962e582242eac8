// meta-capi: Meta Conversions API. POST {apiBaseUrl}/{apiVersion}/{pixelId}/events with the access
// token, a `data` list of at most 1,000 server events. Beacon's events map to Meta's standard events
// (pageView → PageView, productView → ViewContent, purchase → Purchase; other kinds by their own name);
// event_id is the delivery's id (the same on every attempt and across a cluster takeover), or the
// event's own `eventId` field when the site sends one (what its browser pixel sent, for deduplication).
// user_data carries SHA-256 of the normalized email, phone (digits with country code) and external id;
// client IP, user agent, fbp and fbc as they came (Meta asks for them unhashed). docs/destinations.md.

import Type from 'typebox'
import { jsonOf, outcomeOf } from './answers.js'
import type { ProviderAnswer } from './http.js'
import { sha256Hex } from './normalize.js'
import type { Prepared, ProviderDefinition, ProviderOutcome } from './provider.js'

export const META_CAPI_BATCH_MAX = 1000
/** The Graph API version used when the settings name none. */
export const META_API_VERSION = 'v24.0'
export const META_ACTION_SOURCES = ['website', 'app', 'email', 'phone_call', 'chat', 'physical_store', 'system_generated', 'business_messaging', 'other'] as const

/** Meta's throttling codes: 4 (app), 17 (user), 32 (page), 613 (calls within one hour), 80004 (ad account). */
export const META_THROTTLE_CODES: ReadonlySet<number> = new Set([4, 17, 32, 613, 80004])

const Settings = Type.Object({
  pixelId: Type.String({ pattern: '^[0-9]{1,32}$', description: 'The dataset (pixel) id, from Events Manager.' }),
  apiVersion: Type.Optional(Type.String({ pattern: '^v[0-9]{1,3}\\.[0-9]{1,2}$', description: 'Graph API version (default ' + 'v24.0' + ').' })),
  actionSource: Type.Optional(Type.Union(META_ACTION_SOURCES.map(source => Type.Literal(source)), { description: 'action_source of every event (default website).' })),
  testEventCode: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Sends every event to the Test Events tool.' })),
  siteUrl: Type.Optional(Type.String({ maxLength: 2048, pattern: '^https?://', description: 'Joined with an event\'s path as event_source_url.' })),
  currency: Type.Optional(Type.String({ pattern: '^[A-Za-z]{3}$', description: 'Currency of purchases without their own (ISO 4217).' })),
})
const Credentials = Type.Object({ accessToken: Type.String({ minLength: 1, maxLength: 4096 }) }, { additionalProperties: false })

export interface MetaCapiSettings {
  pixelId: string
  apiVersion?: string
  actionSource?: typeof META_ACTION_SOURCES[number]
  testEventCode?: string
  siteUrl?: string
  currency?: string
}

const STANDARD_EVENTS: Readonly<Record<string, string>> = { pageView: 'PageView', productView: 'ViewContent', purchase: 'Purchase' }

export const metaCapi: ProviderDefinition<MetaCapiSettings, { accessToken: string }> = {
  type: 'meta-capi',
  label: 'Meta Conversions API',
  purpose: 'ads',
  takes: { events: true, audiences: false },
  needsContact: false,
  batchMax: META_CAPI_BATCH_MAX,
  apiBaseUrl: 'https://graph.facebook.com',
  settings: Settings,
  credentials: Credentials,
  async send (context, batch, test) {
    const { settings } = context
    const data = batch.map(prepared => serverEvent(prepared, settings))
    // Meta refuses a whole request for one website event without client_user_agent or event_source_url:
    // such events are left out and counted instead.
    const sendable = data.filter(event => event.action_source !== 'website' || (event.event_source_url !== undefined && (event.user_data as Record<string, unknown>).client_user_agent !== undefined))
    const left = data.length - sendable.length
    const note = left === 0 ? undefined : `${left} website event(s) without a user agent or a source URL (Meta requires both) not sent`
    if (sendable.length === 0) return { outcome: 'delivered', error: note, request: '', answer: '' }
    const body: Record<string, unknown> = { data: sendable }
    const testCode = settings.testEventCode ?? (test ? 'TEST_BEACON' : undefined)
    if (testCode !== undefined) body.test_event_code = testCode
    const text = JSON.stringify(body)
    const url = `${context.apiBaseUrl}/${settings.apiVersion ?? META_API_VERSION}/${encodeURIComponent(settings.pixelId)}/events?access_token=${encodeURIComponent(context.credentials.accessToken)}`
    const answer = await context.http.call({ method: 'POST', url, body: text }, context.timeoutMs)
    const outcome = metaOutcome(answer, `POST ${url} ${text}`, context.nowMs())
    if (note !== undefined && outcome.outcome === 'delivered') outcome.error = note
    return outcome
  },
}

/** One event as Meta's server event parameters spell it. */
export function serverEvent ({ item, ids }: Prepared, settings: MetaCapiSettings): Record<string, unknown> {
  const context = item.context
  const fields = context.eventFields ?? {}
  const kind = context.event ?? 'event'
  const userData: Record<string, unknown> = {}
  if (ids.email !== null) userData.em = [sha256Hex(ids.email)]
  if (ids.phone !== null) userData.ph = [sha256Hex(ids.phone)]
  if (ids.externalId !== null) userData.external_id = [sha256Hex(ids.externalId)]
  copyString(fields, 'clientIp', userData, 'client_ip_address')
  copyString(fields, 'userAgent', userData, 'client_user_agent')
  copyString(fields, 'fbp', userData, 'fbp')
  copyString(fields, 'fbc', userData, 'fbc')
  const event: Record<string, unknown> = {
    event_name: STANDARD_EVENTS[kind] ?? kind,
    event_time: Math.floor(item.occurredAtMs / 1000),
    event_id: typeof fields.eventId === 'string' ? fields.eventId : item.messageId ?? item.id,
    action_source: settings.actionSource ?? 'website',
    user_data: userData,
  }
  if (settings.siteUrl !== undefined && typeof fields.path === 'string') event.event_source_url = new URL(fields.path, settings.siteUrl).href
  else if (typeof fields.url === 'string') event.event_source_url = fields.url
  const custom: Record<string, unknown> = {}
  if (kind === 'productView' && typeof fields.sku === 'string') {
    custom.content_ids = [fields.sku]
    custom.content_type = 'product'
    if (typeof fields.price === 'number') custom.value = fields.price
  }
  if (kind === 'purchase') {
    if (typeof fields.orderTotal === 'number') custom.value = fields.orderTotal
    if (typeof fields.orderId === 'string') custom.order_id = fields.orderId
    if (Array.isArray(fields.purchasedItems)) {
      custom.content_ids = fields.purchasedItems
      custom.content_type = 'product'
    }
  }
  const currency = typeof fields.currency === 'string' ? fields.currency : settings.currency
  if (custom.value !== undefined && currency !== undefined) custom.currency = currency.toUpperCase()
  if (Object.keys(custom).length > 0) event.custom_data = custom
  return event
}

function copyString (from: Record<string, unknown>, name: string, to: Record<string, unknown>, as: string): void {
  const value = from[name]
  if (typeof value === 'string' && value !== '') to[as] = value
}

/**
 * Meta answers errors as {error: {message, type, code, error_subcode}}: a throttling code is retried
 * whatever the status (Meta sends them with 400 as well as 429); an expired or invalid token (code 190)
 * is final with a message saying so.
 */
export function metaOutcome (answer: ProviderAnswer, request: string, nowMs: number): ProviderOutcome {
  const error = (jsonOf(answer) as { error?: { message?: unknown, code?: unknown, error_subcode?: unknown } } | null)?.error
  if (answer.status >= 200 && answer.status < 300) return outcomeOf(answer, request, nowMs)
  const code = typeof error?.code === 'number' ? error.code : null
  const message = typeof error?.message === 'string' ? error.message : answer.body.slice(0, 300)
  if (code === 190) return outcomeOf(answer, request, nowMs, `HTTP ${answer.status}: Meta refused the access token (code 190${typeof error?.error_subcode === 'number' ? `, subcode ${error.error_subcode}` : ''}): ${message}; save a new token.`)
  const throttled = code !== null && META_THROTTLE_CODES.has(code)
  return outcomeOf(answer, request, nowMs, `HTTP ${answer.status}: ${code === null ? '' : `code ${code}: `}${message}`, throttled)
}
