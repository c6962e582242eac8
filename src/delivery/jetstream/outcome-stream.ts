// Cluster mode: the stream that carries attempts' outcomes to the node holding their records
// (holder-outcomes.ts says what travels and how a holder applies it). One stream per cluster,
// `BEACON_OUTCOMES_<cluster>`, file storage, BEACON_REPLICAS replicas, one subject per holder:
// `beacon.<cluster>.outcome.<holder>` (the holder's data folder id, the record's `node`).
//
// A work queue: a message goes once its holder acked it (after its LMDB commit), so the stream holds
// only outcomes not applied yet. Bounded: an outcome older than OUTCOMES_MAX_AGE_MS (7 days) goes (a
// holder gone for longer never gets it), and past OUTCOMES_MAX_BYTES (1 GiB, every holder together) the
// oldest go first. Each holder consumes its own subject through a durable consumer named by its data
// folder id: what is sent while it is down waits there, and it gets all of it when it is back.
//
// Publishing goes through the delivery transport's Publisher (PubAcks on one wildcard inbox, no
// per-message request machinery; resent under the same message id on reconnect, which the duplicate
// window absorbs); consuming through the delivery consumers' loop (consume-loop.ts).

import {
  AckPolicy, DeliverPolicy, DiscardPolicy, ReplayPolicy, RetentionPolicy, StorageType,
  type ConsumerMessages, type JetStreamClient, type JetStreamManager, type JsMsg,
} from '@nats-io/jetstream'
import { nanos } from '@nats-io/transport-node'
import type { Clock } from '../../clock.js'
import type { OutcomeTransport } from '../holder-outcomes.js'
import {
  ENSURE_INTERVAL_MIN_MS, OUTCOMES_ACK_PENDING_MAX, OUTCOMES_ACK_WAIT_MS, OUTCOMES_APPLY_MESSAGES_MAX,
  OUTCOMES_MAX_AGE_MS, OUTCOMES_MAX_BYTES, STOP_CONSUMES_WAIT_MAX_MS, STOP_NAK_DELAY_MS,
} from '../limits.js'
import { consumeForever } from './consume-loop.js'
import type { QueueLogger } from './options.js'
import type { Publisher } from './publisher.js'
import { apiErrorCode, CONSUMER_NOT_FOUND, ensureUntilDone, STREAM_NOT_FOUND } from './stream-setup.js'
import { withTimeout } from './wait.js'

export interface OutcomeStreamOptions {
  jsm: JetStreamManager
  js: JetStreamClient
  publisher: Publisher
  clock: Clock
  log: QueueLogger
  /** The cluster's name (BEACON_CLUSTER): in the stream's name and subjects. */
  cluster: string
  /** This node's data folder id: the subject it consumes, its consumer's name. */
  holder: string
  /** BEACON_REPLICAS. */
  replicas: number
  /** The duplicate window (the delivery stream's). */
  duplicateWindowMs: number
}

/** Applies a holder's outcome messages; resolves once they are committed (then they are acked). */
export type ApplyOutcomes = (messages: readonly Uint8Array[]) => Promise<void>

const NO_RECORDS: never[] = []
const TOKEN = /^[A-Za-z0-9_-]+$/

export function outcomeStreamName (cluster: string): string {
  return `BEACON_OUTCOMES_${cluster}`
}

export class OutcomeStream implements OutcomeTransport {
  readonly streamName: string
  readonly consumerName: string
  private readonly jsm: JetStreamManager
  private readonly js: JetStreamClient
  private readonly publisher: Publisher
  private readonly clock: Clock
  private readonly log: QueueLogger
  private readonly subjectPrefix: string
  private readonly replicas: number
  private readonly duplicateWindowMs: number
  private readonly running = new Set<ConsumerMessages>()
  private apply: ApplyOutcomes | null = null
  private consuming: Promise<void> | null = null
  /** Messages pulled and not applied yet, and the apply under way. */
  private incoming: JsMsg[] = []
  private applying: Promise<void> | null = null
  private ensuring: Promise<void> | null = null
  private lastEnsureMs = 0
  private stopped = false

  constructor (options: OutcomeStreamOptions) {
    if (!TOKEN.test(options.cluster)) throw new Error('OutcomeStream: the cluster name must be letters, digits, - or _')
    if (!TOKEN.test(options.holder)) throw new Error('OutcomeStream: the holder id must be letters, digits, - or _')
    this.jsm = options.jsm
    this.js = options.js
    this.publisher = options.publisher
    this.clock = options.clock
    this.log = options.log
    this.streamName = outcomeStreamName(options.cluster)
    this.subjectPrefix = `beacon.${options.cluster}.outcome`
    this.consumerName = options.holder
    this.replicas = options.replicas
    this.duplicateWindowMs = options.duplicateWindowMs
  }

  subjectOf (holder: string): string {
    return `${this.subjectPrefix}.${holder}`
  }

  /** Stores one message of outcomes for `holder`: resolves once JetStream stored it; `id` makes a resend a duplicate. */
  publish (holder: string, data: Uint8Array, id: string): Promise<void> {
    if (!TOKEN.test(holder)) return Promise.reject(new Error(`not a holder id: ${JSON.stringify(holder)}`))
    return this.publisher.publish(`outcomes for ${holder} were not stored by JetStream`,
      () => [{ subject: this.subjectOf(holder), data, msgId: id, records: NO_RECORDS, dueAtMs: 0 }])
      .catch((error: unknown) => {
        // No stream to take it (a server back without its store): create it again.
        this.ensureSoon()
        throw error
      })
  }

  /** Hands this node's outcome messages to `apply` from now on (the stream and consumer created if missing). */
  consume (apply: ApplyOutcomes): void {
    if (this.stopped || this.apply !== null) return
    this.apply = apply
    this.consuming = (async () => {
      await this.ensureUntilDone()
      await consumeForever({
        js: this.js, clock: this.clock, log: this.log, stream: this.streamName, consumer: this.consumerName,
        pullMessagesMax: OUTCOMES_ACK_PENDING_MAX, what: 'outcome', running: this.running, stopped: () => this.stopped,
        ensureSoon: () => this.ensureSoon(), onMessage: msg => this.onMessage(msg),
      })
    })()
  }

  /** Stops consuming: an apply under way ends (and is acked); what was pulled and not applied goes back to the stream. */
  async stop (): Promise<void> {
    if (this.stopped) return
    this.stopped = true
    await withTimeout(Promise.all([...this.running].map(messages => messages.close())), STOP_CONSUMES_WAIT_MAX_MS)
    await withTimeout(this.consuming ?? Promise.resolve(), STOP_CONSUMES_WAIT_MAX_MS)
    await withTimeout(this.applying ?? Promise.resolve(), STOP_CONSUMES_WAIT_MAX_MS)
    for (const msg of this.incoming.splice(0)) msg.nak(STOP_NAK_DELAY_MS)
  }

  /** Create the stream (or bring its bounds in line) and this holder's consumer if missing. */
  async ensure (): Promise<void> {
    await this.ensureStream()
    await this.ensureConsumer()
  }

  private onMessage (msg: JsMsg): void {
    if (this.stopped) {
      msg.nak(STOP_NAK_DELAY_MS)
      return
    }
    this.incoming.push(msg)
    this.applying ??= this.applyIncoming().finally(() => { this.applying = null })
  }

  /** What was pulled, applied in write transactions of up to OUTCOMES_APPLY_MESSAGES_MAX messages, each acked once committed. */
  private async applyIncoming (): Promise<void> {
    // Messages pulled in the same turn go together.
    await new Promise(resolve => setImmediate(resolve))
    while (this.incoming.length > 0 && this.apply !== null && !this.stopped) {
      const messages = this.incoming.splice(0, OUTCOMES_APPLY_MESSAGES_MAX)
      try {
        await this.apply(messages.map(msg => msg.data))
      } catch (error) {
        this.log.error({ err: error, messages: messages.length }, 'delivery outcomes could not be applied; they come back from the stream')
        for (const msg of messages) msg.nak(OUTCOMES_ACK_WAIT_MS)
        continue
      }
      for (const msg of messages) msg.ack()
    }
  }

  private ensureUntilDone (): Promise<void> {
    return ensureUntilDone({
      ensure: () => this.ensure(), stopped: () => this.stopped, log: this.log, what: 'outcome',
      trying: () => { this.lastEnsureMs = this.clock.nowMs() },
    })
  }

  /** ensure() in the background, retried until it succeeds (at most one at a time, at most once a second). */
  ensureSoon (): void {
    if (this.stopped || this.ensuring !== null || this.clock.nowMs() - this.lastEnsureMs < ENSURE_INTERVAL_MIN_MS) return
    this.ensuring = this.ensureUntilDone().finally(() => { this.ensuring = null })
  }

  private async ensureStream (): Promise<void> {
    const bounds = { max_age: nanos(OUTCOMES_MAX_AGE_MS), max_bytes: OUTCOMES_MAX_BYTES, discard: DiscardPolicy.Old }
    try {
      const info = await this.jsm.streams.info(this.streamName)
      if (info.config.max_age !== bounds.max_age || info.config.max_bytes !== bounds.max_bytes) {
        await this.jsm.streams.update(this.streamName, { ...info.config, ...bounds })
        this.log.info({ stream: this.streamName }, 'updated the bounds of the JetStream outcome stream')
      }
      return
    } catch (error) {
      if (apiErrorCode(error) !== STREAM_NOT_FOUND) throw error
    }
    try {
      await this.jsm.streams.add({
        name: this.streamName,
        subjects: [`${this.subjectPrefix}.*`],
        storage: StorageType.File,
        // A work queue: a message goes once its holder acked it.
        retention: RetentionPolicy.Workqueue,
        duplicate_window: nanos(this.duplicateWindowMs),
        num_replicas: this.replicas,
        ...bounds,
      })
      this.log.info({ stream: this.streamName }, 'created the JetStream outcome stream')
    } catch (error) {
      // Another node may have created it in between: fine if it is there now.
      await this.jsm.streams.info(this.streamName).catch(() => { throw error })
    }
  }

  private async ensureConsumer (): Promise<void> {
    const found = await this.jsm.consumers.info(this.streamName, this.consumerName).then(() => true, (error: unknown) => {
      if (apiErrorCode(error) !== CONSUMER_NOT_FOUND) throw error
      return false
    })
    if (found) return
    await this.jsm.consumers.add(this.streamName, {
      durable_name: this.consumerName,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      replay_policy: ReplayPolicy.Instant,
      filter_subject: this.subjectOf(this.consumerName),
      ack_wait: nanos(OUTCOMES_ACK_WAIT_MS),
      max_ack_pending: OUTCOMES_ACK_PENDING_MAX,
      max_deliver: -1,
    })
    this.log.info({ stream: this.streamName, consumer: this.consumerName }, 'created the JetStream outcome consumer')
  }
}
