// The relay: committed outbox rows become delivery records (one per matching webhook), written to the
// deliveries db and published to the queue; then the rows go (with the hub's next writes).

import type { Clock } from '../clock.js'
import { asStored, decodeRow, encodeRecord, originBytes, recordOfRow, recordPrefix, type OutboxRow, type RowOrigin } from '../store/record-codec.js'
import type { WebhookLookup } from '../webhooks/lookup.js'
import type { Store } from '../store/store.js'
import type { CompiledWebhook } from '../webhooks/compile.js'
import type { HubWrites } from './hub-writes.js'
import { APPENDED_ROWS_MAX, RELAY_BATCH_MAX, RELAY_PASSES_MAX, RELAY_RETRY_DELAY_MAX_MS, RELAY_RETRY_DELAY_MIN_MS } from './limits.js'
import type { DeliveryQueue } from './queue.js'
import { newRecord, selects, type DeliveryRecord } from './record.js'
import type { RelayGate } from './relay-gate.js'

/** An outbox row as the relay reads it: its bytes too when it has them (not a row of an earlier release). */
export interface AppendedRow {
  key: number
  value: OutboxRow
  bytes: Uint8Array | null
  /** A row resent for another node (cluster mode): where it was first written, which names the webhook-id its deliveries are sent under. */
  origin: RowOrigin | null
}

/** Who hears of relayed records: the requests waiting for their sync webhooks (sync-waits.ts). */
export interface RelayListener {
  /** Whether someone waits: the relay then runs at once rather than after its delay. */
  readonly waiting: boolean
  /** Rows through `through` are relayed, as these records. */
  relayed (created: readonly DeliveryRecord[], through: number): void
}

export interface RelayOptions {
  store: Store
  registry: WebhookLookup
  clock: Clock
  queue: DeliveryQueue
  writes: HubWrites
  listener: RelayListener
  /** How long appended rows wait for more (RELAY_DELAY_MS). */
  delayMs: number
  onFailure: (error: unknown) => void
  /** Cluster mode: this node's id in every delivery id it makes (`<origin>:<seq>.<webhook>`); null in embedded mode. */
  idOrigin?: string | null
  /** Cluster mode: rows whose write is not acknowledged yet, not taken until let go; null in embedded mode. */
  gate?: RelayGate | null
}

export class Relay {
  private readonly idOrigin: string | null
  private readonly gate: RelayGate | null
  private readonly originBytes: Uint8Array | null
  private readonly store: Store
  private readonly registry: WebhookLookup
  private readonly clock: Clock
  private readonly queue: DeliveryQueue
  private readonly writes: HubWrites
  private readonly listener: RelayListener
  private readonly delayMs: number
  private readonly onFailure: (error: unknown) => void
  private relaying: Promise<void> | null = null
  private again = false
  /** A relay pass that failed is tried again after this (doubling up to RELAY_RETRY_DELAY_MAX_MS). */
  private retryMs = RELAY_RETRY_DELAY_MIN_MS
  private retryTimer: NodeJS.Timeout | null = null
  /** The wait of delayMs before the next relay. */
  private delayTimer: NodeJS.Timeout | null = null
  private readonly relayNowBound = (): void => {
    this.delayTimer = null
    this.relaySoon()
  }

  /** The highest outbox seq handed to the queue. */
  private through = 0
  /** Outbox rows appended while running and not relayed yet, oldest first: see readOutbox. */
  private appended: AppendedRow[] = []
  /** Per webhook, the bytes its new records have between their seq and their numbers (recordOfRow). */
  private readonly prefixes = new WeakMap<CompiledWebhook, Uint8Array>()
  private stopped = false

  constructor ({ store, registry, clock, queue, writes, listener, delayMs, onFailure, idOrigin = null, gate = null }: RelayOptions) {
    this.idOrigin = idOrigin
    this.gate = gate
    // Rows let go are relayed as appended ones are: at once for a waiting request, else after delayMs.
    gate?.onOpen(() => { if (this.listener.waiting) this.relaySoon(); else this.relayLater() })
    this.originBytes = idOrigin === null ? null : originBytes(idOrigin)
    this.store = store
    this.registry = registry
    this.clock = clock
    this.queue = queue
    this.writes = writes
    this.listener = listener
    this.delayMs = delayMs
    this.onFailure = onFailure
  }

  /** The highest outbox seq handed to the queue. */
  get relayedThrough (): number {
    return this.through
  }

  /** An outbox row was appended (not committed yet): relay it with the rows that follow it soon. */
  appendedRow (seq: number, row: OutboxRow, bytes: Uint8Array, origin: RowOrigin | null): void {
    if (this.stopped) return
    if (this.appended.length < APPENDED_ROWS_MAX) this.appended.push({ key: seq, value: row, bytes, origin })
    this.relayLater()
  }

  /** Relay in delayMs, with whatever is appended meanwhile. */
  private relayLater (): void {
    if (this.relaying !== null) this.again = true
    else if (this.delayTimer === null && !this.stopped) this.delayTimer = setTimeout(this.relayNowBound, this.delayMs)
  }

  /** Relay once the writes that appended rows are committed (the relay reads committed rows only). */
  relaySoon (): void {
    if (this.stopped) return
    if (this.relaying !== null) {
      this.again = true
      return
    }
    if (this.delayTimer !== null) {
      clearTimeout(this.delayTimer)
      this.delayTimer = null
    }
    this.relaying = this.store.root.committed.then(() => this.relay()).then(() => {
      this.retryMs = RELAY_RETRY_DELAY_MIN_MS
    }, (error: unknown) => {
      // The rows stay in the outbox (the queue did not take them: NATS away). Try again later even if
      // no new row comes to wake the relay.
      this.onFailure(error)
      if (this.stopped || this.retryTimer !== null) return
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null
        this.relaySoon()
      }, this.retryMs)
      this.retryTimer.unref()
      this.retryMs = Math.min(this.retryMs * 2, RELAY_RETRY_DELAY_MAX_MS)
    }).finally(() => {
      this.relaying = null
      if (this.again) {
        this.again = false
        if (this.listener.waiting) this.relaySoon()
        else this.relayLater()
      }
    })
  }

  /** Resolves when everything appended so far has been relayed (tests, shutdown). */
  async settled (): Promise<void> {
    if (this.delayTimer !== null) this.relaySoon()
    while (this.relaying !== null) await this.relaying
  }

  /** No more relaying: timers cleared, rows in memory dropped (they stay in the outbox). */
  stop (): void {
    this.stopped = true
    if (this.retryTimer !== null) clearTimeout(this.retryTimer)
    if (this.delayTimer !== null) clearTimeout(this.delayTimer)
    this.appended = []
  }

  /**
   * Records written, then in the queue, and only then the rows go, in that order in LMDB's one
   * write queue: a crash anywhere in between (even one that loses the last commits) leaves the rows,
   * relayed again to the same record ids (the same db keys; in JetStream the same message ids, which
   * the duplicate window absorbs). So no step waits for a sync to disk, and the removal is not awaited.
   *
   * Passes overlap: while a pass waits for its records' commit and its publish, the next one reads
   * and builds (at most RELAY_PASSES_MAX at once). They complete in order: a pass's rows go, and
   * relayedThrough moves past them, once its records are committed and published and every pass
   * before it completed. A pass that fails fails the passes after it too; the next relay reads again
   * from the first row not relayed.
   */
  private async relay (): Promise<void> {
    let readFrom = this.through + 1
    let previous: Promise<void> = Promise.resolve()
    const passes: Promise<void>[] = []
    for (;;) {
      const rows = this.readOutbox(readFrom)
      if (rows.length === 0 || this.stopped) break
      // The hub's writes waiting go in this pass's transaction.
      this.writes.flush()
      const created: DeliveryRecord[] = []
      const encoded: Uint8Array[] = []
      const nowMs = this.clock.nowMs()
      let last: Promise<boolean> | null = null
      for (const { key, value: row, bytes: rowBytes, origin } of rows) {
        for (const webhook of this.registry.webhooksOf(row.account)) {
          if (!selects(webhook, row)) continue
          const record = newRecord(row, key, webhook, nowMs, this.store.nodeId, this.idOrigin, origin)
          // A row resent for another node (cluster mode, rare) has its item sent under the id its first
          // place gave it (item.messageId), which the row's bytes do not hold: encoded as a whole.
          const bytes = rowBytes === null || record.item.messageId !== undefined ? encodeRecord(record) : recordOfRow(rowBytes, key, this.prefixOf(webhook), nowMs, this.originBytes)
          last = this.store.deliveries.put([record.account, record.webhookId, record.seq], asStored(bytes))
          created.push(record)
          encoded.push(bytes)
        }
      }
      const through = rows[rows.length - 1]!.key
      readFrom = through + 1
      const pass = Promise.all([previous, last, this.queue.publish(created, encoded)]).then(() => {
        this.writes.relayed(rows)
        this.through = through
        if (this.listener.waiting) this.listener.relayed(created, through)
      })
      pass.catch(noop) // seen through `previous`: every later pass, and the last await below, wait on it
      previous = pass
      passes.push(pass)
      if (passes.length === RELAY_PASSES_MAX) await passes.shift()
    }
    await previous
  }

  /**
   * Up to RELAY_BATCH_MAX committed outbox rows from readFrom on. LMDB says which rows there are (their
   * keys: only committed ones, never those of a failed transaction); their values come from memory,
   * as they were appended, when they are there (decoding them cost the relay a third of its time), and
   * from LMDB otherwise (rows from before a start, past APPENDED_ROWS_MAX, or read again after a
   * failed pass). Rows taken, and those left behind by them, leave the memory. The batch ends before
   * the first row the gate holds (its write not acknowledged yet).
   */
  private readOutbox (readFrom: number): AppendedRow[] {
    const rows: AppendedRow[] = []
    const appended = this.appended
    let i = 0
    // Rows resent for another node are few (after a takeover): their origins are looked up only from the first on.
    let firstResent = Infinity
    for (const key of this.store.outboxOrigins.getKeys({ start: readFrom, limit: 1 }) as Iterable<number>) firstResent = key
    for (const key of this.store.outbox.getKeys({ start: readFrom, limit: RELAY_BATCH_MAX }) as Iterable<number>) {
      if (this.gate !== null && this.gate.holds(key)) break
      while (i < appended.length && appended[i]!.key < key) i++
      if (i < appended.length && appended[i]!.key === key) rows.push(appended[i++]!)
      else rows.push(storedRow(key, this.store.outbox.get(key), key < firstResent ? null : this.store.outboxOrigin(key)))
    }
    if (i > 0) appended.splice(0, i)
    return rows
  }

  private prefixOf (webhook: CompiledWebhook): Uint8Array {
    let prefix = this.prefixes.get(webhook)
    if (prefix === undefined) {
      prefix = recordPrefix(webhook.id, webhook.account, this.store.nodeId)
      this.prefixes.set(webhook, prefix)
    }
    return prefix
  }
}

/** An outbox row read from LMDB: its bytes (a Buffer, as the db gives a msgpack bin), or a row of an earlier release. */
export function storedRow (key: number, value: unknown, origin: RowOrigin | null = null): AppendedRow {
  return value instanceof Uint8Array ? { key, value: decodeRow(value), bytes: value, origin } : { key, value: value as OutboxRow, bytes: null, origin }
}

function noop (): void {}
