// The JetStream transport of webhook deliveries (BEACON_NATS_URL): the relay publishes delivery
// records to a JetStream stream shared by every node (stream-setup.ts), and every node's delivery
// workers pull them from durable consumers (consumer.ts), ack after the receiver's 2xx, hand a retry
// back to wait, and term a dead one.
//
// A publish sends the records of one subject (subjects.ts) as messages of up to PUBLISH_RECORDS_MAX
// records; message id = the first record's id (plus the replay time for a replay, plus `+<count>`
// for several): a relay that publishes the same rows again after a crash is absorbed by the stream's
// duplicate window. The relay removes outbox rows only once publish() resolved, i.e. once every
// message has its PubAck (publisher.ts); while NATS is away publish() waits and re-sends (same
// message ids), and it rejects only after publishGiveUpMs, leaving the rows in the outbox for a later
// relay pass.
//
// NATS restarts: nats.js reconnects forever; publishing pauses while disconnected and re-sends what
// had no PubAck on reconnect; the consume loop is restarted (with backoff) whenever it ends, and the
// stream and consumer are created again if the server lost them.

import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream'
import type { NatsConnection } from '@nats-io/transport-node'
import { systemClock, type Clock } from '../../clock.js'
import { redactUrl } from '../../config.js'
import { log as defaultLog } from '../../log.js'
import { encodeMessage, encodeRecord } from '../../store/record-codec.js'
import {
  PUBLISH_SIZE_MAX_BYTES, PUBLISH_RECORDS_MAX, STOP_DRAIN_WAIT_MAX_MS, STOP_ENSURE_WAIT_MAX_MS, STOP_STATUS_WAIT_MAX_MS, TICK_INTERVAL_MAX_MS, TICK_INTERVAL_MIN_MS,
} from '../limits.js'
import type { DeliveryQueue, Feed } from '../queue.js'
import type { DeliveryOutcome, DeliveryRecord } from '../record.js'
import { connectNats } from './connect.js'
import { Consumer } from './consumer.js'
import { JETSTREAM_DEFAULTS, type JetStreamQueueOptions, type QueueLogger } from './options.js'
import { ErasureStream } from './erasure-stream.js'
import { OutcomeStream } from './outcome-stream.js'
import { PublishedCache } from './published-cache.js'
import { Publisher, type OutgoingMessage } from './publisher.js'
import { StreamSetup } from './stream-setup.js'
import { messageIdOf, Subjects } from './subjects.js'
import { errorText, withTimeout } from './wait.js'

/** Records of one subject published as one message, with their bytes (record-codec.ts). */
interface Chunk {
  subject: string
  records: DeliveryRecord[]
  parts: Uint8Array[]
}

export class JetStreamQueue implements DeliveryQueue {
  /** A retry is handed back to the stream with its delay: the record comes back on its own, to any node. */
  readonly retriesInMemory = false
  readonly streamName: string
  readonly subjectPrefix: string
  readonly consumerName: string
  /** Cluster mode: the outcome stream (outcome-stream.ts); null otherwise. */
  readonly outcomes: OutcomeStream | null
  /** Cluster mode: the erasure stream (erasure-stream.ts); null otherwise. */
  readonly erasures: ErasureStream | null
  private readonly nc: NatsConnection
  private readonly clock: Clock
  private readonly log: QueueLogger
  private readonly nodeId: string
  private readonly subjects: Subjects
  private readonly setup: StreamSetup
  private readonly published: PublishedCache
  private readonly publisher: Publisher
  private readonly consumer: Consumer
  private readonly onConnection: (connected: boolean) => void
  private connected = true
  private readonly timer: NodeJS.Timeout
  private readonly watching: Promise<void>
  private stopped = false

  private constructor (nc: NatsConnection, jsm: JetStreamManager, options: JetStreamQueueOptions) {
    this.nc = nc
    this.clock = options.clock ?? systemClock
    this.log = options.log ?? defaultLog
    this.streamName = options.streamName ?? JETSTREAM_DEFAULTS.streamName
    this.subjectPrefix = options.subjectPrefix ?? JETSTREAM_DEFAULTS.subjectPrefix
    this.consumerName = options.consumerName ?? JETSTREAM_DEFAULTS.consumerName
    const ackWaitMs = options.ackWaitMs ?? JETSTREAM_DEFAULTS.ackWaitMs
    const ackPendingMax = options.ackPendingMax ?? JETSTREAM_DEFAULTS.ackPendingMax
    const publishTimeoutMs = options.publishTimeoutMs ?? JETSTREAM_DEFAULTS.publishTimeoutMs
    this.nodeId = options.nodeId ?? ''
    this.onConnection = options.onConnection ?? noop
    this.onConnection(true)
    this.subjects = new Subjects(this.subjectPrefix)
    this.published = new PublishedCache(options.publishedCacheRecordsMax ?? JETSTREAM_DEFAULTS.publishedCacheRecordsMax)
    this.setup = new StreamSetup({
      jsm,
      clock: this.clock,
      log: this.log,
      streamName: this.streamName,
      subjectPrefix: this.subjectPrefix,
      consumerName: this.consumerName,
      duplicateWindowMs: options.duplicateWindowMs ?? JETSTREAM_DEFAULTS.duplicateWindowMs,
      ackWaitMs,
      ackPendingMax,
      onCreated: stream => {
        if (stream) this.published.clear()
        this.consumer.restart()
      },
    })
    const js = jetstream(nc)
    this.publisher = new Publisher({
      nc,
      clock: this.clock,
      log: this.log,
      publishInFlightMax: options.publishInFlightMax ?? JETSTREAM_DEFAULTS.publishInFlightMax,
      publishTimeoutMs,
      publishGiveUpMs: options.publishGiveUpMs ?? JETSTREAM_DEFAULTS.publishGiveUpMs,
      onStored: (pubAck, message) => this.published.keep(pubAck, message),
      onNoResponder: () => {
        this.setup.ensureSoon()
        this.outcomes?.ensureSoon()
        this.erasures?.ensureSoon()
      },
    })
    // Cluster mode: the streams every node reads through its own consumer (node-stream.ts).
    const streams = { jsm, js, publisher: this.publisher, clock: this.clock, log: this.log, duplicateWindowMs: options.duplicateWindowMs ?? JETSTREAM_DEFAULTS.duplicateWindowMs }
    this.outcomes = options.outcomes == null ? null : new OutcomeStream({ ...streams, ...options.outcomes })
    this.erasures = options.erasures == null ? null : new ErasureStream({ ...streams, ...options.erasures })
    this.consumer = new Consumer({
      js,
      clock: this.clock,
      log: this.log,
      setup: this.setup,
      publisher: this.publisher,
      published: this.published,
      subjects: this.subjects,
      nodeId: this.nodeId,
      ackWaitMs,
      ackPendingMax,
      pullMessagesMax: options.pullMessagesMax ?? JETSTREAM_DEFAULTS.pullMessagesMax,
      feedRetryDelayMs: options.feedRetryDelayMs ?? JETSTREAM_DEFAULTS.feedRetryDelayMs,
      goneRetriesMax: options.goneRetriesMax ?? JETSTREAM_DEFAULTS.goneRetriesMax,
    })
    const tickMs = Math.max(TICK_INTERVAL_MIN_MS, Math.min(TICK_INTERVAL_MAX_MS, Math.floor(publishTimeoutMs / 4), Math.floor(ackWaitMs / 4)))
    this.timer = setInterval(() => this.tick(), tickMs)
    this.timer.unref()
    this.watching = this.watchStatus()
  }

  /** Connect (failing if no server of the URL list answers), ready to publish; start() consumes. */
  static async connect (options: JetStreamQueueOptions): Promise<JetStreamQueue> {
    const nc = await connectNats(options.url, options.name ?? 'beacon-deliveries', options.access)
    try {
      const jsm = await jetstreamManager(nc)
      return new JetStreamQueue(nc, jsm, options)
    } catch (error) {
      await nc.close().catch(() => {})
      throw new Error(`NATS at ${redactUrl(options.url)} has no JetStream: ${errorText(error)}`)
    }
  }

  /** The subject of a record's messages. */
  subjectOf (record: DeliveryRecord): string {
    return this.subjects.of(record)
  }

  /** Whether the NATS connection is up (readiness). */
  get isConnected (): boolean {
    return this.connected && !this.stopped
  }

  /** Records held by the local workers (fed, not yet settled). */
  get heldCount (): number {
    return this.consumer.heldCount
  }

  /** The durable consumer of the records waiting for a retry. */
  get retryConsumerName (): string {
    return this.setup.retryConsumerName
  }

  async start (feed: Feed): Promise<void> {
    if (this.stopped) throw new Error('JetStreamQueue is stopped')
    await this.setup.ensureAtStart()
    this.consumer.start(feed)
  }

  /** Create the stream and the consumers if missing; reuse them otherwise. True when it created one. */
  ensure (): Promise<boolean> {
    return this.setup.ensure()
  }

  publish (records: readonly DeliveryRecord[], encoded?: readonly Uint8Array[]): Promise<void> {
    if (records.length === 0) return Promise.resolve()
    if (this.stopped) return Promise.reject(new Error('JetStreamQueue is stopped'))
    return this.publisher.publish(`not all of ${records.length} records were stored by JetStream`,
      () => this.chunksOf(records, encoded).flatMap(chunk => this.messagesOf(chunk.subject, chunk.records, chunk.parts)))
  }

  settle (record: DeliveryRecord, outcome: DeliveryOutcome, delayMs: number): void {
    this.consumer.settle(record, outcome, delayMs)
  }

  /**
   * Stop pulling; records fed but not settled go back to the stream at once (another node, or the
   * next start, takes them); publishes still waiting reject; the connection drains and closes.
   */
  async stop (): Promise<void> {
    if (this.stopped) return
    this.stopped = true
    clearInterval(this.timer)
    await this.outcomes?.stop()
    await this.erasures?.stop()
    await this.consumer.stop()
    this.published.clear()
    this.publisher.stop()
    await withTimeout(this.setup.stop() ?? Promise.resolve(), STOP_ENSURE_WAIT_MAX_MS)
    if (!this.nc.isClosed()) {
      // Drain sends the acks and naks above; without a server it cannot, and close() gives up.
      const drained = await withTimeout(this.nc.drain().then(() => true, () => false), STOP_DRAIN_WAIT_MAX_MS)
      if (drained !== true && !this.nc.isClosed()) await this.nc.close().catch(() => {})
    }
    await withTimeout(this.watching, STOP_STATUS_WAIT_MAX_MS)
  }

  /**
   * The records as chunks: consecutive records of one subject travel together, up to
   * PUBLISH_RECORDS_MAX records a message (one publish, PubAck, pull and ack for the lot: per-record
   * messages spent most of the transport's time in NATS traffic).
   */
  private chunksOf (records: readonly DeliveryRecord[], encoded: readonly Uint8Array[] | undefined): Chunk[] {
    const chunks: Chunk[] = []
    const open = new Map<string, Chunk>()
    for (let i = 0; i < records.length; i++) {
      const record = records[i]!
      const subject = this.subjects.of(record)
      let chunk = open.get(subject)
      if (chunk === undefined || chunk.records.length === PUBLISH_RECORDS_MAX) {
        chunk = { subject, records: [], parts: [] }
        chunks.push(chunk)
        open.set(subject, chunk)
      }
      chunk.records.push(record)
      chunk.parts.push(encoded?.[i] ?? encodeRecord(record))
    }
    return chunks
  }

  /**
   * One message for the records, or, over PUBLISH_SIZE_MAX_BYTES, halves of them until each fits (a record
   * alone goes as it is). Its id: the first record's, plus `+<count>` when it carries several.
   */
  private messagesOf (subject: string, records: DeliveryRecord[], parts: readonly Uint8Array[]): OutgoingMessage[] {
    const n = records.length
    let bytes = 0
    for (const part of parts) bytes += part.length
    if (bytes > PUBLISH_SIZE_MAX_BYTES && n > 1) {
      const half = Math.ceil(n / 2)
      return [...this.messagesOf(subject, records.slice(0, half), parts.slice(0, half)), ...this.messagesOf(subject, records.slice(half), parts.slice(half))]
    }
    const msgId = messageIdOf(records[0]!, this.nodeId)
    return [{ subject, data: encodeMessage(parts), msgId: n === 1 ? msgId : `${msgId}+${n}`, records, dueAtMs: 0 }]
  }

  private tick (): void {
    const nowMs = this.clock.nowMs()
    this.publisher.tick(nowMs)
    this.consumer.tick(nowMs, this.connected)
  }

  /** Follow the connection: pause publishing while disconnected, resend on reconnect. */
  private async watchStatus (): Promise<void> {
    for await (const status of this.nc.status()) {
      if (status.type === 'disconnect') {
        this.connected = false
        this.publisher.disconnected()
        this.onConnection(false)
        this.log.warn({ server: redactUrl(status.server) }, 'NATS disconnected; webhook deliveries wait for it')
      } else if (status.type === 'reconnect') {
        this.connected = true
        this.onConnection(true)
        this.log.info({ server: redactUrl(status.server) }, 'NATS reconnected')
        this.published.clear()
        this.publisher.reconnected()
        // The server may have come back without its store: make sure the streams and consumers exist.
        this.setup.ensureSoon()
        this.outcomes?.ensureSoon()
        this.erasures?.ensureSoon()
      }
    }
  }
}

function noop (): void {}
