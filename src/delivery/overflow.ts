// Embedded queue only: a worker's queue was full, so records stay pending on disk. The refill feeds a
// webhook's records from the oldest left behind on again once its worker has room (JetStream hands a
// refused record back by itself).

import { log } from '../log.js'
import type { Store } from '../store/store.js'
import type { HubWrites } from './hub-writes.js'
import { REFILL_DELAY_MS } from './limits.js'
import type { FeedAnswer } from './queue.js'
import { slot, type DeliveryRecord } from './record.js'
import { recordsOf } from './records-db.js'

/** A webhook whose worker refused records: the oldest seq left pending. */
interface Overflowed {
  account: string
  webhookId: string
  fromSeq: number
}

export interface OverflowOptions {
  store: Store
  writes: HubWrites
  /** Whether the webhook of this slot still has a worker. */
  hasWorker: (slot: string) => boolean
  /** Whether a record is held by a worker already (fed, final outcome not reached). */
  isLive: (id: string) => boolean
  /** Feed a record to its worker again. */
  enqueue: (record: DeliveryRecord) => FeedAnswer
  onFailure: (error: unknown) => void
}

export class Overflow {
  private readonly store: Store
  private readonly writes: HubWrites
  private readonly hasWorker: (slot: string) => boolean
  private readonly isLive: (id: string) => boolean
  private readonly enqueue: (record: DeliveryRecord) => FeedAnswer
  private readonly onFailure: (error: unknown) => void
  private readonly overflowed = new Map<string, Overflowed>()
  private timer: NodeJS.Timeout | null = null
  private stopped = false

  constructor ({ store, writes, hasWorker, isLive, enqueue, onFailure }: OverflowOptions) {
    this.store = store
    this.writes = writes
    this.hasWorker = hasWorker
    this.isLive = isLive
    this.enqueue = enqueue
    this.onFailure = onFailure
  }

  /** The worker of this record refused it: it stays pending on disk, offered again in REFILL_DELAY_MS. */
  note (record: DeliveryRecord, error: unknown): void {
    const key = slot(record.account, record.webhookId)
    const known = this.overflowed.get(key)
    if (known === undefined) log.warn({ err: error, webhook: record.webhookId }, 'delivery queue full; records left pending until it has room')
    if (known === undefined || record.seq < known.fromSeq) this.overflowed.set(key, { account: record.account, webhookId: record.webhookId, fromSeq: record.seq })
    if (this.timer === null && !this.stopped) {
      this.timer = setTimeout(() => {
        this.timer = null
        // The relay feeds records before their commit: read once what it and the hub wrote is committed.
        this.writes.committed().then(() => this.refill(), this.onFailure)
      }, REFILL_DELAY_MS)
      this.timer.unref()
    }
  }

  stop (): void {
    this.stopped = true
    if (this.timer !== null) clearTimeout(this.timer)
  }

  /** Feed the records left pending by a full queue, oldest first, until the queue is full again. */
  private refill (): void {
    const settling = this.writes.settlingIds()
    for (const [key, entry] of [...this.overflowed]) {
      if (!this.hasWorker(key)) {
        this.overflowed.delete(key)
        continue
      }
      let busyAt: number | null = null
      for (const record of recordsOf(this.store, entry.account, entry.webhookId, entry.fromSeq)) {
        if ((record.status !== 'pending' && record.status !== 'failed') || this.isLive(record.id) || settling.has(record.id)) continue
        if (this.enqueue(record) === 'busy') {
          busyAt = record.seq
          break
        }
      }
      if (busyAt === null) this.overflowed.delete(key)
      else entry.fromSeq = busyAt
    }
  }
}
