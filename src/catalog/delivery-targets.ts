// What the delivery machinery delivers to: the webhooks and, under keys of their own (`~<id>`), the
// native destinations, read through the one WebhookLookup the hub takes.

import { isDestinationKey } from '../destinations/compile.js'
import type { CompiledWebhook } from '../webhooks/compile.js'
import type { WebhookLookup } from '../webhooks/lookup.js'
import type { DestinationCatalog } from './destinations.js'
import type { WebhookCatalog } from './webhooks.js'

export function deliveryTargets (webhooks: WebhookCatalog, destinations: DestinationCatalog): WebhookLookup {
  return {
    allWebhooks: (): CompiledWebhook[] => [...webhooks.allWebhooks(), ...destinations.allWebhooks()],
    webhooksOf: function * (account: string): Iterable<CompiledWebhook> {
      yield * webhooks.webhooksOf(account)
      yield * destinations.webhooksOf(account)
    },
    webhook: (account: string, id: string): CompiledWebhook => isDestinationKey(id) ? destinations.webhook(account, id) : webhooks.webhook(account, id),
  }
}
