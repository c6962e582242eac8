// Webhook delivery: the relay turns outbox rows into delivery records (one per matching webhook) and
// hands them to the queue (embedded, or JetStream), and one delivery worker per webhook (batching,
// rate, in-flight bound, delay, retries) sends them. Every outcome is written next to its record (an
// outcome row: what an attempt changes, not the whole record again), so a restart resumes exactly
// where delivery stood: at-least-once, with the record's id as webhook-id on every attempt.
//
// The hub owns the workers and the records they hold; its jobs are parts of their own: the relay
// (relay.ts), its batched writes (hub-writes.ts), schedules (schedules.ts), sync waits
// (sync-waits.ts), the refill of full workers (overflow.ts) and the deliveries log (history.ts).

import type { Clock } from '../clock.js'
import { log } from '../log.js'
import type { WebhookChanged, WebhookLookup } from '../webhooks/lookup.js'
import type { Listeners } from '../listeners.js'
import type { OutboxAppended, Store } from '../store/store.js'
import type { CompiledWebhook } from '../webhooks/compile.js'
import { Sender } from '../webhooks/sender.js'
import type { AttemptRecord, DeliveryItem, SendResult } from '../webhooks/types.js'
import { EmbeddedQueue } from './embedded-queue.js'
import { DeliveryHistory } from './history.js'
import { HolderOutcomes, type OutcomeTransport } from './holder-outcomes.js'
import { HubWrites } from './hub-writes.js'
import { HUB_WRITE_DELAY_MS, RELAY_DELAY_MS, RETENTION_DEFAULT_MS } from './limits.js'
import { Overflow } from './overflow.js'
import type { DeliveryQueue, FeedAnswer } from './queue.js'
import { laterThan, slot, type DeliveryOutcome, type DeliveryRecord, type DeliveryStatus, type OutcomeRow } from './record.js'
import { readRecordById } from './records-db.js'
import { Relay } from './relay.js'
import { Schedules, type ScheduleCluster } from './schedules.js'
import { NO_REPORTS, type ScheduledReports } from './scheduled-reports.js'
import type { RelayGate } from './relay-gate.js'
import { SyncWaits } from './sync-waits.js'
import { DeliveryWorker, systemScheduler, type NextAttempt } from './worker.js'

export type AttemptObserver = (outcome: DeliveryOutcome, latencyMs: number, account: string, deliveries: number) => void

export interface DeliveryHubOptions {
  store: Store
  registry: WebhookLookup
  /** Where the hub hears of webhooks saved or deleted (from start on) and of outbox rows appended (from start to stop). */
  webhookChanged: Listeners<WebhookChanged>
  outboxAppended: Listeners<OutboxAppended>
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
  /**
   * Cluster mode: delivery ids carry this node's id (`<node>:<seq>.<webhook>`, every node's outbox
   * counting from 1; a row resent for another node is sent under the webhook-id it had there),
   * schedules run once per cluster (schedules.ts), and outcomes of records other nodes hold go back to
   * them (holder-outcomes.ts, stored for them through `outcomes`), and each webhook's rate is shared
   * by the nodes (`rateShare`: this node's share, token-bucket.ts). Null in embedded mode.
   */
  cluster?: { idOrigin: string, schedules: ScheduleCluster, outcomes?: OutcomeTransport | null, rateShare?: () => number } | null
  /** Cluster mode: the relay takes no row whose write the changelog has not acknowledged yet (relay-gate.ts). */
  relayGate?: RelayGate | null
  /** Saved reports with a delivery, run by the schedules (embedded mode with a retained event log; default none). */
  reports?: ScheduledReports
}

export class DeliveryHub {
  private readonly store: Store
  private readonly registry: WebhookLookup
  private readonly webhookChanged: Listeners<WebhookChanged>
  private readonly outboxAppended: Listeners<OutboxAppended>
  private readonly appendedRow: OutboxAppended = (seq, row, bytes, origin) => { this.relay.appendedRow(seq, row, bytes, origin) }
  private readonly clock: Clock
  private readonly sender: Sender
  private readonly queue: DeliveryQueue
  private readonly onAttempt: AttemptObserver | null
  private readonly workers = new Map<string, DeliveryWorker>()
  /**
   * Records between their first attempt and their final outcome, as last settled: an outcome must not
   * be applied to a copy read from the db before the previous outcome's write committed.
   */
  private readonly live = new Map<string, DeliveryRecord>()
  private readonly workerQueueItemsMax: number | undefined
  private readonly rateShare: (() => number) | undefined
  private readonly writes: HubWrites
  private readonly relay: Relay
  private readonly syncWaits: SyncWaits
  private readonly schedules: Schedules
  private readonly overflow: Overflow
  private readonly history: DeliveryHistory
  /** Cluster mode: outcomes of other nodes' records carried to them, and theirs of this node's applied. */
  private readonly holderOutcomes: HolderOutcomes | null

  constructor ({
    store, registry, webhookChanged, outboxAppended, clock, allowPrivate, queue, onAttempt = null, membersReady = async () => {}, workerQueueItemsMax,
    retentionMs = RETENTION_DEFAULT_MS, writeDelayMs = HUB_WRITE_DELAY_MS, relayDelayMs = RELAY_DELAY_MS, cluster = null, relayGate = null, reports = NO_REPORTS,
  }: DeliveryHubOptions) {
    const idOrigin = cluster?.idOrigin ?? null
    this.store = store
    this.registry = registry
    this.webhookChanged = webhookChanged
    this.outboxAppended = outboxAppended
    this.clock = clock
    this.sender = new Sender({ allowPrivate, clock })
    this.queue = queue ?? new EmbeddedQueue(store)
    this.onAttempt = onAttempt
    this.workerQueueItemsMax = workerQueueItemsMax
    this.rateShare = cluster?.rateShare
    const onFailure = logFailure
    this.writes = new HubWrites({ store, queue: this.queue, delayMs: writeDelayMs, onFailure })
    this.syncWaits = new SyncWaits({ store, registry, writes: this.writes, onFailure })
    this.relay = new Relay({ store, registry, clock, queue: this.queue, writes: this.writes, listener: this.syncWaits, delayMs: relayDelayMs, onFailure, idOrigin, gate: relayGate })
    this.schedules = new Schedules({ store, registry, clock, queue: this.queue, writes: this.writes, membersReady, onFailure, idOrigin, cluster: cluster?.schedules ?? null, reports })
    const isLive = (id: string): boolean => this.live.has(id)
    this.overflow = new Overflow({
      store, writes: this.writes, isLive, onFailure,
      hasWorker: key => this.workers.has(key),
      enqueue: record => this.enqueue(record),
    })
    this.history = new DeliveryHistory({
      store, registry, clock, queue: this.queue, writes: this.writes, retentionMs, isLive, onFailure,
      relayed: () => this.relay.settled(),
    })
    const outcomes = cluster?.outcomes ?? null
    this.holderOutcomes = outcomes === null ? null : new HolderOutcomes({
      store, writes: this.writes, transport: outcomes,
      // A live copy here (an attempt this node made before) follows the outcome another node's attempt had;
      // a request here waiting for its sync webhooks hears of their attempts by other nodes.
      applied: record => {
        this.syncWaits.attempted(record.id, this.relay.relayedThrough)
        if (!this.live.has(record.id)) return
        if (record.status === 'failed') this.live.set(record.id, record)
        else this.live.delete(record.id)
      },
    })
  }

  /** Start a worker per webhook, resume unfinished deliveries, and relay what the outbox holds. */
  async start (): Promise<void> {
    for (const webhook of this.registry.allWebhooks()) this.workers.set(slot(webhook.account, webhook.id), this.worker(webhook))
    this.webhookChanged.add((account, id, webhook) => { this.swap(account, id, webhook).catch(logFailure) })
    await this.queue.start(record => this.enqueue(record))
    this.holderOutcomes?.start()
    this.outboxAppended.add(this.appendedRow)
    this.relay.relaySoon()
    this.schedules.start()
    this.history.start()
  }

  /** Delete delivered records past their retention (history.ts). Resolves with how many went. */
  prune (): Promise<number> {
    return this.history.prune()
  }

  /** Run every schedule webhook and saved report delivery whose time has come (schedules.ts). Resolves with the number of runs made. */
  runSchedules (): Promise<number> {
    return this.schedules.run()
  }

  /** Relay once the writes that appended rows are committed (the relay reads committed rows only). */
  relaySoon (): void {
    this.relay.relaySoon()
  }

  /** The highest outbox seq handed to the queue (every row at or below it was published): the entity log's watermark. */
  get relayedThrough (): number {
    return this.relay.relayedThrough
  }

  /** Resolves when everything appended so far has been relayed (tests, shutdown). */
  settled (): Promise<void> {
    return this.relay.settled()
  }

  /**
   * Wait (at most timeoutMs) until the sync deliveries of the account's outbox rows in (fromSeq, toSeq]
   * had their first attempt: how a request makes its sync webhook calls while it is handled. A failed
   * or slow call does not fail the request; the delivery goes on as an async retry.
   */
  awaitSync (account: string, fromSeq: number, toSeq: number, timeoutMs: number): Promise<void> {
    return this.syncWaits.wait(account, fromSeq, toSeq, timeoutMs, this.relay)
  }

  /** A page of a webhook's deliveries, oldest first, optionally of one status. */
  list (account: string, webhookId: string, status: DeliveryStatus | null, after: number, limit: number): Promise<{ deliveries: DeliveryRecord[], next: number | null }> {
    return this.history.list(account, webhookId, status, after, limit)
  }

  /** Which of these ids this node's store holds records of (history.ts). */
  held (account: string, webhookId: string, ids: readonly string[]): Promise<string[]> {
    return this.history.held(account, webhookId, ids)
  }

  /** Re-queue dead (or, by id, delivered) deliveries from attempt 1 (history.ts). */
  replay (account: string, webhookId: string, ids: readonly string[] | null, fromMs: number, toMs: number): Promise<number> {
    return this.history.replay(account, webhookId, ids, fromMs, toMs)
  }

  /**
   * Deliveries made outside the outbox (a replay of the event log, src/jobs/replay.ts): written with
   * whatever `alongside` writes (issued in the same event turn, so they commit together), durable, then
   * handed to the queue like the relay's. Resolves once the queue took them.
   */
  async deliver (records: readonly DeliveryRecord[], alongside: () => Promise<boolean> | null): Promise<void> {
    const write = this.writes.writeRecords(records)
    const other = alongside()
    if (write !== null) await this.store.durable(write)
    if (other !== null) await this.store.durable(other)
    await this.queue.publish(records)
  }

  /** Erasure: remove the account's outbox rows and delivery records of these people (history.ts). */
  forget (account: string, profileIds: ReadonlySet<string>, visitorIds: ReadonlySet<string>): Promise<number> {
    return this.history.forget(account, profileIds, visitorIds)
  }

  /**
   * One request to the webhook's target now, rendered, signed and sent as a delivery of `item` would
   * be (the panel's test delivery), with the webhook's timeout; recorded nowhere.
   */
  sendTest (webhook: CompiledWebhook, item: DeliveryItem): Promise<SendResult> {
    return this.sender.sendOnce(webhook, [item])
  }

  async stop (): Promise<void> {
    this.relay.stop()
    this.overflow.stop()
    this.history.stop()
    await this.schedules.stop()
    this.outboxAppended.delete(this.appendedRow)
    await this.relay.settled()
    // Unsent items stay pending on disk (or unacknowledged in the stream): the next start resumes them.
    await Promise.all([...this.workers.values()].map(worker => worker.stop()))
    this.workers.clear()
    await this.writes.flush()
    // The outcomes of other nodes' records gathered so far stored for their holders, which settles their
    // delivery messages, before the queue gives back what is not settled.
    await this.holderOutcomes?.stop()
    await this.queue.stop()
    await this.sender.close()
  }

  private async swap (account: string, id: string, webhook: CompiledWebhook | null): Promise<void> {
    const key = slot(account, id)
    this.schedules.forget(account, id)
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
        // A record another node relayed (JetStream) is known here only as fed (live).
        const record = readRecordById(this.store, account, id, item.id) ?? this.live.get(item.id)
        if (record !== undefined) this.enqueue(record)
      }
    }
  }

  private enqueue (record: DeliveryRecord): FeedAnswer {
    const worker = this.workers.get(slot(record.account, record.webhookId))
    if (worker === undefined) return 'gone' // webhook deleted: the record stays as it is, visible and replayable
    try {
      worker.enqueue([record.item], record.attempt, record.attempts, record.dueMs)
    } catch (error) {
      if (this.queue.retriesInMemory) this.overflow.note(record, error)
      return 'busy'
    }
    // Settled from here even on a node whose store never held it (a record another node published); a
    // record fed again at a later attempt (another node made the one before) replaces what was kept.
    const live = this.live.get(record.id)
    if (live === undefined || laterThan(record, live)) this.live.set(record.id, record)
    return 'taken'
  }

  private worker (webhook: CompiledWebhook): DeliveryWorker {
    return new DeliveryWorker({
      webhook,
      sender: this.sender,
      clock: this.clock,
      scheduler: systemScheduler,
      retryInMemory: this.queue.retriesInMemory,
      rateShare: this.rateShare,
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
  private settle (webhook: CompiledWebhook, items: DeliveryItem[], outcome: DeliveryOutcome, attempts: AttemptRecord[], delayMs: number, nextAttempt?: number, replaceAttempts = false): void {
    const nowMs = this.clock.nowMs()
    const status: DeliveryStatus = outcome === 'retry' ? 'failed' : outcome
    if (this.onAttempt !== null) this.onAttempt(outcome, attempts[attempts.length - 1]?.latencyMs ?? 0, webhook.account, items.length)
    const dueMs = outcome === 'retry' ? nowMs + delayMs : 0
    // The records of a batch usually had the same past: one outcome row (written as the same bytes) for them all.
    let shared: OutcomeRow | null = null
    for (const item of items) {
      const record = this.live.get(item.id) ?? readRecordById(this.store, webhook.account, webhook.id, item.id)
      if (record === undefined) continue
      const fresh = replaceAttempts || record.attempts.length === 0
      const attempt = nextAttempt ?? record.attempt + 1
      let change: OutcomeRow
      if (fresh && shared !== null && shared.attempt === attempt) {
        change = shared
      } else {
        change = { status, attempt, attempts: fresh ? attempts : [...record.attempts, ...attempts], dueMs, updatedAtMs: nowMs }
        if (fresh) shared = change
      }
      const own = record.node === undefined || record.node === this.store.nodeId
      let settled = record
      if (outcome === 'retry') settled = { ...record, ...change }
      // Another node's record is handed back to the stream for its retry: fed again then, as settled.
      if (outcome === 'retry' && own) this.live.set(settled.id, settled)
      else this.live.delete(record.id)
      // A record relayed by another node (JetStream) is that node's: its key here may be another record's.
      if (own) {
        this.writes.outcome(webhook.account, webhook.id, record.seq, change, { record: settled, outcome, delayMs })
      } else if (this.holderOutcomes === null) {
        this.queue.settle(settled, outcome, delayMs)
      } else {
        // Cluster mode: the holder writes it (holder-outcomes.ts); its message is settled once the
        // outcome is stored for the holder, so a crash in between attempts it again rather than lose it.
        this.holderOutcomes.send(record, change, () => this.queue.settle(settled, outcome, delayMs))
      }
      this.syncWaits.attempted(record.id, this.relay.relayedThrough)
    }
  }
}

function logFailure (error: unknown): void {
  log.error({ err: error }, 'webhook delivery failed')
}
