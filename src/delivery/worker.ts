// DeliveryWorker: the delivery actor of one webhook, independent of the transport that feeds it (LMDB
// outbox or JetStream consumer). It holds items until occurredAtMs + delayMs, groups them into batches
// of up to batchSize, starts at most ratePerSecond requests a second and at most inflightMax at once,
// and reports every outcome through the callbacks given at construction.
//
// Retries belong to the caller by default: onRetry says how long to wait, and the caller re-enqueues
// (or naks its stream message with that delay) with the attempt number and history it is given. With
// retryInMemory (the embedded transport) the worker keeps the retry itself, on the injected scheduler,
// and onRetry is only a notification. Either way a retry is sent as the same group of items, so its
// webhook-id (see batch-id.ts) is the same on every attempt.
//
// Time comes from the injected Clock and Scheduler, so tests drive delays, rate and backoff.

import { systemClock, type Clock } from '../clock.js'
import { log } from '../log.js'
import { retryDelayMs } from './backoff.js'
import type { CompiledWebhook } from '../webhooks/compile.js'
import { DueHeap, type Pending } from './due-heap.js'
import { DELIVERY_LIMITS } from '../webhooks/limits.js'
import { TokenBucket } from './token-bucket.js'
import { attemptRecord, type AttemptRecord, type DeliveryItem, type SendResult } from '../webhooks/types.js'
import { WebhookError, WEBHOOK_ERRORS } from '../webhooks/webhook-error.js'

export interface Scheduler {
  setTimer (ms: number, fn: () => void): unknown
  clearTimer (handle: unknown): void
}

export const systemScheduler: Scheduler = {
  setTimer: (ms, fn) => setTimeout(fn, ms),
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
}

/** What the worker needs of a sender (the real Sender in production and tests). */
export interface AttemptSender {
  sendOnce (webhook: CompiledWebhook, items: readonly DeliveryItem[], timeoutMs?: number): Promise<SendResult>
}

/** The next attempt of a retry: pass both to enqueue(items, attempt, history). */
export interface NextAttempt {
  attempt: number
  history: AttemptRecord[]
}

/** A group not yet sent, as stop() returns it. Fresh items come as one group with attempt 1. */
export interface PendingDelivery {
  items: DeliveryItem[]
  attempt: number
  history: AttemptRecord[]
}

export interface DeliveryWorkerOptions {
  webhook: CompiledWebhook
  sender: AttemptSender
  onDelivered (items: DeliveryItem[], attempt: AttemptRecord): void
  /** Not the last attempt and retryable. Without retryInMemory the caller must re-enqueue after delayMs. */
  onRetry (items: DeliveryItem[], delayMs: number, attempt: AttemptRecord, next: NextAttempt): void
  /** Terminal failure, or the last attempt failed: the dead letter, with every attempt. */
  onDead (items: DeliveryItem[], attempts: AttemptRecord[]): void
  /** A callback threw. Default: logged. The worker carries on either way. */
  onError? (err: unknown): void
  clock?: Clock
  scheduler?: Scheduler
  /** Jitter source, [0, 1). */
  random?: () => number
  /** Cluster mode: this node's share of the webhook's rate, in (0, 1] (token-bucket.ts); default all of it. */
  rateShare?: () => number
  retryInMemory?: boolean
  inflightMax?: number
  queueItemsMax?: number
}

export class DeliveryWorker {
  readonly webhook: CompiledWebhook
  private readonly sender: AttemptSender
  private readonly onDelivered: DeliveryWorkerOptions['onDelivered']
  private readonly onRetry: DeliveryWorkerOptions['onRetry']
  private readonly onDead: DeliveryWorkerOptions['onDead']
  private readonly onError: (err: unknown) => void
  private readonly clock: Clock
  private readonly scheduler: Scheduler
  private readonly random: () => number
  private readonly retryInMemory: boolean
  private readonly inflightMax: number
  private readonly queueItemsMax: number
  private readonly heap: DueHeap
  private readonly bucket: TokenBucket | null
  private readonly pumpBound: () => void
  private readonly timerBound: () => void
  private queuedItems: number
  private inflight: number
  private seq: number
  private timer: unknown
  private timerDueMs: number
  private pumpScheduled: boolean
  private stopping: boolean
  private idleWaiters: (() => void)[]

  constructor (options: DeliveryWorkerOptions) {
    this.webhook = options.webhook
    this.sender = options.sender
    this.onDelivered = options.onDelivered
    this.onRetry = options.onRetry
    this.onDead = options.onDead
    this.onError = options.onError ?? logCallbackError
    this.clock = options.clock ?? systemClock
    this.scheduler = options.scheduler ?? systemScheduler
    this.random = options.random ?? Math.random
    this.retryInMemory = options.retryInMemory === true
    this.inflightMax = bounded(options.inflightMax ?? DELIVERY_LIMITS.inflightMaxDefault, 1, DELIVERY_LIMITS.inflightMaxMax, 'inflightMax')
    this.queueItemsMax = bounded(options.queueItemsMax ?? DELIVERY_LIMITS.queueItemsMaxDefault, 1, Number.MAX_SAFE_INTEGER, 'queueItemsMax')
    this.heap = new DueHeap()
    this.bucket = this.webhook.ratePerSecond === null ? null : new TokenBucket(this.webhook.ratePerSecond, this.clock.nowMs(), options.rateShare)
    this.pumpBound = this.pump.bind(this)
    this.timerBound = this.onTimer.bind(this)
    this.queuedItems = 0
    this.inflight = 0
    this.seq = 0
    this.timer = null
    this.timerDueMs = Infinity
    this.pumpScheduled = false
    this.stopping = false
    this.idleWaiters = []
  }

  /** Items held (waiting for delay, rate, a slot, or an in-memory retry), not counting those in flight. */
  get queued (): number {
    return this.queuedItems
  }

  /** Requests in flight. */
  get inFlight (): number {
    return this.inflight
  }

  /** Room left in the queue, in items: pull no more than this from the transport. */
  get capacity (): number {
    return Math.max(0, this.queueItemsMax - this.queuedItems)
  }

  /**
   * Accept items. attempt 1 (new items): each may be batched with others. attempt > 1 (a retry the
   * caller re-enqueues, with the history onRetry gave it): the items are sent together as given.
   * Nothing is sent before occurredAtMs + delayMs, nor before notBeforeMs (e.g. now + a retry delay,
   * for a caller that hands over a retry without a timer of its own).
   * All or nothing: throws WebhookError queue_full (nothing queued) when the items do not fit.
   */
  enqueue (items: readonly DeliveryItem[], attempt = 1, history: readonly AttemptRecord[] = [], notBeforeMs = 0): void {
    if (this.stopping) throw new WebhookError(WEBHOOK_ERRORS.stopped, `The delivery worker of webhook ${this.webhook.id} is stopped.`)
    if (items.length === 0) return
    const fixed = attempt > 1 || history.length > 0
    if (fixed && items.length > this.webhook.batchSize) {
      throw new WebhookError(WEBHOOK_ERRORS.invalid_batch, `A retry group has ${items.length} items; webhook ${this.webhook.id} sends at most ${this.webhook.batchSize} per request.`)
    }
    if (this.queuedItems + items.length > this.queueItemsMax) {
      throw new WebhookError(WEBHOOK_ERRORS.queue_full,
        `The delivery queue of webhook ${this.webhook.id} is full (${this.queuedItems} of ${this.queueItemsMax} items); retry after some are delivered.`)
    }
    if (fixed) {
      let dueMs = notBeforeMs
      for (const item of items) dueMs = Math.max(dueMs, this.dueOf(item))
      this.hold({ items: [...items], attempt, history: [...history], dueMs, seq: this.seq++, fixed: true })
    } else {
      for (const item of items) this.hold({ items: [item], attempt: 1, history: NO_HISTORY, dueMs: Math.max(notBeforeMs, this.dueOf(item)), seq: this.seq++, fixed: false })
    }
    this.schedulePump()
  }

  /**
   * Stop taking and starting work; let in-flight requests finish (their callbacks run), then return
   * everything not sent: fresh items as one group, retry groups as they are.
   */
  async stop (): Promise<PendingDelivery[]> {
    this.stopping = true
    this.clearTimer()
    if (this.inflight > 0) await new Promise<void>(resolve => this.idleWaiters.push(resolve))
    const fresh: DeliveryItem[] = []
    const groups: PendingDelivery[] = []
    for (const pending of this.heap.drain()) {
      if (pending.fixed) groups.push({ items: pending.items, attempt: pending.attempt, history: pending.history })
      else fresh.push(...pending.items)
    }
    this.queuedItems = 0
    if (fresh.length > 0) groups.unshift({ items: fresh, attempt: 1, history: [] })
    return groups
  }

  private dueOf (item: DeliveryItem): number {
    const dueMs = item.occurredAtMs + this.webhook.delayMs
    // A native destination batches: items due within one window go together (src/destinations).
    const windowMs = this.webhook.native?.batchWindowMs ?? 0
    return windowMs > 0 ? Math.ceil(dueMs / windowMs) * windowMs : dueMs
  }

  private hold (pending: Pending): void {
    this.heap.push(pending)
    this.queuedItems += pending.items.length
  }

  private schedulePump (): void {
    // One pump per tick: items enqueued in the same tick can share a batch.
    if (this.pumpScheduled) return
    this.pumpScheduled = true
    queueMicrotask(this.pumpBound)
  }

  private pump (): void {
    this.pumpScheduled = false
    if (this.stopping) return
    const nowMs = this.clock.nowMs()
    while (this.inflight < this.inflightMax) {
      const head = this.heap.peek()
      if (head === undefined) return
      if (head.dueMs > nowMs) return this.wakeAt(head.dueMs, nowMs)
      if (this.bucket !== null && !this.bucket.take(nowMs)) return this.wakeAt(nowMs + this.bucket.waitMs(nowMs), nowMs)
      void this.run(this.takeBatch(nowMs))
    }
  }

  /** The head group if it is a retry; else up to batchSize due fresh items, earliest first. */
  private takeBatch (nowMs: number): Pending {
    const head = this.heap.pop() as Pending
    this.queuedItems -= head.items.length
    if (head.fixed) return head
    for (let next = this.heap.peek(); next !== undefined && head.items.length < this.webhook.batchSize; next = this.heap.peek()) {
      if (next.fixed || next.dueMs > nowMs) break
      this.heap.pop()
      this.queuedItems -= 1
      head.items.push(next.items[0] as DeliveryItem)
    }
    return head
  }

  private async run (batch: Pending): Promise<void> {
    this.inflight++
    let result: SendResult
    try {
      result = await this.sender.sendOnce(this.webhook, batch.items)
    } catch (err) {
      // The Sender never throws; another AttemptSender might. Treat it like a connection failure.
      result = { outcome: 'retry', deliveryId: '', atMs: this.clock.nowMs(), latencyMs: 0, error: String(err), errorCode: 'connection' }
    }
    this.inflight--
    this.settle(batch, result)
    if (this.inflight === 0 && this.idleWaiters.length > 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve()
    }
    this.pump()
  }

  private settle (batch: Pending, result: SendResult): void {
    const record = attemptRecord(result)
    try {
      if (result.outcome === 'delivered') return this.onDelivered(batch.items, record)
      const history = [...batch.history, record]
      if (result.outcome === 'terminal' || batch.attempt >= this.webhook.maxAttempts) return this.onDead(batch.items, history)
      this.retry(batch, result, record, history)
    } catch (err) {
      this.onError(err)
    }
  }

  private retry (batch: Pending, result: SendResult, record: AttemptRecord, history: AttemptRecord[]): void {
    const delayMs = result.retryAfterMs ?? retryDelayMs(batch.attempt, this.random())
    const next: NextAttempt = { attempt: batch.attempt + 1, history }
    if (this.retryInMemory) {
      this.hold({ items: batch.items, attempt: next.attempt, history, dueMs: this.clock.nowMs() + delayMs, seq: this.seq++, fixed: true })
    }
    this.onRetry(batch.items, delayMs, record, next)
  }

  private wakeAt (dueMs: number, nowMs: number): void {
    if (this.timer !== null && this.timerDueMs <= dueMs) return
    this.clearTimer()
    this.timerDueMs = dueMs
    this.timer = this.scheduler.setTimer(Math.max(0, dueMs - nowMs), this.timerBound)
  }

  private onTimer (): void {
    this.timer = null
    this.timerDueMs = Infinity
    this.pump()
  }

  private clearTimer (): void {
    if (this.timer === null) return
    this.scheduler.clearTimer(this.timer)
    this.timer = null
    this.timerDueMs = Infinity
  }
}

/** The history of every fresh item: read, never written (a retry makes a new one). */
const NO_HISTORY = Object.freeze([]) as unknown as AttemptRecord[]

function logCallbackError (err: unknown): void {
  log.error({ err }, 'a webhook delivery callback threw')
}

function bounded (value: number, min: number, max: number, name: string): number {
  if (!Number.isInteger(value) || value < min || value > max) throw new RangeError(`${name} must be a whole number from ${min} to ${max}, not ${value}`)
  return value
}
