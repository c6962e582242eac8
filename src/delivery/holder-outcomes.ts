// Cluster mode: the outcome of an attempt of a record another node holds (it relayed the record, so the
// record is in its LMDB) is carried back to that node, its holder, which writes it to its record as if
// it had made the attempt itself: the deliveries log then shows each record's true status through any
// node (docs/webhooks.md, "Where records are").
//
// The attempting node knows the holder from the record itself: its `node` (the holder's data folder
// id), which every queue message carries. It stores each holder's outcomes in the outcome stream
// (jetstream/outcome-stream.ts: a JetStream stream of the cluster, one subject and one durable consumer
// per holder), in batches, in the order the attempts ended, one batch in flight per holder. An
// outcome's delivery message is settled (acked, handed back for its retry, termed) only once the
// batch holding the outcome is stored: a crash between the two makes the stream hand the delivery out
// again (attempted again, at least once) rather than lose the outcome. A batch JetStream does not take
// (NATS away) is published again, under the same message id, until it is or the node stops; stopping
// waits a little for what is gathered, and the deliveries of what did not get stored are attempted
// again. A holder that is down gets what was stored for it when it is back, however long (within the
// stream's bounds).
//
// The holder applies an outcome only when it comes later in the record's life than what its record
// has (laterThan: a later replay, or a later attempt of the same one), so an outcome stored twice,
// late, or overtaken by the next attempt's changes nothing: the stream's at-least-once hand-out is
// enough. It reads and writes the messages it pulled in one write transaction, after its own outcome
// rows waiting to be written, and acks them once it is committed.

import { nuid } from '@nats-io/transport-node'
import { log } from '../log.js'
import { asStored, decodeMessage, encodeMessage, encodeRecord } from '../store/record-codec.js'
import type { Store } from '../store/store.js'
import type { HubWrites } from './hub-writes.js'
import { withTimeout } from './jetstream/wait.js'
import {
  CLUSTER_PAGE_SIZE_MAX_BYTES, HOLDER_OUTCOMES_BATCH_MAX, HOLDER_OUTCOMES_DELAY_MS, HOLDER_OUTCOMES_RETRY_DELAY_MAX_MS,
  HOLDER_OUTCOMES_RETRY_DELAY_MIN_MS, STOP_OUTCOMES_WAIT_MAX_MS,
} from './limits.js'
import { laterThan, type DeliveryRecord, type OutcomeRow } from './record.js'
import { OUTCOME_KEY, readRecord } from './records-db.js'

/** Where outcomes are stored for their holders, and read by this node for its own records (jetstream/outcome-stream.ts). */
export interface OutcomeTransport {
  /** Stores one message of outcomes for `holder`: resolves once stored; `id` makes a resend of it a duplicate. */
  publish (holder: string, data: Uint8Array, id: string): Promise<void>
  /** Hands this node's outcome messages to `apply` from now on; acked once it resolved, handed out again otherwise. */
  consume (apply: (messages: readonly Uint8Array[]) => Promise<void>): void
  /** Stops consuming; what was not applied is handed out again at the next start. */
  stop (): Promise<void>
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

/** An outcome waiting to be stored: its bytes, and what to do once it is (settle its delivery message). */
interface Waiting {
  bytes: Uint8Array
  stored: () => void
}

interface HolderQueue {
  pending: Waiting[]
  /** A batch of it on its way (then the next one follows it), or the timer that starts the first. */
  sending: Promise<void> | null
  timer: NodeJS.Timeout | null
}

export interface HolderOutcomesOptions {
  store: Store
  writes: HubWrites
  transport: OutcomeTransport
  /** Told each record an outcome of another node was applied to, as it now is (the hub's live copy follows it). */
  applied: (record: DeliveryRecord) => void
}

export class HolderOutcomes {
  private readonly store: Store
  private readonly writes: HubWrites
  private readonly transport: OutcomeTransport
  private readonly applied: (record: DeliveryRecord) => void
  private readonly holders = new Map<string, HolderQueue>()
  /** Message ids are `<instance>.<counter>`: unique per process run. */
  private readonly instance = nuid.next()
  private batches = 0
  /** Outcomes given to send() and not stored yet. */
  private unstored = 0
  /** Stopping: batches go at once; one JetStream does not take is not sent again. */
  private stopping = false

  constructor ({ store, writes, transport, applied }: HolderOutcomesOptions) {
    this.store = store
    this.writes = writes
    this.transport = transport
    this.applied = applied
  }

  /** Apply the outcomes other nodes stored for this node's records, from now on. */
  start (): void {
    this.transport.consume(messages => this.apply(messages))
  }

  /**
   * Store the outcome `row` of an attempt of `record` for its holder (`record.node`), then call `stored`
   * (which settles its delivery message). Not called when the node stops first: the delivery is attempted again.
   */
  send (record: DeliveryRecord, row: OutcomeRow, stored: () => void): void {
    const holder = record.node
    if (this.stopping || holder === undefined) return
    let queue = this.holders.get(holder)
    if (queue === undefined) {
      queue = { pending: [], sending: null, timer: null }
      this.holders.set(holder, queue)
    }
    const outcome: Outcome = { account: record.account, webhookId: record.webhookId, seq: record.seq, id: record.id, replayedAtMs: record.replayedAtMs, row }
    queue.pending.push({ bytes: encodeRecord(outcome), stored })
    this.unstored++
    if (queue.sending === null && queue.timer === null) queue.timer = setTimeout(() => this.drainSoon(holder, queue), HOLDER_OUTCOMES_DELAY_MS)
  }

  /**
   * What was gathered is stored at once, waited for at most STOP_OUTCOMES_WAIT_MAX_MS (settling the
   * deliveries of what was: call before the queue stops), then this node stops applying others' outcomes.
   */
  async stop (): Promise<void> {
    this.stopping = true
    for (const [holder, queue] of this.holders) {
      if (queue.timer === null) continue
      clearTimeout(queue.timer)
      this.drainSoon(holder, queue)
    }
    const sending = [...this.holders.values()].map(queue => queue.sending)
    await withTimeout(Promise.all(sending), STOP_OUTCOMES_WAIT_MAX_MS)
    if (this.unstored > 0) log.warn({ outcomes: this.unstored }, 'delivery outcomes not stored for the nodes holding their records (stopping); their deliveries will be attempted again')
    await this.transport.stop()
  }

  private drainSoon (holder: string, queue: HolderQueue): void {
    queue.timer = null
    queue.sending ??= this.drain(holder, queue).finally(() => {
      queue.sending = null
      if (queue.pending.length === 0 && this.holders.get(holder) === queue) this.holders.delete(holder)
    })
  }

  private async drain (holder: string, queue: HolderQueue): Promise<void> {
    while (queue.pending.length > 0) {
      const batch = batchOf(queue.pending)
      if (!await this.deliver(holder, batch)) {
        // Stopping: left unsettled (attempted again), with what waits behind it.
        queue.pending.length = 0
        return
      }
      this.unstored -= batch.length
      for (const waiting of batch) waiting.stored()
    }
  }

  /** One batch stored for its holder, published again while JetStream does not take it. False when the node stopped first. */
  private async deliver (holder: string, batch: Waiting[]): Promise<boolean> {
    const data = encodeMessage(batch.map(waiting => waiting.bytes))
    const id = `${this.instance}.${(this.batches++).toString(36)}`
    let delayMs = HOLDER_OUTCOMES_RETRY_DELAY_MIN_MS
    for (;;) {
      try {
        await this.transport.publish(holder, data, id)
        return true
      } catch (error) {
        if (this.stopping) return false
        log.warn({ err: error, holder, outcomes: batch.length }, 'delivery outcomes not stored for the node holding their records; publishing them again')
      }
      await new Promise(resolve => setTimeout(resolve, delayMs))
      delayMs = Math.min(delayMs * 2, HOLDER_OUTCOMES_RETRY_DELAY_MAX_MS)
    }
  }

  /** Messages of outcomes of this node's records. Resolves once committed. */
  private async apply (messages: readonly Uint8Array[]): Promise<void> {
    const outcomes: Outcome[] = []
    let malformed = 0
    for (const data of messages) {
      let values: unknown[]
      try {
        values = decodeMessage(data)
      } catch {
        malformed++
        continue
      }
      for (const value of values) {
        if (isOutcome(value)) outcomes.push(value)
        else malformed++
      }
    }
    if (malformed > 0) log.error({ malformed }, 'undecodable delivery outcomes in the outcome stream; dropped')
    // This node's own outcome rows waiting to be written go first. The outcomes are applied in one write
    // transaction, which runs after every write issued before it (those rows, a replay rewriting a
    // record): each outcome is compared with its record as it is then, never with an older read.
    this.writes.flush()
    const db = this.store.deliveries
    const applied: DeliveryRecord[] = []
    await db.transaction(() => {
      for (const outcome of outcomes) {
        const record = readRecord(this.store, outcome.account, outcome.webhookId, outcome.seq)
        // Erased or pruned meanwhile, or not a record of this node's: nothing to write.
        if (record === undefined || record.id !== outcome.id) continue
        if (!laterThan({ replayedAtMs: outcome.replayedAtMs, attempt: outcome.row.attempt }, record)) continue
        db.put([outcome.account, outcome.webhookId, outcome.seq, OUTCOME_KEY], asStored(encodeRecord(outcome.row)))
        applied.push({ ...record, ...outcome.row })
      }
    })
    for (const record of applied) this.applied(record)
  }
}

/** The first outcomes of `pending`, taken out of it: at most HOLDER_OUTCOMES_BATCH_MAX, and CLUSTER_PAGE_SIZE_MAX_BYTES. */
function batchOf (pending: Waiting[]): Waiting[] {
  let bytes = 0
  let n = 0
  while (n < pending.length && n < HOLDER_OUTCOMES_BATCH_MAX) {
    bytes += pending[n]!.bytes.length
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
