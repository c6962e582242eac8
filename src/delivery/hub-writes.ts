// The hub's own writes, batched: outcome rows and the removal of relayed outbox rows go to LMDB
// together, at most `delayMs` after the first of them, or with the next relay pass: one transaction
// for all rather than one each (at batchSize 1 every answer comes in an event turn of its own). The
// queue hears of an outcome once its row is committed (JetStream acks then): a crash before that
// makes the attempt again, to the same webhook-id, and never leaves a record listed as it was before
// an attempt the queue has forgotten.

import { asStored, encodeRecord, type RowOrigin } from '../store/record-codec.js'
import type { Key, Store } from '../store/store.js'
import type { DeliveryQueue } from './queue.js'
import type { DeliveryOutcome, DeliveryRecord, OutcomeRow } from './record.js'
import { OUTCOME_KEY } from './records-db.js'

/** An outcome row waiting to be written. Rows of one batch are often the same object: encoded once. */
interface PendingOutcome {
  key: Key
  row: OutcomeRow
}

/** What the queue is told once the outcome row of `record` is committed. */
export interface PendingSettle {
  record: DeliveryRecord
  outcome: DeliveryOutcome
  delayMs: number
}

export interface HubWritesOptions {
  store: Store
  queue: DeliveryQueue
  delayMs: number
  onFailure: (error: unknown) => void
}

export class HubWrites {
  private readonly store: Store
  private readonly queue: DeliveryQueue
  private readonly delayMs: number
  private readonly onFailure: (error: unknown) => void
  private outcomes: PendingOutcome[] = []
  /** Outbox rows relayed, to remove with the next writes. */
  private relayedRows: { key: number, origin: RowOrigin | null }[] = []
  /** Queue settles waiting for their outcome row's commit. */
  private settles: PendingSettle[] = []
  /** Those of writes issued and not committed yet. */
  private readonly writing = new Set<PendingSettle[]>()
  private timer: NodeJS.Timeout | null = null
  private readonly flushBound = (): void => { this.flush() }

  constructor ({ store, queue, delayMs, onFailure }: HubWritesOptions) {
    this.store = store
    this.queue = queue
    this.delayMs = delayMs
    this.onFailure = onFailure
  }

  /** Write an attempt's outcome row of a record of this node, then tell the queue. */
  outcome (account: string, webhookId: string, seq: number, row: OutcomeRow, settle: PendingSettle): void {
    this.outcomes.push({ key: [account, webhookId, seq, OUTCOME_KEY], row })
    this.settles.push(settle)
    this.soon()
  }

  /** Remove these relayed outbox rows with the next writes. */
  relayed (rows: readonly { key: number, origin: RowOrigin | null }[]): void {
    for (const row of rows) this.relayedRows.push(row)
    this.soon()
  }

  /** Issue the waiting writes, and wait until they and every write before them are committed. */
  async committed (): Promise<void> {
    this.flush()
    await this.store.root.committed
  }

  /** The records whose outcome is not committed yet (they read as before it). */
  settlingIds (): Set<string> {
    const ids = new Set<string>()
    for (const settle of this.settles) ids.add(settle.record.id)
    for (const settles of this.writing) for (const settle of settles) ids.add(settle.record.id)
    return ids
  }

  /** Write records as they are now, replacing any outcome written before. Resolves with the last write. */
  writeRecords (records: readonly DeliveryRecord[]): Promise<boolean> | null {
    // Outcomes still waiting to be written go first: none may land over these records afterwards.
    this.flush()
    let last: Promise<boolean> | null = null
    for (const record of records) {
      const key = [record.account, record.webhookId, record.seq]
      this.store.ignoreFailure(this.store.deliveries.remove([...key, OUTCOME_KEY]), this.onFailure)
      last = this.store.deliveries.put(key, asStored(encodeRecord(record)))
    }
    return last
  }

  /** Issue the waiting writes now. Resolves once they are committed and the queue was told. */
  flush (): Promise<void> | null {
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    const { outcomes, relayedRows, settles } = this
    if (outcomes.length === 0 && relayedRows.length === 0) return null
    this.outcomes = []
    this.relayedRows = []
    this.settles = []
    let last: Promise<boolean> | null = null
    let row: OutcomeRow | null = null
    let stored: ReturnType<typeof asStored> | null = null
    for (const outcome of outcomes) {
      if (outcome.row !== row) {
        row = outcome.row
        stored = asStored(encodeRecord(row))
      }
      last = this.store.deliveries.put(outcome.key, stored)
    }
    for (const row of relayedRows) last = this.store.removeOutbox(row.key, row.origin !== null)
    // A failed commit loses outcome rows (logged): the queue is told all the same, the delivery was made.
    this.writing.add(settles)
    const tell = (): void => {
      this.writing.delete(settles)
      for (const { record, outcome, delayMs } of settles) this.queue.settle(record, outcome, delayMs)
    }
    return last!.then(tell, (error: unknown) => {
      this.onFailure(error)
      tell()
    })
  }

  private soon (): void {
    this.timer ??= setTimeout(this.flushBound, this.delayMs)
  }
}
