// Cluster mode: a JetStream stream of the cluster that every node reads through its own durable consumer,
// named by its data folder id, so what is stored while a node is down waits for it (within the
// stream's bounds) and it gets all of it when it is back. A node applies the messages it pulled in
// batches and acks each batch once applied (committed); a failed apply hands them out again. The
// outcome stream (outcome-stream.ts: a work queue, one subject per holder) and the erasure stream
// (erasure-stream.ts: limits retention, one subject every node reads) are two of these.
//
// Publishing goes through the delivery transport's Publisher (PubAcks on one wildcard inbox, no
// per-message request machinery; resent under the same message id on reconnect, which the duplicate
// window absorbs); consuming through the delivery consumers' loop (consume-loop.ts).

import {
  AckPolicy, DeliverPolicy, DiscardPolicy, ReplayPolicy, StorageType,
  type ConsumerMessages, type JetStreamClient, type JetStreamManager, type JsMsg, type RetentionPolicy,
} from '@nats-io/jetstream'
import { nanos } from '@nats-io/transport-node'
import type { Clock } from '../../clock.js'
import { ENSURE_INTERVAL_MIN_MS, STOP_CONSUMES_WAIT_MAX_MS, STOP_NAK_DELAY_MS } from '../limits.js'
import { consumeForever } from './consume-loop.js'
import type { QueueLogger } from './options.js'
import type { Publisher } from './publisher.js'
import { apiErrorCode, CONSUMER_NOT_FOUND, ensureUntilDone, STREAM_NOT_FOUND } from './stream-setup.js'
import { withTimeout } from './wait.js'

/** What the transport gives every node stream. */
export interface NodeStreamOptions {
  jsm: JetStreamManager
  js: JetStreamClient
  publisher: Publisher
  clock: Clock
  log: QueueLogger
  /** The cluster's name (BEACON_CLUSTER): in the stream's name and subjects. */
  cluster: string
  /** This node's data folder id: its consumer's name. */
  node: string
  /** BEACON_REPLICAS. */
  replicas: number
  /** The duplicate window (the delivery stream's). */
  duplicateWindowMs: number
}

/** What makes a node stream one kind: its stream, this node's consumer, its bounds and pace. */
export interface NodeStreamShape {
  streamName: string
  subjects: string[]
  /** The subject this node's consumer reads. */
  filterSubject: string
  retention: RetentionPolicy
  maxAgeMs: number
  maxBytes: number
  ackWaitMs: number
  ackPendingMax: number
  /** Messages given to one apply at most. */
  applyMessagesMax: number
  /** Names the stream in log lines ('outcome', 'erasure'). */
  what: string
}

/** Applies messages; resolves once they are committed (then they are acked). */
export type ApplyMessages = (messages: readonly Uint8Array[]) => Promise<void>

const NO_RECORDS: never[] = []
const TOKEN = /^[A-Za-z0-9_-]+$/

/** Whether `value` can be a subject token (a cluster name, a data folder id). */
export function isToken (value: string): boolean {
  return TOKEN.test(value)
}

export class NodeStream {
  readonly streamName: string
  readonly consumerName: string
  private readonly shape: NodeStreamShape
  private readonly jsm: JetStreamManager
  private readonly js: JetStreamClient
  private readonly publisher: Publisher
  private readonly clock: Clock
  private readonly log: QueueLogger
  private readonly replicas: number
  private readonly duplicateWindowMs: number
  private readonly running = new Set<ConsumerMessages>()
  private apply: ApplyMessages | null = null
  private consuming: Promise<void> | null = null
  /** Messages pulled and not applied yet, and the apply under way. */
  private incoming: JsMsg[] = []
  private applying: Promise<void> | null = null
  private ensuring: Promise<void> | null = null
  private lastEnsureMs = 0
  private stopped = false

  constructor (options: NodeStreamOptions, shape: NodeStreamShape) {
    if (!isToken(options.cluster)) throw new Error(`${shape.what} stream: the cluster name must be letters, digits, - or _`)
    if (!isToken(options.node)) throw new Error(`${shape.what} stream: the node id must be letters, digits, - or _`)
    this.shape = shape
    this.jsm = options.jsm
    this.js = options.js
    this.publisher = options.publisher
    this.clock = options.clock
    this.log = options.log
    this.streamName = shape.streamName
    this.consumerName = options.node
    this.replicas = options.replicas
    this.duplicateWindowMs = options.duplicateWindowMs
  }

  /** Hands this node's messages to `apply` from now on (the stream and consumer created if missing). */
  consume (apply: ApplyMessages): void {
    if (this.stopped || this.apply !== null) return
    this.apply = apply
    this.consuming = (async () => {
      await this.ensureUntilDone()
      await consumeForever({
        js: this.js, clock: this.clock, log: this.log, stream: this.streamName, consumer: this.consumerName,
        pullMessagesMax: this.shape.ackPendingMax, what: this.shape.what, running: this.running, stopped: () => this.stopped,
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

  /** Create the stream (or bring its bounds in line) and this node's consumer if missing. */
  async ensure (): Promise<void> {
    await this.ensureStream()
    await this.ensureConsumer()
  }

  /** ensure() in the background, retried until it succeeds (at most one at a time, at most once a second). */
  ensureSoon (): void {
    if (this.stopped || this.ensuring !== null || this.clock.nowMs() - this.lastEnsureMs < ENSURE_INTERVAL_MIN_MS) return
    this.ensuring = this.ensureUntilDone().finally(() => { this.ensuring = null })
  }

  /** Stores one message on `subject`: resolves once JetStream stored it; `id` makes a resend a duplicate. */
  protected publishTo (subject: string, data: Uint8Array, id: string, what: string): Promise<void> {
    return this.publisher.publish(what, () => [{ subject, data, msgId: id, records: NO_RECORDS, dueAtMs: 0 }])
      .catch((error: unknown) => {
        // No stream to take it (a server back without its store): create it again.
        this.ensureSoon()
        throw error
      })
  }

  private onMessage (msg: JsMsg): void {
    if (this.stopped) {
      msg.nak(STOP_NAK_DELAY_MS)
      return
    }
    this.incoming.push(msg)
    this.applying ??= this.applyIncoming().finally(() => { this.applying = null })
  }

  /** What was pulled, applied up to applyMessagesMax messages at a time, each acked once applied. */
  private async applyIncoming (): Promise<void> {
    // Messages pulled in the same turn go together.
    await new Promise(resolve => setImmediate(resolve))
    while (this.incoming.length > 0 && this.apply !== null && !this.stopped) {
      const messages = this.incoming.splice(0, this.shape.applyMessagesMax)
      try {
        await this.apply(messages.map(msg => msg.data))
      } catch (error) {
        this.log.error({ err: error, messages: messages.length }, `${this.shape.what} messages could not be applied; they come back from the stream`)
        for (const msg of messages) msg.nak(this.shape.ackWaitMs)
        continue
      }
      for (const msg of messages) msg.ack()
    }
  }

  private ensureUntilDone (): Promise<void> {
    return ensureUntilDone({
      ensure: () => this.ensure(), stopped: () => this.stopped, log: this.log, what: this.shape.what,
      trying: () => { this.lastEnsureMs = this.clock.nowMs() },
    })
  }

  private async ensureStream (): Promise<void> {
    const bounds = { max_age: nanos(this.shape.maxAgeMs), max_bytes: this.shape.maxBytes, discard: DiscardPolicy.Old }
    try {
      const info = await this.jsm.streams.info(this.streamName)
      if (info.config.max_age !== bounds.max_age || info.config.max_bytes !== bounds.max_bytes) {
        await this.jsm.streams.update(this.streamName, { ...info.config, ...bounds })
        this.log.info({ stream: this.streamName }, `updated the bounds of the JetStream ${this.shape.what} stream`)
      }
      return
    } catch (error) {
      if (apiErrorCode(error) !== STREAM_NOT_FOUND) throw error
    }
    try {
      await this.jsm.streams.add({
        name: this.streamName,
        subjects: this.shape.subjects,
        storage: StorageType.File,
        retention: this.shape.retention,
        duplicate_window: nanos(this.duplicateWindowMs),
        num_replicas: this.replicas,
        ...bounds,
      })
      this.log.info({ stream: this.streamName }, `created the JetStream ${this.shape.what} stream`)
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
      // From the stream's first message: a new node (or one back on a fresh data folder) gets everything
      // the stream still holds.
      deliver_policy: DeliverPolicy.All,
      replay_policy: ReplayPolicy.Instant,
      filter_subject: this.shape.filterSubject,
      ack_wait: nanos(this.shape.ackWaitMs),
      max_ack_pending: this.shape.ackPendingMax,
      max_deliver: -1,
    })
    this.log.info({ stream: this.streamName, consumer: this.consumerName }, `created the JetStream ${this.shape.what} consumer`)
  }
}
