// The delivery stream and its two durable pull consumers, created when missing (at start, and again
// in the background when a server comes back without its store).
//
// Stream: file storage, work-queue retention (a message goes once acked or termed, so the stream holds
// only what is unfinished), subjects `<prefix>.>`. Consumers (explicit ack): the main one
// (`<prefix>.*.*`) hands out new records; the retry one (`<prefix>.*.*.r`, no max ack pending) hands
// out records waiting for a retry or for room in their worker.

import { AckPolicy, DeliverPolicy, JetStreamApiError, RetentionPolicy, ReplayPolicy, StorageType, type JetStreamManager } from '@nats-io/jetstream'
import { nanos } from '@nats-io/transport-node'
import type { Clock } from '../../clock.js'
import { ENSURE_AT_START_MAX_MS, ENSURE_INTERVAL_MIN_MS, ENSURE_RETRY_DELAY_MAX_MS, ENSURE_RETRY_DELAY_MIN_MS } from '../limits.js'
import type { QueueLogger } from './options.js'
import { RETRY_TOKEN } from './subjects.js'
import { sleep } from './wait.js'

/** The NATS API error codes this transport tells apart. */
export const STREAM_NOT_FOUND = 10059
export const CONSUMER_NOT_FOUND = 10014

export function apiErrorCode (error: unknown): number | undefined {
  return error instanceof JetStreamApiError ? error.code : undefined
}

/** `ensure` tried until it succeeds or `stopped()`, pausing 250 ms doubling to 5 s; `trying` told before each try. */
export async function ensureUntilDone ({ ensure, stopped, log, what, trying }: {
  ensure: () => Promise<unknown>
  stopped: () => boolean
  log: QueueLogger
  /** Names the stream in log lines ('delivery', 'outcome', 'erasure'). */
  what: string
  trying: () => void
}): Promise<void> {
  for (let waitMs = ENSURE_RETRY_DELAY_MIN_MS; !stopped(); waitMs = Math.min(waitMs * 2, ENSURE_RETRY_DELAY_MAX_MS)) {
    trying()
    try {
      await ensure()
      return
    } catch (error) {
      if (stopped()) return
      log.warn({ err: error }, `could not check the JetStream ${what} stream; will retry`)
    }
    await sleep(waitMs)
  }
}

export interface StreamSetupOptions {
  jsm: JetStreamManager
  clock: Clock
  log: QueueLogger
  streamName: string
  subjectPrefix: string
  consumerName: string
  duplicateWindowMs: number
  ackWaitMs: number
  ackPendingMax: number
  /** Told when ensure() created the stream (`stream`) or a consumer. */
  onCreated: (stream: boolean) => void
}

export class StreamSetup {
  readonly streamName: string
  readonly consumerName: string
  private readonly jsm: JetStreamManager
  private readonly clock: Clock
  private readonly log: QueueLogger
  private readonly subjectPrefix: string
  private readonly duplicateWindowMs: number
  private readonly ackWaitMs: number
  private readonly ackPendingMax: number
  private readonly onCreated: (stream: boolean) => void
  private ensuring: Promise<void> | null = null
  private lastEnsureMs = 0
  private stopped = false

  constructor (options: StreamSetupOptions) {
    this.jsm = options.jsm
    this.clock = options.clock
    this.log = options.log
    this.streamName = options.streamName
    this.subjectPrefix = options.subjectPrefix
    this.consumerName = options.consumerName
    this.duplicateWindowMs = options.duplicateWindowMs
    this.ackWaitMs = options.ackWaitMs
    this.ackPendingMax = options.ackPendingMax
    this.onCreated = options.onCreated
  }

  /** The durable consumer of the records waiting for a retry. */
  get retryConsumerName (): string {
    return `${this.consumerName}-retry`
  }

  /** Create the stream and the consumers if missing; reuse them otherwise. True when it created one. */
  async ensure (): Promise<boolean> {
    const stream = await this.ensureStream()
    // The retry subjects first leave the main consumer (an older release filtered `<prefix>.>`): consumers
    // of a work-queue stream may not overlap.
    const main = await this.ensureConsumer(this.consumerName, `${this.subjectPrefix}.*.*`, this.ackPendingMax)
    const retry = await this.ensureConsumer(this.retryConsumerName, `${this.subjectPrefix}.*.*.${RETRY_TOKEN}`, -1)
    const created = stream || main || retry
    if (created) this.onCreated(stream)
    return created
  }

  /**
   * ensure() at start: a request that timed out is made again, for up to ENSURE_AT_START_MAX_MS. A
   * stream or consumer just created answers only once its leader is elected, and under load an election
   * can miss and take 4–9 s more (nats-server 2.10), past the 5 s request timeout: a cluster node failed
   * to start that way. So is "stream not found" from the consumer's check right after the stream was
   * made (the server that answered had not heard of it yet: a node failed to start so in a loaded
   * `npm test`). Any other error fails the start at once.
   */
  async ensureAtStart (): Promise<boolean> {
    const deadline = Date.now() + ENSURE_AT_START_MAX_MS
    for (let waitMs = ENSURE_RETRY_DELAY_MIN_MS; ; waitMs = Math.min(waitMs * 2, ENSURE_RETRY_DELAY_MAX_MS)) {
      try {
        return await this.ensure()
      } catch (error) {
        const passing = (error instanceof Error && error.name === 'TimeoutError') || apiErrorCode(error) === STREAM_NOT_FOUND
        if (!passing || Date.now() >= deadline) throw error
        this.log.warn({ err: error }, 'the JetStream delivery stream or a consumer was not ready at start; asking again')
      }
      await sleep(waitMs)
    }
  }

  /** ensure() in the background, retried until it succeeds (at most one at a time). */
  ensureSoon (): void {
    if (this.stopped || this.ensuring !== null || this.clock.nowMs() - this.lastEnsureMs < ENSURE_INTERVAL_MIN_MS) return
    this.ensuring = ensureUntilDone({
      ensure: () => this.ensure(), stopped: () => this.stopped, log: this.log, what: 'delivery',
      trying: () => { this.lastEnsureMs = this.clock.nowMs() },
    }).finally(() => { this.ensuring = null })
  }

  /** No more background checks. Answers the one under way, if any. */
  stop (): Promise<void> | null {
    this.stopped = true
    return this.ensuring
  }

  private async ensureStream (): Promise<boolean> {
    const subject = `${this.subjectPrefix}.>`
    try {
      const info = await this.jsm.streams.info(this.streamName)
      if (!info.config.subjects.includes(subject)) {
        this.log.warn({ stream: this.streamName, subjects: info.config.subjects, expected: subject }, 'the delivery stream exists with other subjects; using it as it is')
      }
      return false
    } catch (error) {
      if (apiErrorCode(error) !== STREAM_NOT_FOUND) throw error
    }
    try {
      await this.jsm.streams.add({
        name: this.streamName,
        subjects: [subject],
        storage: StorageType.File,
        // A work queue: a message goes once acked (or termed), so the stream holds only what is unfinished.
        retention: RetentionPolicy.Workqueue,
        duplicate_window: nanos(this.duplicateWindowMs),
        num_replicas: 1,
      })
      this.log.info({ stream: this.streamName, subject }, 'created the JetStream delivery stream')
    } catch (error) {
      // Another node may have created it in between: fine if it is there now.
      await this.jsm.streams.info(this.streamName).catch(() => { throw error })
    }
    return true
  }

  private async ensureConsumer (name: string, filter: string, ackPendingMax: number): Promise<boolean> {
    let info = await this.jsm.consumers.info(this.streamName, name).catch((error: unknown) => {
      if (apiErrorCode(error) !== CONSUMER_NOT_FOUND) throw error
      return null
    })
    if (info !== null && (info.config.filter_subject ?? '') !== filter) {
      // A consumer of an older release (filter `<prefix>.>`, or none). nats-server 2.9 takes a new filter
      // but then hands nothing out: made again instead (what it held goes to the new one; a message
      // another node was attempting may be attempted twice).
      await this.jsm.consumers.delete(this.streamName, name)
      this.log.info({ consumer: name, was: info.config.filter_subject ?? '', filter }, 'replacing the JetStream delivery consumer')
      info = null
    }
    if (info !== null) {
      const ackWait = nanos(this.ackWaitMs)
      if (info.config.ack_wait !== ackWait || info.config.max_ack_pending !== ackPendingMax) {
        // The settings this node runs with win (every node should run with the same ones).
        await this.jsm.consumers.update(this.streamName, name, { ack_wait: ackWait, max_ack_pending: ackPendingMax })
        this.log.info({ consumer: name, ackWaitMs: this.ackWaitMs, ackPendingMax }, 'updated the JetStream delivery consumer')
      }
      return false
    }
    try {
      await this.jsm.consumers.add(this.streamName, {
        durable_name: name,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        replay_policy: ReplayPolicy.Instant,
        filter_subject: filter,
        ack_wait: nanos(this.ackWaitMs),
        max_ack_pending: ackPendingMax,
        max_deliver: -1,
      })
      this.log.info({ stream: this.streamName, consumer: name }, 'created the JetStream delivery consumer')
    } catch (error) {
      await this.jsm.consumers.info(this.streamName, name).catch(() => { throw error })
    }
    return true
  }
}
