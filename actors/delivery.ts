// Webhook delivery: a relay turns outbox rows into delivery records (one per matching webhook) and
// hands them to the queue (embedded, or JetStream), and one delivery actor per webhook (a
// DeliveryWorker: batching, rate, in-flight bound, delay, retries) sends them. Every outcome is
// written next to its record (an outcome row: what an attempt changes, not the whole record again),
// so a restart resumes exactly where delivery stood: at-least-once, with the record's id as
// webhook-id on every attempt.

import type { Clock } from '../src/clock.js'
import type { Key, Store } from '../src/store/store.js'
import type { Registry } from '../src/store/registry.js'
import { ApiError } from '../src/errors.js'
import { log } from '../src/log.js'
import {
  DeliveryWorker, Sender, asStored, decodeRecord, decodeRow, encodeRecord, nextRunMs, recordOfRow, recordPrefix, systemScheduler,
  type AttemptRecord, type CompiledWebhook, type DeliveryContext, type DeliveryItem, type NextAttempt, type OutboxRow, type SendResult,
} from '../src/webhooks/index.js'

export const DELIVERY_STATUSES = ['pending', 'failed', 'delivered', 'dead'] as const
export type DeliveryStatus = typeof DELIVERY_STATUSES[number]

/**
 * One delivery of one outbox row to one webhook. Key in the deliveries db: [account, webhookId, seq];
 * what its attempts changed since (an OutcomeRow) is kept under [account, webhookId, seq, OUTCOME_KEY].
 */
export interface DeliveryRecord {
  id: string
  account: string
  webhookId: string
  seq: number
  status: DeliveryStatus
  item: DeliveryItem
  /** The attempt the next send will be. */
  attempt: number
  attempts: AttemptRecord[]
  dueMs: number
  createdAtMs: number
  updatedAtMs: number
  /** Set by a replay: a queue that deduplicates by id must tell this publish from the first. */
  replayedAtMs: number | null
  /** The node (data folder, Store.nodeId) whose store holds the record; absent on records of older releases. */
  node?: string
}

/** What an attempt changes of a record: written on its own, next to the record, when an attempt ends. */
type OutcomeRow = Pick<DeliveryRecord, 'status' | 'attempt' | 'attempts' | 'dueMs' | 'updatedAtMs'>

/**
 * The last element of an outcome row's key. The record's key is a prefix of it, so the outcome sorts
 * right after its record and a range of records reads both in one pass.
 */
const OUTCOME_KEY = 0

/** Outbox rows relayed per pass, and records listed per page at most. */
export const RELAY_BATCH_MAX = 500
/** Relay passes under way at once (waiting for their commit and publish while the next one builds). */
export const RELAY_PASSES_MAX = 4
export const LIST_PAGE_MAX = 500
/** Schedule runs create their records in pages of this many members. */
export const SCHEDULE_PAGE_MAX = 1000
/** A failed relay pass (the queue refused: NATS away) is tried again after 1 s, then 2, 4, … up to 30 s. */
export const RELAY_RETRY_MIN_MS = 1000
export const RELAY_RETRY_MAX_MS = 30_000
/** How often delivered records past their retention are deleted, and how many at most a pass. */
export const PRUNE_EVERY_MS = 60_000
export const PRUNE_BATCH_MAX = 10_000
/**
 * The hub's own writes (outcome rows, and the removal of relayed outbox rows) wait at most this long
 * to go to LMDB together, in one transaction, or go with the next relay pass's. Every commit costs a
 * sync of ten or so pages: at batchSize 1, one a millisecond took a third of the node's CPU.
 */
export const HUB_WRITE_DELAY_MS = 20
/**
 * Appended outbox rows wait this long for more before the relay reads them (one pass, one commit, for
 * all). Rows whose sync webhooks a request waits for are relayed at once.
 */
export const RELAY_DELAY_MS = 10
/** Appended outbox rows kept in memory for the relay at most (past that, it decodes them from LMDB). */
export const APPENDED_ROWS_MAX = 5000
/** A full worker queue (embedded) is offered its records left pending again after this. */
export const REFILL_AFTER_MS = 250
/** How often due schedules are looked for. */
export const SCHEDULE_TICK_MS = 1000

/** An outbox row as the relay reads it: its bytes too when it has them (not a row of an earlier release). */
interface AppendedRow {
  key: number
  value: OutboxRow
  bytes: Uint8Array | null
}

/**
 * What feeding a record to the local workers answers: 'taken' (a worker has it), 'busy' (its worker
 * is full: hand it out again later) or 'gone' (no such webhook here).
 */
export type FeedAnswer = 'taken' | 'busy' | 'gone'
export type Feed = (record: DeliveryRecord) => FeedAnswer

/**
 * Where delivery records wait between the relay and the delivery workers: in-process (embedded, the
 * deliveries db is the queue) or a JetStream stream shared by every node.
 */
export interface DeliveryQueue {
  /**
   * Whether the workers keep their retries (the group of a batch together, so its webhook-id stays
   * the same on every attempt), or the queue hands each retried record back when its delay has passed.
   */
  readonly retriesInMemory: boolean
  /** Start handing records to `feed` (the local workers): those waiting from before, then new ones. */
  start (feed: Feed): Promise<void>
  /**
   * Durably take new records; the relay removes their outbox rows once this resolves. `encoded`, when
   * given, holds each record's bytes (encodeRecord): a queue that sends bytes need not encode again.
   */
  publish (records: readonly DeliveryRecord[], encoded?: readonly Uint8Array[]): Promise<void>
  /**
   * An attempt of a record fed earlier ended: let it go, or keep it for another attempt after delayMs.
   * For a retry, `record` is as settled (its next attempt and history); otherwise as it was fed.
   */
  settle (record: DeliveryRecord, outcome: 'delivered' | 'retry' | 'dead', delayMs: number): void
  stop (): Promise<void>
}

/** Embedded: the deliveries db holds what waits; retries wait in the worker until they are due. */
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

export type AttemptObserver = (outcome: 'delivered' | 'retry' | 'dead', latencyMs: number, account: string, deliveries: number) => void

export interface DeliveryHubOptions {
  store: Store
  registry: Registry
  clock: Clock
  allowPrivate: boolean
  /** Defaults to the embedded queue. */
  queue?: DeliveryQueue
  /** Told each attempt's outcome and latency, with the webhook's account and the deliveries it settled (metrics, reports). */
  onAttempt?: AttemptObserver | null
  /** Resolves when the account's members index is complete (no re-indexing pass under way). */
  membersReady?: (account: string) => Promise<void>
  /** Items a worker holds at most (DELIVERY_LIMITS.queueItemsMaxDefault; smaller in tests). */
  workerQueueItemsMax?: number
  /** Delivered records older than this (by their last update) are deleted; 0 keeps them. Default 7 days. */
  retentionMs?: number
  /** HUB_WRITE_DELAY_MS and RELAY_DELAY_MS (longer in tests). */
  writeDelayMs?: number
  relayDelayMs?: number
}

export class DeliveryHub {
  private readonly store: Store
  private readonly registry: Registry
  private readonly clock: Clock
  private readonly sender: Sender
  private readonly queue: DeliveryQueue
  private readonly onAttempt: AttemptObserver | null
  private readonly membersReady: (account: string) => Promise<void>
  private readonly workers = new Map<string, DeliveryWorker>()
  /**
   * Records between their first attempt and their final outcome, as last settled: an outcome must not
   * be applied to a copy read from the db before the previous outcome's write committed.
   */
  private readonly live = new Map<string, DeliveryRecord>()
  private relaying: Promise<void> | null = null
  /** A relay pass that failed is tried again after this (doubling up to RELAY_RETRY_MAX_MS). */
  private relayRetryMs = RELAY_RETRY_MIN_MS
  private relayTimer: NodeJS.Timeout | null = null
  /** The wait of RELAY_DELAY_MS before the next relay. */
  private relayDelayTimer: NodeJS.Timeout | null = null
  private readonly relayNowBound = (): void => {
    this.relayDelayTimer = null
    this.relaySoon()
  }
  /** Per webhook whose worker refused records (embedded), the oldest seq left pending. */
  private readonly overflow = new Map<string, { account: string, webhookId: string, fromSeq: number }>()
  private refillTimer: NodeJS.Timeout | null = null
  private readonly workerQueueItemsMax: number | undefined
  private readonly retentionMs: number
  private readonly writeDelayMs: number
  private readonly relayDelayMs: number
  private pruneTimer: NodeJS.Timeout | null = null
  /** Requests waiting for the first attempt of their sync deliveries. */
  private readonly syncWaits = new Set<SyncWait>()
  /** The highest outbox seq the relay has handed to the queue. */
  private relayedThrough = 0
  /** Outbox rows appended while running and not relayed yet, oldest first: see readOutbox. */
  private appended: AppendedRow[] = []
  /** Per webhook, the bytes its new records have between their seq and their numbers (recordOfRow). */
  private readonly prefixes = new WeakMap<CompiledWebhook, Uint8Array>()
  /** Per schedule webhook, the time of its next run (before its delay). */
  private readonly nextRuns = new Map<string, number>()
  private scheduling: Promise<number> | null = null
  private scheduleTimer: NodeJS.Timeout | null = null
  private again = false
  /** Outcome rows not written yet (key, row, key, row, …): see flushWrites. */
  private outcomes: unknown[] = []
  /** Outbox rows relayed, to remove with the next hub writes. */
  private relayedRows: number[] = []
  /** Queue settles waiting for their outcome row's commit (record, outcome, delayMs, …). */
  private settles: unknown[] = []
  /** Those of writes issued and not committed yet. */
  private readonly writing = new Set<unknown[]>()
  private writeTimer: NodeJS.Timeout | null = null
  private readonly flushWritesBound = (): void => { this.flushWrites() }
  private stopped = false

  constructor ({
    store, registry, clock, allowPrivate, queue, onAttempt = null, membersReady = async () => {}, workerQueueItemsMax,
    retentionMs = 7 * 86_400_000, writeDelayMs = HUB_WRITE_DELAY_MS, relayDelayMs = RELAY_DELAY_MS,
  }: DeliveryHubOptions) {
    this.store = store
    this.registry = registry
    this.clock = clock
    this.sender = new Sender({ allowPrivate, clock })
    this.queue = queue ?? new EmbeddedQueue(store)
    this.onAttempt = onAttempt
    this.membersReady = membersReady
    this.workerQueueItemsMax = workerQueueItemsMax
    this.retentionMs = retentionMs
    this.writeDelayMs = writeDelayMs
    this.relayDelayMs = relayDelayMs
  }

  /** Start a worker per webhook, resume unfinished deliveries, and relay what the outbox holds. */
  async start (): Promise<void> {
    for (const webhook of this.registry.allWebhooks()) this.workers.set(slot(webhook.account, webhook.id), this.worker(webhook))
    this.registry.onWebhookChanged = (account, id, webhook) => { this.swap(account, id, webhook).catch(logFailure) }
    await this.queue.start(record => this.enqueue(record))
    this.store.onOutboxAppend = (seq, row, bytes) => {
      if (this.appended.length < APPENDED_ROWS_MAX) this.appended.push({ key: seq, value: row, bytes })
      this.relayLater()
    }
    this.relaySoon()
    this.scheduleTimer = setInterval(() => { this.runSchedules().catch(logFailure) }, SCHEDULE_TICK_MS)
    this.scheduleTimer.unref()
    if (this.retentionMs > 0) {
      this.pruneTimer = setInterval(() => { this.prune().catch(logFailure) }, PRUNE_EVERY_MS)
      this.pruneTimer.unref()
    }
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
      for (const record of this.recordsOf(webhook.account, webhook.id)) {
        if (record.createdAtMs >= cutoffMs || removed === PRUNE_BATCH_MAX) break
        if (record.status !== 'delivered' || record.updatedAtMs >= cutoffMs || this.live.has(record.id)) continue
        this.store.ignoreFailure(this.store.deliveries.remove([record.account, record.webhookId, record.seq, OUTCOME_KEY]), logFailure)
        last = this.store.deliveries.remove([record.account, record.webhookId, record.seq])
        removed++
      }
    }
    if (last !== null) await this.store.durable(last)
    return removed
  }

  /**
   * Run every schedule webhook whose time (plus its delayMs) has come: a full sync of its segments'
   * members, one delivery per member (the worker batches them by batchSize), or, without segments,
   * one call carrying the account and the time. Resolves with the number of runs made.
   */
  runSchedules (): Promise<number> {
    this.scheduling ??= this.scheduleOnce().finally(() => { this.scheduling = null })
    return this.scheduling
  }

  private async scheduleOnce (): Promise<number> {
    const nowMs = this.clock.nowMs()
    let runs = 0
    for (const webhook of this.registry.allWebhooks()) {
      const trigger = webhook.trigger
      if (trigger.kind !== 'schedule' || !webhook.enabled || this.stopped) continue
      const key = slot(webhook.account, webhook.id)
      let dueMs = this.nextRuns.get(key)
      if (dueMs === undefined) {
        // After a restart, the run after the last one made; a new schedule counts from now.
        const last = this.store.config.get([webhook.account, 'schedule-run', webhook.id]) as { lastRunMs: number } | undefined
        dueMs = nextRunMs(trigger.schedule, last?.lastRunMs ?? nowMs) ?? Number.MAX_SAFE_INTEGER
        this.nextRuns.set(key, dueMs)
      }
      if (nowMs < dueMs + webhook.delayMs) continue
      await this.runSchedule(webhook, trigger.segments, dueMs)
      await this.store.save(this.store.config, [webhook.account, 'schedule-run', webhook.id], { lastRunMs: dueMs })
      // Runs missed while down are not repeated one by one: a full sync supersedes them.
      this.nextRuns.set(key, nextRunMs(trigger.schedule, Math.max(dueMs, nowMs - webhook.delayMs)) ?? Number.MAX_SAFE_INTEGER)
      runs++
    }
    return runs
  }

  private async runSchedule (webhook: CompiledWebhook, segments: readonly string[], runMs: number): Promise<void> {
    const contexts: DeliveryContext[] = []
    const flush = async (): Promise<void> => {
      if (contexts.length === 0) return
      const nowMs = this.clock.nowMs()
      const records = contexts.splice(0).map(context => scheduledRecord(this.store.allocateSeq(), webhook, context, runMs, nowMs, this.store.nodeId))
      await this.store.durable(this.write(records)!)
      await this.queue.publish(records)
    }
    if (segments.length === 0) {
      contexts.push({ account: webhook.account, event: 'schedule' })
    } else {
      // A schedule webhook saved just now starts the indexing of its segments' members: wait for it.
      await this.membersReady(webhook.account)
    }
    for (const segment of segments) {
      for (const key of this.store.members.getKeys({ start: [webhook.account, segment] })) {
        const [account, seg, kind, id] = key as [string, string, string, string]
        if (account !== webhook.account || seg !== segment) break
        const context: DeliveryContext = { account, audience: segment, event: 'schedule' }
        if (kind === 'visitor') context.visitorId = id
        else context.profileId = id
        contexts.push(context)
        if (contexts.length === SCHEDULE_PAGE_MAX) await flush()
      }
    }
    await flush()
  }

  /** Relay in RELAY_DELAY_MS, with whatever is appended meanwhile. */
  private relayLater (): void {
    if (this.relaying !== null) this.again = true
    else if (this.relayDelayTimer === null && !this.stopped) this.relayDelayTimer = setTimeout(this.relayNowBound, this.relayDelayMs)
  }

  /** Relay once the writes that appended rows are committed (the relay reads committed rows only). */
  relaySoon (): void {
    if (this.stopped) return
    if (this.relaying !== null) {
      this.again = true
      return
    }
    if (this.relayDelayTimer !== null) {
      clearTimeout(this.relayDelayTimer)
      this.relayDelayTimer = null
    }
    this.relaying = this.store.root.committed.then(() => this.relay()).then(() => {
      this.relayRetryMs = RELAY_RETRY_MIN_MS
    }, (error: unknown) => {
      // The rows stay in the outbox (the queue did not take them: NATS away). Try again later even if
      // no new row comes to wake the relay.
      logFailure(error)
      if (this.stopped || this.relayTimer !== null) return
      this.relayTimer = setTimeout(() => {
        this.relayTimer = null
        this.relaySoon()
      }, this.relayRetryMs)
      this.relayTimer.unref()
      this.relayRetryMs = Math.min(this.relayRetryMs * 2, RELAY_RETRY_MAX_MS)
    }).finally(() => {
      this.relaying = null
      if (this.again) {
        this.again = false
        if (this.syncWaits.size > 0) this.relaySoon()
        else this.relayLater()
      }
    })
  }

  /** Resolves when everything appended so far has been relayed (tests, shutdown). */
  async settled (): Promise<void> {
    if (this.relayDelayTimer !== null) this.relaySoon()
    while (this.relaying !== null) await this.relaying
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
    let readFrom = this.relayedThrough + 1
    let previous: Promise<void> = Promise.resolve()
    const passes: Promise<void>[] = []
    for (;;) {
      const rows = this.readOutbox(readFrom)
      if (rows.length === 0 || this.stopped) break
      // The hub's writes waiting go in this pass's transaction.
      this.flushWrites()
      const created: DeliveryRecord[] = []
      const encoded: Uint8Array[] = []
      const nowMs = this.clock.nowMs()
      let last: Promise<boolean> | null = null
      for (const { key, value: row, bytes: rowBytes } of rows) {
        for (const webhook of this.registry.webhooksOf(row.account)) {
          if (!selects(webhook, row)) continue
          const record = newRecord(row, key, webhook, nowMs, this.store.nodeId)
          const bytes = rowBytes === null ? encodeRecord(record) : recordOfRow(rowBytes, key, this.prefixOf(webhook), nowMs)
          last = this.store.deliveries.put([record.account, record.webhookId, record.seq], asStored(bytes))
          created.push(record)
          encoded.push(bytes)
        }
      }
      const through = rows[rows.length - 1]!.key
      readFrom = through + 1
      const pass = Promise.all([previous, last, this.queue.publish(created, encoded)]).then(() => {
        for (const { key } of rows) this.relayedRows.push(key)
        this.writeSoon()
        this.relayedThrough = through
        if (this.syncWaits.size > 0) this.noteRelayed(created)
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
   * failed pass). Rows taken, and those left behind by them, leave the memory.
   */
  private readOutbox (readFrom: number): AppendedRow[] {
    const rows: AppendedRow[] = []
    const appended = this.appended
    let i = 0
    for (const key of this.store.outbox.getKeys({ start: readFrom, limit: RELAY_BATCH_MAX }) as Iterable<number>) {
      while (i < appended.length && appended[i]!.key < key) i++
      if (i < appended.length && appended[i]!.key === key) rows.push(appended[i++]!)
      else rows.push(storedRow(key, this.store.outbox.get(key)))
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

  /**
   * Wait (at most timeoutMs) until the sync deliveries of the account's outbox rows in (fromSeq, toSeq]
   * had their first attempt: how a request makes its sync webhook calls while it is handled. A failed
   * or slow call does not fail the request; the delivery goes on as an async retry.
   */
  awaitSync (account: string, fromSeq: number, toSeq: number, timeoutMs: number): Promise<void> {
    if (toSeq <= fromSeq) return Promise.resolve()
    return new Promise(resolve => {
      let done = false
      const wait: SyncWait = { account, fromSeq, toSeq, pending: new Set(), resolve: () => {} }
      const timer = setTimeout(() => wait.resolve(), timeoutMs)
      wait.resolve = () => {
        done = true
        clearTimeout(timer)
        this.syncWaits.delete(wait)
        resolve()
      }
      // The relay may have passed these rows already: their records not yet attempted count too,
      // read once the outcomes written so far are committed (those still waiting are in `settles`).
      this.writesCommitted().then(() => {
        if (done) return
        const settling = this.settlingIds()
        for (const webhook of this.registry.webhooksOf(account)) {
          if (webhook.mode !== 'sync') continue
          for (const record of this.recordsOf(account, webhook.id, fromSeq + 1, toSeq + 1)) {
            if (record.status === 'pending' && !settling.has(record.id)) wait.pending.add(record.id)
          }
        }
        this.syncWaits.add(wait)
        if (this.relayedThrough >= toSeq && wait.pending.size === 0) wait.resolve()
        else this.relaySoon()
      }, (error: unknown) => {
        logFailure(error)
        wait.resolve()
      })
    })
  }

  private noteRelayed (created: readonly DeliveryRecord[]): void {
    for (const wait of this.syncWaits) {
      for (const record of created) {
        if (record.account === wait.account && record.seq > wait.fromSeq && record.seq <= wait.toSeq && this.isSync(record)) wait.pending.add(record.id)
      }
      if (this.relayedThrough >= wait.toSeq && wait.pending.size === 0) wait.resolve()
    }
  }

  private isSync (record: DeliveryRecord): boolean {
    for (const webhook of this.registry.webhooksOf(record.account)) if (webhook.id === record.webhookId) return webhook.mode === 'sync'
    return false
  }

  private enqueue (record: DeliveryRecord): FeedAnswer {
    const worker = this.workers.get(slot(record.account, record.webhookId))
    if (worker === undefined) return 'gone' // webhook deleted: the record stays as it is, visible and replayable
    try {
      worker.enqueue([record.item], record.attempt, record.attempts, record.dueMs)
    } catch (error) {
      if (this.queue.retriesInMemory) this.noteOverflow(record, error)
      return 'busy'
    }
    // Settled from here even on a node whose store never held it (a record another node published).
    if (!this.live.has(record.id)) this.live.set(record.id, record)
    return 'taken'
  }

  /**
   * Embedded: a worker's queue was full, so this record stays pending on disk. The refill pass feeds
   * the webhook's records from there on again once its worker has room (JetStream hands a refused
   * record back by itself).
   */
  private noteOverflow (record: DeliveryRecord, error: unknown): void {
    const key = slot(record.account, record.webhookId)
    const known = this.overflow.get(key)
    if (known === undefined) log.warn({ err: error, webhook: record.webhookId }, 'delivery queue full; records left pending until it has room')
    if (known === undefined || record.seq < known.fromSeq) this.overflow.set(key, { account: record.account, webhookId: record.webhookId, fromSeq: record.seq })
    if (this.refillTimer === null && !this.stopped) {
      this.refillTimer = setTimeout(() => {
        this.refillTimer = null
        // The relay feeds records before their commit: read once what it and the hub wrote is committed.
        this.writesCommitted().then(() => this.refill(), logFailure)
      }, REFILL_AFTER_MS)
      this.refillTimer.unref()
    }
  }

  /** Feed the records left pending by a full queue, oldest first, until the queue is full again. */
  private refill (): void {
    const settling = this.settlingIds()
    for (const [key, entry] of [...this.overflow]) {
      if (!this.workers.has(key)) {
        this.overflow.delete(key)
        continue
      }
      let busyAt: number | null = null
      for (const record of this.recordsOf(entry.account, entry.webhookId, entry.fromSeq)) {
        if ((record.status !== 'pending' && record.status !== 'failed') || this.live.has(record.id) || settling.has(record.id)) continue
        if (this.enqueue(record) === 'busy') {
          busyAt = record.seq
          break
        }
      }
      if (busyAt === null) this.overflow.delete(key)
      else entry.fromSeq = busyAt
    }
  }

  private worker (webhook: CompiledWebhook): DeliveryWorker {
    return new DeliveryWorker({
      webhook,
      sender: this.sender,
      clock: this.clock,
      scheduler: systemScheduler,
      retryInMemory: this.queue.retriesInMemory,
      ...(this.workerQueueItemsMax === undefined ? {} : { queueItemsMax: this.workerQueueItemsMax }),
      onDelivered: (items, attempt) => this.settle(webhook, items, 'delivered', [attempt], 0),
      onRetry: (items, delayMs, attempt, next: NextAttempt) => {
        this.settle(webhook, items, 'retry', [attempt], delayMs, next.attempt)
      },
      onDead: (items, attempts) => this.settle(webhook, items, 'dead', attempts, 0, undefined, true),
      onError: logFailure,
    })
  }

  /** Write an attempt's outcome into each record, then tell the queue. */
  private settle (webhook: CompiledWebhook, items: DeliveryItem[], outcome: 'delivered' | 'retry' | 'dead', attempts: AttemptRecord[], delayMs: number, nextAttempt?: number, replaceAttempts = false): void {
    const nowMs = this.clock.nowMs()
    const status: DeliveryStatus = outcome === 'retry' ? 'failed' : outcome
    if (this.onAttempt !== null) this.onAttempt(outcome, attempts[attempts.length - 1]?.latencyMs ?? 0, webhook.account, items.length)
    const dueMs = outcome === 'retry' ? nowMs + delayMs : 0
    // The records of a batch usually had the same past: one outcome row (written as the same bytes) for them all.
    let shared: OutcomeRow | null = null
    for (const item of items) {
      const record = this.live.get(item.id) ?? this.read(webhook.account, webhook.id, seqOf(item.id))
      if (record === undefined) continue
      const seq = record.seq
      const fresh = replaceAttempts || record.attempts.length === 0
      const attempt = nextAttempt ?? record.attempt + 1
      let change: OutcomeRow
      if (fresh && shared !== null && shared.attempt === attempt) {
        change = shared
      } else {
        change = { status, attempt, attempts: fresh ? attempts : [...record.attempts, ...attempts], dueMs, updatedAtMs: nowMs }
        if (fresh) shared = change
      }
      let settled = record
      if (outcome === 'retry') {
        settled = { ...record, ...change }
        this.live.set(settled.id, settled)
      } else {
        this.live.delete(record.id)
      }
      // A record relayed by another node (JetStream) is that node's: its key here may be another record's.
      if (record.node === undefined || record.node === this.store.nodeId) {
        this.outcomes.push([webhook.account, webhook.id, seq, OUTCOME_KEY], change)
        this.settles.push(settled, outcome, delayMs)
        this.writeSoon()
      } else {
        this.queue.settle(settled, outcome, delayMs)
      }
      for (const wait of this.syncWaits) {
        if (wait.pending.delete(record.id) && wait.pending.size === 0 && this.relayedThrough >= wait.toSeq) wait.resolve()
      }
    }
  }

  /**
   * The hub's writes (outcome rows, removals of relayed outbox rows) go to LMDB together, at most
   * HUB_WRITE_DELAY_MS after the first of them, or with the next relay pass: one transaction for all
   * rather than one each (at batchSize 1 every answer comes in an event turn of its own). The queue
   * hears of an outcome once its row is committed (JetStream acks then): a crash before that makes
   * the attempt again, to the same webhook-id, and never leaves a record listed as it was before an
   * attempt the queue has forgotten.
   */
  private writeSoon (): void {
    this.writeTimer ??= setTimeout(this.flushWritesBound, this.writeDelayMs)
  }

  /** Issue the hub's waiting writes, and wait until they and every write before them are committed. */
  private async writesCommitted (): Promise<void> {
    this.flushWrites()
    await this.store.root.committed
  }

  /** The records whose outcome is not committed yet (they read as before it). */
  private settlingIds (): Set<string> {
    const ids = new Set<string>()
    for (const settles of [this.settles, ...this.writing]) {
      for (let i = 0; i < settles.length; i += 3) ids.add((settles[i] as DeliveryRecord).id)
    }
    return ids
  }

  /** Issue the hub's waiting writes now. Resolves once they are committed and the queue was told. */
  private flushWrites (): Promise<void> | null {
    if (this.writeTimer !== null) clearTimeout(this.writeTimer)
    this.writeTimer = null
    const { outcomes, relayedRows, settles } = this
    if (outcomes.length === 0 && relayedRows.length === 0) return null
    this.outcomes = []
    this.relayedRows = []
    this.settles = []
    let last: Promise<boolean> | null = null
    let row: unknown = null
    let stored: ReturnType<typeof asStored> | null = null
    for (let i = 0; i < outcomes.length; i += 2) {
      if (outcomes[i + 1] !== row) {
        row = outcomes[i + 1]
        stored = asStored(encodeRecord(row as OutcomeRow))
      }
      last = this.store.deliveries.put(outcomes[i] as Key, stored)
    }
    for (const key of relayedRows) last = this.store.outbox.remove(key)
    // A failed commit loses outcome rows (logged): the queue is told all the same, the delivery was made.
    this.writing.add(settles)
    const tell = (): void => {
      this.writing.delete(settles)
      for (let i = 0; i < settles.length; i += 3) {
        this.queue.settle(settles[i] as DeliveryRecord, settles[i + 1] as 'delivered' | 'retry' | 'dead', settles[i + 2] as number)
      }
    }
    return last!.then(tell, (error: unknown) => {
      logFailure(error)
      tell()
    })
  }

  private async swap (account: string, id: string, webhook: CompiledWebhook | null): Promise<void> {
    const key = slot(account, id)
    this.nextRuns.delete(key)
    const old = this.workers.get(key)
    this.workers.delete(key)
    if (webhook !== null) this.workers.set(key, this.worker(webhook))
    if (old === undefined) return
    // What the old worker had not sent yet goes to the new one (or stays pending on disk if deleted),
    // read once what the relay wrote is committed.
    const groups = await old.stop()
    await this.store.root.committed
    for (const group of groups) {
      for (const item of group.items) {
        const record = this.read(account, id, seqOf(item.id))
        if (record !== undefined) this.enqueue(record)
      }
    }
  }

  /** A webhook's delivery records as last settled, in sequence (creation) order, seq in [fromSeq, toSeq). */
  private recordsOf (account: string, webhookId: string, fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER): Iterable<DeliveryRecord> {
    return recordsIn(this.store, { start: [account, webhookId, fromSeq], end: [account, webhookId, toSeq] })
  }

  /** One delivery record as last settled. */
  private read (account: string, webhookId: string, seq: number): DeliveryRecord | undefined {
    const record = recordOf(this.store.deliveries.get([account, webhookId, seq]))
    if (record === undefined) return undefined
    const outcome = recordOf(this.store.deliveries.get([account, webhookId, seq, OUTCOME_KEY])) as OutcomeRow | undefined
    return outcome === undefined ? record : { ...record, ...outcome }
  }

  /** Write records as they are now, replacing any outcome written before. Resolves with the last write. */
  private write (records: readonly DeliveryRecord[]): Promise<boolean> | null {
    // Outcomes still waiting to be written go first: none may land over these records afterwards.
    this.flushWrites()
    let last: Promise<boolean> | null = null
    for (const record of records) {
      const key = [record.account, record.webhookId, record.seq]
      this.store.ignoreFailure(this.store.deliveries.remove([...key, OUTCOME_KEY]), logFailure)
      last = this.store.deliveries.put(key, asStored(encodeRecord(record)))
    }
    return last
  }

  /** A page of a webhook's deliveries, oldest first, optionally of one status. */
  async list (account: string, webhookId: string, status: DeliveryStatus | null, after: number, limit: number): Promise<{ deliveries: DeliveryRecord[], next: number | null }> {
    await this.writesCommitted()
    const deliveries: DeliveryRecord[] = []
    let next: number | null = null
    for (const record of this.recordsOf(account, webhookId, after + 1)) {
      if (status !== null && record.status !== status) continue
      if (deliveries.length === limit) {
        next = deliveries[deliveries.length - 1]!.seq
        break
      }
      deliveries.push(record)
    }
    return { deliveries, next }
  }

  /**
   * Re-queue deliveries: the ids given, or those that occurred in [fromMs, toMs) — dead ones, and with
   * explicit ids delivered ones too (a receiver that lost data). Each starts again from attempt 1.
   */
  async replay (account: string, webhookId: string, ids: readonly string[] | null, fromMs: number, toMs: number): Promise<number> {
    this.registry.webhook(account, webhookId) // 404 for an unknown webhook
    await this.writesCommitted()
    const nowMs = this.clock.nowMs()
    const chosen: DeliveryRecord[] = []
    if (ids !== null) {
      for (const id of ids) {
        const record = this.read(account, webhookId, seqOf(id))
        if (record === undefined || record.id !== id) throw new ApiError('invalid_field', `No delivery ${id} for this webhook.`, '/deliveryIds')
        if (record.status === 'dead' || record.status === 'delivered') chosen.push(record)
      }
    } else {
      for (const record of this.recordsOf(account, webhookId)) {
        if (record.status === 'dead' && record.item.occurredAtMs >= fromMs && record.item.occurredAtMs < toMs) chosen.push(record)
      }
    }
    const requeued = chosen.map(record => ({ ...record, status: 'pending' as const, attempt: 1, dueMs: 0, updatedAtMs: nowMs, replayedAtMs: nowMs }))
    const last = this.write(requeued)
    if (last !== null) await this.store.durable(last)
    await this.queue.publish(requeued.map(record => ({ ...record, attempts: [] })))
    return requeued.length
  }

  /**
   * One request to the webhook's target now, rendered, signed and sent as a delivery of `item` would
   * be (the panel's test delivery), with the webhook's timeout; recorded nowhere.
   */
  sendTest (webhook: CompiledWebhook, item: DeliveryItem): Promise<SendResult> {
    return this.sender.sendOnce(webhook, [item])
  }

  async stop (): Promise<void> {
    this.stopped = true
    if (this.scheduleTimer !== null) clearInterval(this.scheduleTimer)
    if (this.relayTimer !== null) clearTimeout(this.relayTimer)
    if (this.relayDelayTimer !== null) clearTimeout(this.relayDelayTimer)
    if (this.refillTimer !== null) clearTimeout(this.refillTimer)
    if (this.pruneTimer !== null) clearInterval(this.pruneTimer)
    await this.scheduling
    this.store.onOutboxAppend = null
    this.appended = []
    await this.settled()
    // Unsent items stay pending on disk (or unacknowledged in the stream): the next start resumes them.
    await Promise.all([...this.workers.values()].map(worker => worker.stop()))
    this.workers.clear()
    await this.flushWrites()
    await this.queue.stop()
    await this.sender.close()
  }
}

/**
 * The delivery records of a range of the deliveries db as last settled: each record with the outcome
 * row that follows it laid over it. Records written by releases before outcome rows read as they are.
 */
function * recordsIn (store: Store, range: { start?: unknown[], end?: unknown[] }): Generator<DeliveryRecord> {
  let record: DeliveryRecord | null = null
  for (const { key, value } of store.deliveries.getRange(range as { start?: Key, end?: Key })) {
    if ((key as unknown[]).length === 3) {
      if (record !== null) yield record
      record = recordOf(value) ?? null
    } else if (record !== null && (key as unknown[])[2] === record.seq) {
      yield { ...record, ...(recordOf(value) as OutcomeRow | undefined) }
      record = null
    }
  }
  if (record !== null) yield record
}

/**
 * A stored delivery record or outcome row: the bytes encodeRecord made (a Buffer, as LMDB gives a
 * msgpack bin), or a value stored as a plain msgpack record (a record of an earlier release).
 */
function recordOf (value: unknown): DeliveryRecord | undefined {
  return value instanceof Uint8Array ? decodeRecord(value) as DeliveryRecord : value as DeliveryRecord | undefined
}

interface SyncWait {
  account: string
  fromSeq: number
  toSeq: number
  /** Sync delivery ids of the range whose first attempt has not ended yet. */
  pending: Set<string>
  resolve: () => void
}

function slot (account: string, webhookId: string): string {
  return account + '\u0000' + webhookId
}

/** Delivery ids are `<outbox seq>.<webhook id>`: the record's key is derivable from the id. */
function seqOf (id: string): number {
  return Number(id.slice(0, id.indexOf('.')))
}

/** An outbox row read from LMDB: its bytes (a Buffer, as the db gives a msgpack bin), or a row of an earlier release. */
function storedRow (key: number, value: unknown): AppendedRow {
  return value instanceof Uint8Array ? { key, value: decodeRow(value), bytes: value } : { key, value: value as OutboxRow, bytes: null }
}

function selects (webhook: CompiledWebhook, row: OutboxRow): boolean {
  if (!webhook.enabled) return false
  const trigger = webhook.trigger
  if (row.kind === 'event') return trigger.kind === 'event' && trigger.events.has(row.event!)
  if (trigger.kind !== 'audience' || !trigger.segments.has(row.segment!)) return false
  return row.change === 'enter' ? trigger.onEnter : trigger.onExit
}

function newRecord (row: OutboxRow, seq: number, webhook: CompiledWebhook, nowMs: number, node: string): DeliveryRecord {
  const context: DeliveryContext = { account: row.account }
  if (row.visitorId !== undefined) context.visitorId = row.visitorId
  if (row.profileId !== undefined) context.profileId = row.profileId
  if (row.kind === 'event') {
    context.event = row.event!
    // `attribute.<name>` reads the event's own `attributes` field (template.ts): not stored twice.
    if (row.fields !== undefined) context.eventFields = row.fields
  } else {
    context.audience = row.segment!
    context.change = row.change!
  }
  if (row.attributes !== undefined) context.attributes = row.attributes
  const id = `${seq}.${webhook.id}`
  return {
    id,
    account: row.account,
    webhookId: webhook.id,
    seq,
    status: 'pending',
    item: { id, occurredAtMs: row.occurredAtMs, context },
    attempt: 1,
    attempts: [],
    dueMs: 0,
    createdAtMs: nowMs,
    updatedAtMs: nowMs,
    replayedAtMs: null,
    node,
  }
}

function scheduledRecord (seq: number, webhook: CompiledWebhook, context: DeliveryContext, runMs: number, nowMs: number, node: string): DeliveryRecord {
  const id = `${seq}.${webhook.id}`
  return {
    id, account: webhook.account, webhookId: webhook.id, seq, status: 'pending',
    item: { id, occurredAtMs: runMs, context },
    attempt: 1, attempts: [], dueMs: 0, createdAtMs: nowMs, updatedAtMs: nowMs, replayedAtMs: null, node,
  }
}

function noop (): void {}

function logFailure (error: unknown): void {
  log.error({ err: error }, 'webhook delivery failed')
}
