// The webhook-id of a request. One item: its own webhook-id (its `messageId` when it has one, else its
// id). A batch: "batch_" + the first 32 hex digits of SHA-256 over the items' webhook-ids, sorted, each
// followed by "\n". Sorting makes the id a function of the set of items, so a retry of the same items
// carries the same webhook-id even if a transport hands them back in another order, and a receiver can
// deduplicate on it.

import { createHash } from 'node:crypto'
import type { DeliveryItem } from './types.js'

export const BATCH_ID_PREFIX = 'batch_'

export function batchIdOf (items: readonly DeliveryItem[]): string {
  const first = items[0]
  if (first === undefined) throw new RangeError('batchIdOf needs at least one item')
  if (items.length === 1) return idOf(first)
  // One update of the whole text: an update per id cost two thirds of the time (100 ids: 15 µs → 5 µs).
  const ids = items.map(idOf).sort()
  return BATCH_ID_PREFIX + createHash('sha256').update(ids.join('\n') + '\n').digest('hex').slice(0, 32)
}

function idOf (item: DeliveryItem): string {
  return item.messageId ?? item.id
}
