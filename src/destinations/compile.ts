// compileDestination: a validated destination turned, once when it is saved, into what the webhook
// delivery machinery carries (a CompiledWebhook with a NativeDelivery: the relay selects its rows, the
// queue and the worker batch, retry and dead-letter them, the deliveries log lists them) plus what the
// admin API reads of it (its configuration, its recent exchanges, its counters, a test send).
//
// Per batch, before the provider maps it: items whose person has not consented to the destination's
// purpose (when it or its account requires consent) and, for audience types, people with no email or phone are
// skipped and counted; the rest go in one request of at most the provider's limit.

import { performance } from 'node:perf_hooks'
import type { Clock } from '../clock.js'
import { batchIdOf } from '../webhooks/batch-id.js'
import type { CompiledWebhook } from '../webhooks/compile.js'
import { compileTemplate } from '../webhooks/template.js'
import type { DeliveryContext, DeliveryItem, NativeDelivery, SendResult } from '../webhooks/types.js'
import { literalRefusal } from '../webhooks/ssrf.js'
import { sharedSettings, type DestinationConfig, type SharedSettingValues } from './config.js'
import { Exchanges, type Exchange } from './exchanges.js'
import { HttpFailure, type ProviderHttp } from './http.js'
import { hasContact, identifiersOf } from './identifiers.js'
import { DESTINATION_LIMITS } from './limits.js'
import type { Prepared, ProviderContext, ProviderDefinition, ProviderOutcome } from './provider.js'
import { PROVIDERS } from './providers.js'

/** Destinations ride the webhook machinery under this key: `~<id>` is never a webhook id (names hold no `~`). */
export const DESTINATION_KEY_PREFIX = '~'

export function destinationKey (id: string): string {
  return DESTINATION_KEY_PREFIX + id
}

export function isDestinationKey (webhookId: string): boolean {
  return webhookId.startsWith(DESTINATION_KEY_PREFIX)
}

/** Counters of one destination, since this process started. */
export interface DestinationCounters {
  sent: number
  delivered: number
  failed: number
  skippedNoIdentifier: number
  skippedNoConsent: number
  partialFailures: number
  lastStatus: number | null
  lastError: string | null
  lastAtMs: number | null
}

/** Told of every batch sent (metrics per destination). */
export type DestinationObserver = (destination: CompiledDestination, outcome: SendResult['outcome'] | 'skipped', items: number) => void

export interface CompileDeps {
  http: ProviderHttp
  clock: Clock
  observe?: DestinationObserver | null
  /** Whether the account requires consent of every destination (its `requireConsent` setting), read per batch. */
  accountRequiresConsent?: (account: string) => boolean
}

export interface CompiledDestination {
  readonly id: string
  readonly account: string
  readonly config: DestinationConfig
  readonly provider: ProviderDefinition<never, never>
  readonly shared: SharedSettingValues
  /** What the delivery machinery carries. */
  readonly webhook: CompiledWebhook
  readonly counters: DestinationCounters
  readonly exchanges: Exchanges
  /** One request now with these items (the admin's test event), recorded in the exchanges only. */
  sendTest (items: DeliveryItem[]): Promise<SendResult & { exchange: Exchange | null }>
}

export function compileDestination (id: string, account: string, config: DestinationConfig, deps: CompileDeps): CompiledDestination {
  const provider = PROVIDERS.get(config.type)!
  const shared = sharedSettings(config, provider)
  const events = new Set(config.events)
  const audiences = new Set(config.audiences)
  const state: Record<string, unknown> = {}
  const context: ProviderContext<never, never> = {
    id, account, settings: config.settings as never, credentials: config.credentials as never, apiBaseUrl: shared.apiBaseUrl,
    http: deps.http, timeoutMs: shared.timeoutMs, nowMs: () => deps.clock.nowMs(), state,
  }
  const counters: DestinationCounters = { sent: 0, delivered: 0, failed: 0, skippedNoIdentifier: 0, skippedNoConsent: 0, partialFailures: 0, lastStatus: null, lastError: null, lastAtMs: null }
  const exchanges = new Exchanges(DESTINATION_LIMITS.exchangesKept)
  const observe = deps.observe ?? null
  const accountRequiresConsent = deps.accountRequiresConsent ?? noConsentRequired
  let destination: CompiledDestination | null = null

  async function attempt (items: readonly DeliveryItem[], test: boolean): Promise<SendResult & { exchange: Exchange | null }> {
    const atMs = deps.clock.nowMs()
    const started = performance.now()
    const deliveryId = batchIdOf(items)
    const batch: Prepared[] = []
    let noConsent = 0
    let noIdentifier = 0
    const requireConsent = shared.requireConsent || accountRequiresConsent(account)
    for (const item of items) {
      if (requireConsent && !consents(item.context, shared.consentAttribute, config.purpose)) {
        noConsent++
        continue
      }
      const ids = identifiersOf(item.context, shared)
      if (provider.needsContact && !hasContact(ids)) {
        noIdentifier++
        continue
      }
      batch.push({ item, ids })
    }
    counters.skippedNoConsent += noConsent
    counters.skippedNoIdentifier += noIdentifier
    const skipped = skippedNote(noConsent, noIdentifier)
    if (batch.length === 0) {
      if (observe !== null) observe(destination!, 'skipped', items.length)
      return { outcome: 'delivered', deliveryId, atMs, latencyMs: 0, error: `nothing sent: ${skipped}`, exchange: null }
    }
    let outcome: ProviderOutcome
    try {
      outcome = await provider.send(context, batch, test)
    } catch (error) {
      const failure = error instanceof HttpFailure ? error : new HttpFailure('connection', error instanceof Error ? error.message : String(error))
      outcome = { outcome: failure.retryable ? 'retry' : 'terminal', error: failure.message, request: '', answer: '' }
    }
    const latencyMs = Math.round((performance.now() - started) * 10) / 10
    const exchange = exchanges.add({ atMs, items: batch.length, outcome: outcome.outcome, status: outcome.status ?? null, request: outcome.request, answer: outcome.answer, error: outcome.error ?? null, test })
    counters.sent += batch.length
    counters.lastAtMs = atMs
    counters.lastStatus = outcome.status ?? null
    if (outcome.outcome === 'delivered') {
      counters.delivered += batch.length
      if (outcome.error !== undefined) counters.partialFailures++
    } else {
      counters.failed += batch.length
    }
    counters.lastError = outcome.outcome === 'delivered' ? (outcome.error ?? null) : (outcome.error ?? `HTTP ${outcome.status ?? '?'}`)
    if (observe !== null) observe(destination!, outcome.outcome, batch.length)
    const result: SendResult & { exchange: Exchange | null } = { outcome: outcome.outcome, deliveryId, atMs, latencyMs, exchange }
    if (outcome.status !== undefined) result.status = outcome.status
    if (outcome.retryAfterMs !== undefined) result.retryAfterMs = outcome.retryAfterMs
    const note = [outcome.error === undefined ? null : exchange.error, skipped === '' ? null : `skipped ${skipped}`].filter(text => text !== null).join('; ')
    if (note !== '') result.error = note.slice(0, 500)
    if (outcome.outcome !== 'delivered') result.errorCode = outcome.status === undefined ? 'connection' : 'http_status'
    return result
  }

  const native: NativeDelivery = {
    selects: row => row.kind === 'event' ? events.has(row.event!) : audiences.has(row.segment!),
    send: items => attempt(items, false),
    batchWindowMs: DESTINATION_LIMITS.batchWindowMs,
  }
  const webhook = deliveryFace(id, account, config, provider, shared, native)
  destination = { id, account, config, provider, shared, webhook, counters, exchanges, sendTest: items => attempt(items, true) }
  return destination
}

/** The webhook-shaped face the delivery machinery reads: its rendering fields are never used. */
function deliveryFace (id: string, account: string, config: DestinationConfig, provider: ProviderDefinition<never, never>, shared: SharedSettingValues, native: NativeDelivery): CompiledWebhook {
  const target = new URL(shared.apiBaseUrl)
  return {
    id: destinationKey(id),
    account,
    name: config.name,
    enabled: config.enabled,
    trigger: { kind: 'event', events: new Set() },
    method: 'POST',
    hasBody: true,
    url: compileTemplate(shared.apiBaseUrl, 'url'),
    origin: target.origin,
    urlPrefix: target.origin,
    targetHostname: target.hostname,
    targetRefusal: literalRefusal(target.hostname),
    staticHeaderList: [],
    headerTemplates: [],
    signer: null,
    payload: compileTemplate('null', 'json'),
    mode: 'async',
    timeoutMs: shared.timeoutMs,
    proxy: null,
    proxyRefusal: null,
    delayMs: 0,
    batchSize: provider.batchMax,
    bodyIsArray: true,
    maxAttempts: shared.maxAttempts,
    ratePerSecond: shared.ratePerSecond,
    config: { name: config.name, enabled: config.enabled, trigger: { kind: 'event', events: [] }, request: { method: 'POST', url: shared.apiBaseUrl }, delivery: { mode: 'async', timeoutMs: shared.timeoutMs, batchSize: 1 } } as unknown as CompiledWebhook['config'],
    native,
  }
}

/**
 * Whether the person consented to `purpose`: the consent attribute holds it as a list (["ads"]), an
 * object ({"ads": true}) or a comma-separated text ("ads,analytics").
 */
export function consents (context: DeliveryContext, attribute: string, purpose: string): boolean {
  const value = context.attributes?.[attribute]
  if (Array.isArray(value)) return value.includes(purpose)
  if (typeof value === 'string') return value.split(',').some(part => part.trim() === purpose)
  if (typeof value === 'object' && value !== null) return (value as Record<string, unknown>)[purpose] === true
  return false
}

function noConsentRequired (): boolean {
  return false
}

function skippedNote (noConsent: number, noIdentifier: number): string {
  const parts: string[] = []
  if (noConsent > 0) parts.push(`${noConsent} without consent`)
  if (noIdentifier > 0) parts.push(`${noIdentifier} without an email or phone`)
  return parts.join(', ')
}
