// Cluster mode: the outcome of an attempt of a record another node holds (it relayed the record, so the
// record is in its LMDB) is carried back to that node, its holder, which writes it to its record as if
// it had made the attempt itself: the deliveries log then shows each record's true status through any
// node (docs/webhooks.md, "Where records are").
//
// The attempting node knows the holder from the record itself: its `node` (the holder's data folder
// id), which every queue message carries. It sends each holder its outcomes in batches, in the order
// the attempts ended, one call in flight per holder, over a call addressed by that id
// (src/cluster/node-calls.ts, namespace `holder`). A batch the holder does not take (down, paused, cut
// off) is sent again, pausing 1 s doubling to 5 s, for HOLDER_OUTCOMES_GIVE_UP_MS, then dropped and
// logged: the record stays as it was at its holder until a later outcome of it gets there. Nothing is
// kept on disk for this: a crash of the attempting node loses the outcomes it had not sent yet.
//
// The holder applies an outcome only when it comes later in the record's life than what its record
// has (laterThan: a later replay, or a later attempt of the same one), so an outcome sent twice, late,
// or overtaken by the next attempt's changes nothing. It reads and writes a batch in one write
// transaction, after its own outcome rows waiting to be written, and answers once it is committed.

import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'
import { log } from '../log.js'
import { asStored, encodeRecord } from '../store/record-codec.js'
import type { Store } from '../store/store.js'
import type { HubWrites } from './hub-writes.js'
import {
  CLUSTER_PAGE_SIZE_MAX_BYTES, HOLDER_OUTCOMES_BATCH_MAX, HOLDER_OUTCOMES_DELAY_MS, HOLDER_OUTCOMES_GIVE_UP_MS,
  HOLDER_OUTCOMES_PAUSE_MAX_MS, HOLDER_OUTCOMES_PAUSE_MIN_MS, HOLDER_OUTCOMES_PENDING_MAX,
} from './limits.js'
import { laterThan, type DeliveryRecord, type OutcomeRow } from './record.js'
import { OUTCOME_KEY, readRecord } from './records-db.js'

/** Calls to the node holding a data folder (a NodeCalls of namespace 'holder'). */
export interface HolderCalls {
  call: (holder: string, method: string, payload: unknown) => Promise<unknown>
  serve: (method: string, handler: (payload: unknown) => Promise<unknown>) => void
}

/** One attempt's outcome of one record, as it travels: where the record is, which replay of it, what changed. */
interface Outcome {
  account: string
  webhookId: string
  seq: number
  id: string
  replayedAtMs: number | null
  row: OutcomeRow
}

interface HolderQueue {
  pending: Outcome[]
  /** A batch of it on its way (then the next one follows it), or the timer that starts the first. */
  sending: boolean
  timer: NodeJS.Timeout | null
  dropped: number
}

export interface HolderOutcomesOptions {
  store: Store
  writes: HubWrites
  calls: HolderCalls
  clock: Clock
  /** Told each record an outcome of another node was applied to, as it now is (the hub's live copy follows it). */
  applied: (record: DeliveryRecord) => void
  /** HOLDER_OUTCOMES_GIVE_UP_MS (shorter in tests). */
  giveUpMs?: number
}

const METHOD = 'deliveries.outcomes'

export class HolderOutcomes {
  private readonly store: Store
  private readonly writes: HubWrites
  private readonly calls: HolderCalls
  private readonly clock: Clock
  private readonly applied: (record: DeliveryRecord) => void
  private readonly giveUpMs: number
  private readonly holders = new Map<string, HolderQueue>()
  private stopped = false

  constructor ({ store, writes, calls, clock, applied, giveUpMs = HOLDER_OUTCOMES_GIVE_UP_MS }: HolderOutcomesOptions) {
    this.store = store
    this.writes = writes
    this.calls = calls
    this.clock = clock
    this.applied = applied
    this.giveUpMs = giveUpMs
    calls.serve(METHOD, payload => this.apply(payload))
  }

  /** Carry the outcome `row` of an attempt of `record` to its holder (`record.node`). */
  send (record: DeliveryRecord, row: OutcomeRow): void {
    const holder = record.node
    if (this.stopped || holder === undefined) return
    let queue = this.holders.get(holder)
    if (queue === undefined) {
      queue = { pending: [], sending: false, timer: null, dropped: 0 }
      this.holders.set(holder, queue)
    }
    if (queue.pending.length >= HOLDER_OUTCOMES_PENDING_MAX) {
      queue.dropped++
      return
    }
    queue.pending.push({ account: record.account, webhookId: record.webhookId, seq: record.seq, id: record.id, replayedAtMs: record.replayedAtMs, row })
    if (!queue.sending && queue.timer === null) queue.timer = setTimeout(() => { void this.drain(holder, queue) }, HOLDER_OUTCOMES_DELAY_MS)
  }

  /** Send nothing more: what waits is dropped (logged), a batch on its way ends at its next failure. */
  stop (): void {
    this.stopped = true
    for (const [holder, queue] of this.holders) {
      if (queue.timer !== null) clearTimeout(queue.timer)
      const left = queue.pending.length + queue.dropped
      if (left > 0) log.warn({ holder, outcomes: left }, 'delivery outcomes not carried to the node holding their records (stopping); those records stay as they were there')
    }
    this.holders.clear()
  }

  private async drain (holder: string, queue: HolderQueue): Promise<void> {
    queue.timer = null
    queue.sending = true
    while (queue.pending.length > 0 && !this.stopped) {
      if (queue.dropped > 0) {
        log.warn({ holder, outcomes: queue.dropped }, 'delivery outcomes dropped: too many waiting for the node holding their records; those records stay as they were there')
        queue.dropped = 0
      }
      await this.deliver(holder, batchOf(queue.pending))
    }
    queue.sending = false
    if (queue.pending.length === 0 && this.holders.get(holder) === queue) this.holders.delete(holder)
  }

  /** One batch to its holder, sent again while it is not taken, for giveUpMs at most. */
  private async deliver (holder: string, batch: Outcome[]): Promise<void> {
    const giveUpAtMs = this.clock.nowMs() + this.giveUpMs
    let pauseMs = HOLDER_OUTCOMES_PAUSE_MIN_MS
    while (!this.stopped) {
      try {
        await this.calls.call(holder, METHOD, batch)
        return
      } catch (error) {
        if (this.stopped || this.clock.nowMs() + pauseMs >= giveUpAtMs) {
          log.warn({ err: error, holder, outcomes: batch.length }, 'delivery outcomes not carried to the node holding their records; those records stay as they were there')
          return
        }
      }
      await new Promise(resolve => setTimeout(resolve, pauseMs))
      pauseMs = Math.min(pauseMs * 2, HOLDER_OUTCOMES_PAUSE_MAX_MS)
    }
  }

  /** A batch from an attempting node. Resolves, once committed, with how many of its outcomes were applied. */
  private async apply (payload: unknown): Promise<number> {
    if (!Array.isArray(payload) || !payload.every(isOutcome)) {
      throw new ApiError('invalid_field', 'Delivery outcomes must be an array of outcomes.')
    }
    // This node's own outcome rows waiting to be written go first. The batch is applied in one write
    // transaction, which runs after every write issued before it (those rows, a replay rewriting a
    // record): each outcome is compared with its record as it is then, never with an older read.
    this.writes.flush()
    const db = this.store.deliveries
    const applied: DeliveryRecord[] = []
    await db.transaction(() => {
      for (const outcome of payload) {
        const record = readRecord(this.store, outcome.account, outcome.webhookId, outcome.seq)
        // Erased or pruned meanwhile, or not a record of this node's: nothing to write.
        if (record === undefined || record.id !== outcome.id) continue
        if (!laterThan({ replayedAtMs: outcome.replayedAtMs, attempt: outcome.row.attempt }, record)) continue
        db.put([outcome.account, outcome.webhookId, outcome.seq, OUTCOME_KEY], asStored(encodeRecord(outcome.row)))
        applied.push({ ...record, ...outcome.row })
      }
    })
    for (const record of applied) this.applied(record)
    return applied.length
  }
}

/** The first outcomes of `pending`, taken out of it: at most HOLDER_OUTCOMES_BATCH_MAX, and CLUSTER_PAGE_SIZE_MAX_BYTES as JSON. */
function batchOf (pending: Outcome[]): Outcome[] {
  let bytes = 0
  let n = 0
  while (n < pending.length && n < HOLDER_OUTCOMES_BATCH_MAX) {
    bytes += JSON.stringify(pending[n]).length
    if (bytes > CLUSTER_PAGE_SIZE_MAX_BYTES && n > 0) break
    n++
  }
  return pending.splice(0, n)
}

function isOutcome (value: unknown): value is Outcome {
  const o = value as Outcome | null
  return typeof o === 'object' && o !== null && typeof o.account === 'string' && typeof o.webhookId === 'string' &&
    typeof o.seq === 'number' && typeof o.id === 'string' && (o.replayedAtMs === null || typeof o.replayedAtMs === 'number') &&
    typeof o.row === 'object' && o.row !== null && typeof o.row.attempt === 'number' && typeof o.row.status === 'string' &&
    Array.isArray(o.row.attempts)
}
