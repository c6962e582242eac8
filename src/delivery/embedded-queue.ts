// The embedded queue: the deliveries db holds what waits; retries wait in the worker until they are due.

import type { Store } from '../store/store.js'
import type { DeliveryQueue, Feed } from './queue.js'
import type { DeliveryRecord } from './record.js'
import { recordsIn } from './records-db.js'

export class EmbeddedQueue implements DeliveryQueue {
  readonly retriesInMemory = true
  private readonly store: Store
  private feed: Feed | null = null

  constructor (store: Store) {
    this.store = store
  }

  // A record left 'busy' stays pending on disk until the hub's refill offers it again; one left 'gone'
  // (its webhook deleted) stays as it is, replayable.
  async start (feed: Feed): Promise<void> {
    this.feed = feed
    for (const record of recordsIn(this.store, {})) {
      if (record.status === 'pending' || record.status === 'failed') feed(record)
    }
  }

  async publish (records: readonly DeliveryRecord[]): Promise<void> {
    for (const record of records) this.feed?.(record)
  }

  // Retries stay in their worker (retriesInMemory); the record on disk says `failed` until they end.
  settle (): void {}

  async stop (): Promise<void> {
    this.feed = null
  }
}
