// The deliveries log as the API and the privacy jobs see it: list a webhook's records, replay dead (or
// delivered) ones, prune delivered ones past their retention, forget a person's records.

import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'
import type { WebhookLookup } from '../webhooks/lookup.js'
import { KEY_PART_MAX, type Store } from '../store/store.js'
import type { HubWrites } from './hub-writes.js'
import { LIST_PAGE_MAX, PRUNE_BATCH_MAX, PRUNE_INTERVAL_MS } from './limits.js'
import type { DeliveryQueue } from './queue.js'
import { withMaskedErrors, type DeliveryRecord, type DeliveryStatus } from './record.js'
import { readRecordById, recordsIn, recordsOf, removeRecord } from './records-db.js'
import { storedRow } from './relay.js'

export interface DeliveryHistoryOptions {
  store: Store
  registry: WebhookLookup
  clock: Clock
  queue: DeliveryQueue
  writes: HubWrites
  /** Delivered records older than this (by their last update) are deleted; 0 keeps them. */
  retentionMs: number
  /** Whether a record is held by a worker (fed, final outcome not reached): not pruned. */
  isLive: (id: string) => boolean
  /** Resolves when everything appended to the outbox so far has been relayed. */
  relayed: () => Promise<void>
  onFailure: (error: unknown) => void
}

export class DeliveryHistory {
  private readonly store: Store
  private readonly registry: WebhookLookup
  private readonly clock: Clock
  private readonly queue: DeliveryQueue
  private readonly writes: HubWrites
  private readonly retentionMs: number
  private readonly isLive: (id: string) => boolean
  private readonly relayed: () => Promise<void>
  private readonly onFailure: (error: unknown) => void
  private pruneTimer: NodeJS.Timeout | null = null

  constructor ({ store, registry, clock, queue, writes, retentionMs, isLive, relayed, onFailure }: DeliveryHistoryOptions) {
    this.store = store
    this.registry = registry
    this.clock = clock
    this.queue = queue
    this.writes = writes
    this.retentionMs = retentionMs
    this.isLive = isLive
    this.relayed = relayed
    this.onFailure = onFailure
  }

  /** Prune every PRUNE_INTERVAL_MS (when there is a retention). */
  start (): void {
    if (this.retentionMs <= 0) return
    this.pruneTimer = setInterval(() => { this.prune().catch(this.onFailure) }, PRUNE_INTERVAL_MS)
    this.pruneTimer.unref()
  }

  stop (): void {
    if (this.pruneTimer !== null) clearInterval(this.pruneTimer)
  }

  /**
   * Delete the delivered records whose last update is older than the retention, at most
   * PRUNE_BATCH_MAX a pass. A webhook's records are in sequence order, which is creation order, so
   * its scan stops at the first record created inside the retention. Resolves with how many went.
   */
  async prune (): Promise<number> {
    if (this.retentionMs <= 0) return 0
    const cutoffMs = this.clock.nowMs() - this.retentionMs
    let removed = 0
    let last: Promise<boolean> | null = null
    for (const webhook of this.registry.allWebhooks()) {
      for (const record of recordsOf(this.store, webhook.account, webhook.id)) {
        if (record.createdAtMs >= cutoffMs || removed === PRUNE_BATCH_MAX) break
        if (record.status !== 'delivered' || record.updatedAtMs >= cutoffMs || this.isLive(record.id)) continue
        last = removeRecord(this.store, record.account, record.webhookId, record.seq, this.onFailure)
        removed++
      }
    }
    if (last !== null) await this.store.durable(last)
    return removed
  }

  /** A page of a webhook's deliveries, oldest first, optionally of one status. */
  async list (account: string, webhookId: string, status: DeliveryStatus | null, after: number, limit: number): Promise<{ deliveries: DeliveryRecord[], next: number | null }> {
    await this.writes.committed()
    const deliveries: DeliveryRecord[] = []
    let next: number | null = null
    for (const record of recordsOf(this.store, account, webhookId, after + 1)) {
      if (status !== null && record.status !== status) continue
      if (deliveries.length === limit) {
        next = deliveries[deliveries.length - 1]!.seq
        break
      }
      deliveries.push(withMaskedErrors(record))
    }
    return { deliveries, next }
  }

  /** Which of these ids this node's store holds records of, for this webhook (cluster mode: where to replay each). */
  async held (account: string, webhookId: string, ids: readonly string[]): Promise<string[]> {
    await this.writes.committed()
    return ids.filter(id => readRecordById(this.store, account, webhookId, id) !== undefined)
  }

  /**
   * Re-queue deliveries: the ids given, or those that occurred in [fromMs, toMs) — dead ones, and with
   * explicit ids delivered ones too (a receiver that lost data). Each starts again from attempt 1.
   */
  async replay (account: string, webhookId: string, ids: readonly string[] | null, fromMs: number, toMs: number): Promise<number> {
    this.registry.webhook(account, webhookId) // 404 for an unknown webhook
    await this.writes.committed()
    const nowMs = this.clock.nowMs()
    const chosen: DeliveryRecord[] = []
    if (ids !== null) {
      for (const id of ids) {
        const record = readRecordById(this.store, account, webhookId, id)
        if (record === undefined) throw unknownDelivery(id)
        if (record.status === 'dead' || record.status === 'delivered') chosen.push(record)
      }
    } else {
      for (const record of recordsOf(this.store, account, webhookId)) {
        if (record.status === 'dead' && record.item.occurredAtMs >= fromMs && record.item.occurredAtMs < toMs) chosen.push(record)
      }
    }
    const requeued = chosen.map(record => ({ ...record, status: 'pending' as const, attempt: 1, dueMs: 0, updatedAtMs: nowMs, replayedAtMs: nowMs }))
    const last = this.writes.writeRecords(requeued)
    if (last !== null) await this.store.durable(last)
    await this.queue.publish(requeued.map(record => ({ ...record, attempts: [] })))
    return requeued.length
  }

  /**
   * Erasure: remove the outbox rows and the delivery records (any status: the deliveries log, dead
   * letters) of the account that carry one of these profile or visitor ids, a bounded page at a time
   * with the event loop free between pages. A record already handed to a worker may still be sent
   * once; what its attempt writes afterwards carries no personal data. Resolves with how many went.
   * Spared: the 'erase' rows and records the erasure itself made (actors/entity.ts outboxErased), the
   * removes sent to the audience destinations the person was added to.
   */
  async forget (account: string, profileIds: ReadonlySet<string>, visitorIds: ReadonlySet<string>): Promise<number> {
    const carries = (who: { profileId?: string, visitorId?: string }): boolean =>
      (who.profileId !== undefined && profileIds.has(who.profileId)) || (who.visitorId !== undefined && visitorIds.has(who.visitorId))
    // Rows appended before now are relayed first (their records then exist), and outcomes written.
    await this.relayed()
    await this.writes.committed()
    let removed = 0
    let last: Promise<boolean> | null = null
    for (const key of this.store.outbox.getKeys() as Iterable<number>) {
      const row = storedRow(key, this.store.outbox.get(key)).value
      if (row.account === account && row.change !== 'erase' && carries(row)) {
        last = this.store.removeOutbox(key, true)
        removed++
      }
    }
    let start: unknown[] = [account]
    for (;;) {
      const page: DeliveryRecord[] = []
      let next: unknown[] | null = null
      for (const record of recordsIn(this.store, { start, end: [account, KEY_PART_MAX] })) {
        if (page.length === LIST_PAGE_MAX) {
          next = [account, record.webhookId, record.seq]
          break
        }
        page.push(record)
      }
      for (const record of page) {
        if (record.item.context.change === 'erase' || !carries(record.item.context)) continue
        last = removeRecord(this.store, account, record.webhookId, record.seq, this.onFailure)
        removed++
      }
      if (next === null) break
      start = next
      await new Promise(resolve => setImmediate(resolve))
    }
    if (last !== null) await this.store.durable(last)
    return removed
  }
}

/** A replay naming a delivery this webhook has no record of (on this node, or in the cluster). */
export function unknownDelivery (id: string): ApiError {
  return new ApiError('invalid_field', `No delivery ${id} for this webhook.`, '/deliveryIds')
}
