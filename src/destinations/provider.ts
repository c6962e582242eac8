// What one destination type is: its settings and credentials (TypeBox schemas, compiled once), its
// limits, and how it sends one batch. The framework (compile.ts) does everything the types share:
// consent, identifiers, skipping, timing, the delivery log; a provider only maps and answers.

import type { TSchema } from 'typebox'
import type { DeliveryItem } from '../webhooks/types.js'
import type { Identifiers } from './identifiers.js'
import type { ProviderHttp } from './http.js'

export const PURPOSES = ['ads', 'analytics'] as const
export type Purpose = typeof PURPOSES[number]

/** One item of a batch, with who it is about (normalized, not hashed). */
export interface Prepared {
  item: DeliveryItem
  ids: Identifiers
}

/** Where and as what a provider sends, from the saved destination. */
export interface ProviderContext<S, C> {
  id: string
  account: string
  settings: S
  credentials: C
  /** settings.apiBaseUrl, or the provider's, without a trailing '/'. */
  apiBaseUrl: string
  http: ProviderHttp
  timeoutMs: number
  nowMs: () => number
  /** Mutable state kept with the compiled destination (an OAuth access token and its expiry). */
  state: Record<string, unknown>
}

/** How a batch ended, with what the delivery log keeps of its last exchange (masked by the framework). */
export interface ProviderOutcome {
  outcome: 'delivered' | 'retry' | 'terminal'
  status?: number
  retryAfterMs?: number
  /** Why it failed; or, delivered, what the provider refused of it (partial failures). */
  error?: string
  request: string
  answer: string
}

export interface ProviderDefinition<S = Record<string, unknown>, C = Record<string, string>> {
  readonly type: string
  readonly label: string
  /** Its purpose when the destination names none. */
  readonly purpose: Purpose
  /** Whether it takes events, audience changes, or both. */
  readonly takes: { events: boolean, audiences: boolean }
  /** Whether an item without email or phone is skipped (an audience cannot match on an external id). */
  readonly needsContact: boolean
  /** Items per request at most (the provider's documented limit). */
  readonly batchMax: number
  readonly apiBaseUrl: string
  /** Other URLs its credentials are sent to (an OAuth token endpoint): they count as its origin too. */
  readonly extraUrls?: (settings: Record<string, unknown>) => string[]
  /** The type's own settings (the shared ones are added by config.ts). */
  readonly settings: TSchema
  readonly credentials: TSchema
  /** One batch (1..batchMax items); `test`: the admin's test event (a provider's test mode where it has one). */
  send (context: ProviderContext<S, C>, batch: readonly Prepared[], test: boolean): Promise<ProviderOutcome>
}
