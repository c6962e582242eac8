// What delivery reads of the webhook catalog (src/catalog/webhooks.ts implements it): declared here, in
// the delivery layer, so the hub depends on the webhooks it delivers to, not on the catalog above it.

import type { CompiledWebhook } from './compile.js'

export interface WebhookLookup {
  /** Every webhook of every account, compiled (configuration with secrets: never return it as is). */
  allWebhooks (): Iterable<CompiledWebhook>
  /** The account's webhooks, compiled. */
  webhooksOf (account: string): Iterable<CompiledWebhook>
  /** The account's webhook, or the webhook_not_found (or account_not_found) error. */
  webhook (account: string, id: string): CompiledWebhook
}

/** Told after a webhook is saved, or deleted (null), so its worker is swapped. */
export type WebhookChanged = (account: string, id: string, webhook: CompiledWebhook | null) => void
