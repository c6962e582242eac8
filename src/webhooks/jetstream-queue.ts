// The JetStream transport of webhook deliveries (BEACON_NATS_URL): the relay publishes delivery
// records to a JetStream stream shared by every node, and every node's delivery actors pull them from
// one durable consumer, ack after the receiver's 2xx, nak with a delay to retry, and term a dead one.
//
// Stream: file storage, work-queue retention, subjects `<prefix>.<account>.<webhook>` (both tokens
// base64url, so an id holding '.', '*' or '>' stays one token). A publish sends the records of one
// subject as messages of up to PUBLISH_RECORDS_MAX records; message id = the first record's id (plus
// the replay time for a replay, plus `+<count>` for several): a relay that publishes the same rows
// again after a crash is absorbed by the stream's duplicate window. The relay removes outbox rows only
// once publish() resolved, i.e. once every message has its PubAck; while NATS is away publish() waits
// and re-sends (same message ids), and it rejects only after publishGiveUpMs, leaving the rows in the
// outbox for a later relay pass.
//
// Consumers: two durable pull consumers (explicit ack) that every node pulls from, created with the
// stream when missing. The main one (`<prefix>.*.*`) hands out new records; the retry one
// (`<prefix>.*.*.r`, no max ack pending) hands out records waiting for a retry or for room in their
// worker. Messages whose records are held by local workers (waiting for the rate, a slot, or in
// flight) get an in-progress heartbeat, so ack_wait only redelivers the messages of a node that is
// gone. A record the consumer hands out again while it is still held here is not fed twice.
//
// Fairness: a record that must wait (a retry, or one its worker cannot take now) never waits in the
// main consumer, whose max ack pending is shared by every webhook: it is published again alone, as
// last settled and with its due time, on its webhook's retry subject, and its message is acked. The
// retry consumer hands it out at once; until it is due it is nak'd with the time left (a nak'd message
// counts in its consumer's ack pending, which is unlimited there). So a dead receiver's backlog waits
// in the retry consumer, and every other webhook's new records keep flowing through the main one.
//
// Settling: a delivered record is acked, a dead one termed, a retry handed back as above (if that
// publish fails: nak'd with the retry delay). A message of several records is acked once each of its
// records is delivered, dead, or handed back.
//
// Attempts: when a nak'd retry comes back to the node that nak'd it, the record as last settled
// (attempt number, history) is fed. Elsewhere, or after a crash, the attempt is the larger of the
// record's own and the message's delivery count (less the hand-outs this node gave back untried).
//
// NATS restarts: nats.js reconnects forever; publishing pauses while disconnected and re-sends what
// had no PubAck on reconnect; the consume loop is restarted (with backoff) whenever it ends, and the
// stream and consumer are created again if the server lost them.

import {
  AckPolicy, DeliverPolicy, Events, ReplayPolicy, RetentionPolicy, StorageType,
  connect as natsConnect, createInbox, headers as natsHeaders, nanos,
  type ConsumerMessages, type JetStreamClient, type JetStreamManager, type JsMsg, type Msg, type NatsConnection,
  type NatsError, type Subscription,
} from 'nats'
import type { DeliveryQueue, DeliveryRecord, Feed, FeedAnswer } from '../../actors/delivery.js'

export type { Feed, FeedAnswer }
import { log as defaultLog } from '../log.js'
import { redactUrl } from '../config.js'
import { decodeMessage, encodeMessage, encodeRecord } from './record-codec.js'
import { Fifo } from './fifo.js'

/** What the queue logs through (pino's shape). */
export interface QueueLogger {
  debug (obj: object, msg?: string): void
  info (obj: object, msg?: string): void
  warn (obj: object, msg?: string): void
  error (obj: object, msg?: string): void
}

export interface JetStreamQueueOptions {
  /** One or more nats:// or tls:// URLs, comma-separated. */
  url: string
  streamName?: string
  subjectPrefix?: string
  /** The durable consumer every node pulls from. */
  consumerName?: string
  /** The stream's duplicate window: re-publishes within it are absorbed. Default 2 minutes. */
  duplicateWindowMs?: number
  /** Unacked records of a node that stopped heartbeating come back after this. Default 30 s. */
  ackWaitMs?: number
  /** Messages handed out and not yet acked, over every node (retries waiting out their nak delay count). */
  maxAckPending?: number
  /** Messages one pull asks for (the local buffer). */
  pullBatch?: number
  /** PubAcks awaited at once. */
  publishWindow?: number
  /** A publish without a PubAck after this is sent again (same message id). */
  publishTimeoutMs?: number
  /** publish() rejects when its records are not all stored after this long (NATS away). */
  publishGiveUpMs?: number
  /** A record the local workers could not take now (feed answered 'busy') comes back after this. */
  feedRetryMs?: number
  /**
   * A record of a webhook this node does not know (feed answered 'gone': deleted, or not yet known
   * here) is handed out again this many times, feedRetryMs × delivery count apart, then dropped
   * from the stream (the record stays in its node's store, replayable).
   */
  goneRetries?: number
  /** Records of messages this node published and did not consume yet, kept to feed without decoding. */
  publishedCacheRecords?: number
  /**
   * Prefixed to message ids, for clusters where record ids are per node (an outbox seq): each node's
   * ids must not absorb another's. Empty (default): the record id alone.
   */
  nodeId?: string
  /** The NATS connection name (monitoring). */
  name?: string
  /** Told when the connection goes down or comes back (readiness, metrics); told `true` at start. */
  onConnection?: (connected: boolean) => void
  log?: QueueLogger
}

export const JETSTREAM_DEFAULTS = {
  streamName: 'BEACON_DELIVERIES',
  subjectPrefix: 'beacon.deliveries',
  consumerName: 'beacon-delivery',
  duplicateWindowMs: 120_000,
  ackWaitMs: 30_000,
  // Messages, not records: with messages of up to PUBLISH_RECORDS_MAX records, a node can be handed
  // more than a worker holds (DELIVERY_LIMITS.queueItemsMaxDefault); those are handed back one by one
  // (docs/webhooks.md, known limit).
  maxAckPending: 10_000,
  pullBatch: 1_000,
  publishWindow: 4_096,
  publishTimeoutMs: 5_000,
  publishGiveUpMs: 30_000,
  feedRetryMs: 5_000,
  goneRetries: 5,
  publishedCacheRecords: 20_000,
} as const

/**
 * What a stopping node hands back is nak'd with this delay: a plain nak is redelivered at once, and
 * the server may hand it straight back to this node's pull request that is still open while the
 * connection drains, where it would wait out ack_wait. Measured: 1 record in ~320 took 30 s to come
 * back to the next start with a plain nak (test/ops/shutdown.test.ts).
 */
const STOP_NAK_DELAY_MS = 2_000

/** A message carries at most this many records, and this many bytes of them (max_payload is 1 MiB by default). */
export const PUBLISH_RECORDS_MAX = 100
export const PUBLISH_BYTES_MAX = 256 * 1024

/** Records of one subject published as one message, with their bytes (record-codec.ts). */
interface Chunk {
  subject: string
  records: DeliveryRecord[]
  parts: Uint8Array[]
}

/** The last token of the subjects whose records wait for a retry (or for room in their worker). */
export const RETRY_TOKEN = 'r'
/** The header of a handed-back record's message: when it is due, in epoch milliseconds. */
const DUE_HEADER = 'Beacon-Due'

/** The NATS API error codes this module tells apart. */
const STREAM_NOT_FOUND = 10059
const CONSUMER_NOT_FOUND = 10014

/** One subject token for any string: base64url has no '.', '*', '>' or whitespace. */
export function subjectToken (text: string): string {
  return text === '' ? '_' : Buffer.from(text, 'utf8').toString('base64url')
}

/** The message id that makes a re-publish of the same record a duplicate, and a replay not one. */
export function messageIdOf (record: DeliveryRecord, nodeId = ''): string {
  const id = record.replayedAtMs === null ? record.id : `${record.id}@${record.replayedAtMs}`
  return nodeId === '' ? id : `${nodeId}:${id}`
}

/** A record being published: sent (again) until its PubAck arrives or its publish() gives up. */
interface Outgoing {
  token: string
  subject: string
  data: Uint8Array
  /** The records the message carries, kept for this node's consumer once the stream stored it. */
  records: DeliveryRecord[]
  msgId: string
  sentAtMs: number
  /** Sent on the current connection and waiting for its PubAck. */
  inFlight: boolean
  batch: PublishBatch
  /** A record handed back to the retry consumer: when it is due (epoch ms, header Beacon-Due); 0 otherwise. */
  dueAtMs: number
}

interface PublishBatch {
  left: number
  done: boolean
  resolve: () => void
  reject: (error: Error) => void
  timer: NodeJS.Timeout
}

/** A message held here: its records fed to local workers, not all settled yet. */
interface Carrier {
  msg: JsMsg
  /** Records the message carries: 1 is settled by its own ack, nak or term; more by one ack once all are done. */
  size: number
  /** Records not settled yet. */
  left: number
  lastBeatMs: number
  /** A record could not be handed back on its own: the whole message goes back instead. */
  failed: boolean
  /** How long the message waits when nak'd after a failed hand-back (a one-record retry: its delay). */
  nakMs: number
  /** A main consumer's message fed to the workers: its subject, counted in its webhook's and account's shares. */
  share: string | null
}

/** The record as last settled for a retry, fed instead of the stream's copy when it comes back here. */
interface Retrying {
  record: DeliveryRecord
  forgetAtMs: number
}


export class JetStreamQueue implements DeliveryQueue {
  /** A retry is a nak with its delay: the record comes back on its own, to any node. */
  readonly retriesInMemory = false
  readonly streamName: string
  readonly subjectPrefix: string
  readonly consumerName: string
  private readonly nc: NatsConnection
  private readonly jsm: JetStreamManager
  private readonly js: JetStreamClient
  private readonly log: QueueLogger
  private readonly duplicateWindowMs: number
  private readonly ackWaitMs: number
  private readonly maxAckPending: number
  private readonly pullBatch: number
  private readonly publishWindow: number
  private readonly publishTimeoutMs: number
  private readonly publishGiveUpMs: number
  private readonly feedRetryMs: number
  private readonly goneRetries: number
  private readonly publishedCacheRecords: number
  private readonly nodeId: string

  // Publishing.
  private readonly inbox: string
  private readonly ackSub: Subscription
  private readonly outgoing = new Map<string, Outgoing>()
  /** Waiting to be sent: new records beyond the window, or resends after a reconnect or a timeout. */
  private readonly toSend = new Fifo<Outgoing>()
  /** Subjects by account and webhook (bounded: cleared when it grows past SUBJECTS_CACHED). */
  private readonly subjects = new Map<string, string>()
  /** The subject asked for last (records come in runs of one webhook). */
  private lastSubjectAccount: string | null = null
  private lastSubjectWebhook = ''
  private lastSubject = ''
  private inFlight = 0
  private nextToken = 0
  private connected = true
  private readonly onConnection: (connected: boolean) => void

  // Consuming.
  private feed: Feed | null = null
  /** The running consumes, main and retry. */
  private readonly messages = new Set<ConsumerMessages>()
  private consuming: Promise<void> | null = null
  /** The records fed to local workers and not settled yet, with the message each came in. */
  private readonly held = new Map<string, Carrier>()
  /** See keepPublished. */
  private readonly published = new Map<number, { data: Uint8Array, records: DeliveryRecord[] }>()
  private publishedRecords = 0
  private readonly carriers = new Set<Carrier>()
  /**
   * The main consumer's messages held here, by webhook subject and by account (the subject less its
   * last token); only those holding some are listed, so the sizes count the webhooks and accounts holding.
   */
  private readonly webhookHeld = new Map<string, number>()
  private readonly accountHeld = new Map<string, number>()
  private readonly retrying = new Map<string, Retrying>()
  /** One-record messages this node nak'd untried (busy, gone), by record id: how often, so those are not counted as attempts. */
  private readonly handedBack = new Map<string, { seq: number, naks: number, forgetAtMs: number }>()
  private ensuring: Promise<void> | null = null
  private lastEnsureMs = 0

  private readonly timer: NodeJS.Timeout
  private readonly watching: Promise<void>
  private stopped = false

  private constructor (nc: NatsConnection, jsm: JetStreamManager, options: JetStreamQueueOptions) {
    this.nc = nc
    this.jsm = jsm
    this.js = nc.jetstream()
    this.log = options.log ?? defaultLog
    this.streamName = options.streamName ?? JETSTREAM_DEFAULTS.streamName
    this.subjectPrefix = options.subjectPrefix ?? JETSTREAM_DEFAULTS.subjectPrefix
    this.consumerName = options.consumerName ?? JETSTREAM_DEFAULTS.consumerName
    this.duplicateWindowMs = options.duplicateWindowMs ?? JETSTREAM_DEFAULTS.duplicateWindowMs
    this.ackWaitMs = options.ackWaitMs ?? JETSTREAM_DEFAULTS.ackWaitMs
    this.maxAckPending = options.maxAckPending ?? JETSTREAM_DEFAULTS.maxAckPending
    this.pullBatch = options.pullBatch ?? JETSTREAM_DEFAULTS.pullBatch
    this.publishWindow = options.publishWindow ?? JETSTREAM_DEFAULTS.publishWindow
    this.publishTimeoutMs = options.publishTimeoutMs ?? JETSTREAM_DEFAULTS.publishTimeoutMs
    this.publishGiveUpMs = options.publishGiveUpMs ?? JETSTREAM_DEFAULTS.publishGiveUpMs
    this.feedRetryMs = options.feedRetryMs ?? JETSTREAM_DEFAULTS.feedRetryMs
    this.goneRetries = options.goneRetries ?? JETSTREAM_DEFAULTS.goneRetries
    this.publishedCacheRecords = options.publishedCacheRecords ?? JETSTREAM_DEFAULTS.publishedCacheRecords
    this.nodeId = options.nodeId ?? ''
    this.onConnection = options.onConnection ?? noop
    this.onConnection(true)
    validateSubjectPrefix(this.subjectPrefix)
    // PubAcks come to one wildcard inbox, matched by token: no request (and timer) per message.
    this.inbox = createInbox()
    this.ackSub = nc.subscribe(`${this.inbox}.*`, { callback: (error, msg) => this.onPubAck(error, msg) })
    const tickMs = Math.max(50, Math.min(1000, Math.floor(this.publishTimeoutMs / 4), Math.floor(this.ackWaitMs / 4)))
    this.timer = setInterval(() => this.tick(), tickMs)
    this.timer.unref()
    this.watching = this.watchStatus()
  }

  /** Connect (failing if no server of the URL list answers), ready to publish; start() consumes. */
  static async connect (options: JetStreamQueueOptions): Promise<JetStreamQueue> {
    const { servers, auth } = serversOf(options.url)
    if (servers.length === 0) throw new Error('JetStreamQueue: no NATS server URL')
    const nc = await natsConnect({
      servers,
      ...auth,
      name: options.name ?? 'beacon-deliveries',
      reconnect: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      reconnectJitter: 250,
      pingInterval: 10_000,
      maxPingOut: 3,
    })
    try {
      const jsm = await nc.jetstreamManager()
      return new JetStreamQueue(nc, jsm, options)
    } catch (error) {
      await nc.close().catch(() => {})
      throw new Error(`NATS at ${redactUrl(options.url)} has no JetStream: ${errorText(error)}`)
    }
  }

  /** The subject of a record's messages. */
  subjectOf (record: DeliveryRecord): string {
    if (record.account === this.lastSubjectAccount && record.webhookId === this.lastSubjectWebhook) return this.lastSubject
    const key = record.account + '\u0000' + record.webhookId
    let subject = this.subjects.get(key)
    if (subject === undefined) {
      subject = `${this.subjectPrefix}.${subjectToken(record.account)}.${subjectToken(record.webhookId)}`
      if (this.subjects.size >= SUBJECTS_CACHED) this.subjects.clear()
      this.subjects.set(key, subject)
    }
    this.lastSubjectAccount = record.account
    this.lastSubjectWebhook = record.webhookId
    this.lastSubject = subject
    return subject
  }

  /** Whether the NATS connection is up (readiness). */
  get isConnected (): boolean {
    return this.connected && !this.stopped
  }

  /** Records held by the local workers (fed, not yet settled). */
  get heldCount (): number {
    return this.held.size
  }

  async start (feed: Feed): Promise<void> {
    if (this.stopped) throw new Error('JetStreamQueue is stopped')
    this.feed = feed
    await this.ensure()
    this.consuming = Promise.all([
      this.consumeLoop(this.consumerName, msg => this.onMessage(msg)),
      this.consumeLoop(this.retryConsumerName, msg => this.onRetryMessage(msg)),
    ]).then(noop)
  }

  /** The durable consumer of the records waiting for a retry. */
  get retryConsumerName (): string {
    return `${this.consumerName}-retry`
  }

  // ---------------------------------------------------------------------------------------------
  // Publishing

  publish (records: readonly DeliveryRecord[], encoded?: readonly Uint8Array[]): Promise<void> {
    if (records.length === 0) return Promise.resolve()
    if (this.stopped) return Promise.reject(new Error('JetStreamQueue is stopped'))
    return new Promise<void>((resolve, reject) => {
      const batch: PublishBatch = {
        left: records.length,
        done: false,
        resolve,
        reject,
        timer: setTimeout(() => this.giveUp(batch, `not all of ${records.length} records were stored by JetStream within ${this.publishGiveUpMs} ms`), this.publishGiveUpMs),
      }
      let messages: { subject: string, data: Uint8Array, msgId: string, records: DeliveryRecord[] }[]
      try {
        messages = this.chunksOf(records, encoded).flatMap(chunk => this.messagesOf(chunk.subject, chunk.records, chunk.parts))
      } catch (error) {
        this.giveUp(batch, `a delivery record could not be encoded: ${errorText(error)}`)
        return
      }
      batch.left = messages.length
      for (const message of messages) this.queueSend(batch, message.subject, message.data, message.msgId, message.records)
      this.pumpSends()
    })
  }

  /**
   * The records as messages: consecutive records of one subject travel together, up to
   * PUBLISH_RECORDS_MAX records and PUBLISH_BYTES_MAX bytes a message (one publish, PubAck, pull
   * and ack for the lot: per-record messages spent most of the transport's time in NATS traffic).
   */
  private chunksOf (records: readonly DeliveryRecord[], encoded: readonly Uint8Array[] | undefined): Chunk[] {
    const chunks: Chunk[] = []
    const open = new Map<string, Chunk>()
    for (let i = 0; i < records.length; i++) {
      const record = records[i]!
      const subject = this.subjectOf(record)
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
   * One message for the records, or, over PUBLISH_BYTES_MAX, halves of them until each fits (a record
   * alone goes as it is). Its id: the first record's, plus `+<count>` when it carries several.
   */
  private messagesOf (subject: string, records: DeliveryRecord[], parts: readonly Uint8Array[]): { subject: string, data: Uint8Array, msgId: string, records: DeliveryRecord[] }[] {
    const n = records.length
    let bytes = 0
    for (const part of parts) bytes += part.length
    if (bytes > PUBLISH_BYTES_MAX && n > 1) {
      const half = Math.ceil(n / 2)
      return [...this.messagesOf(subject, records.slice(0, half), parts.slice(0, half)), ...this.messagesOf(subject, records.slice(half), parts.slice(half))]
    }
    const msgId = messageIdOf(records[0]!, this.nodeId)
    return [{ subject, data: encodeMessage(parts), msgId: n === 1 ? msgId : `${msgId}+${n}`, records }]
  }

  private queueSend (batch: PublishBatch, subject: string, data: Uint8Array, msgId: string, records: DeliveryRecord[], dueAtMs = 0): void {
    const token = (this.nextToken++).toString(36)
    const out: Outgoing = { token, subject, data, records, msgId, sentAtMs: 0, inFlight: false, batch, dueAtMs }
    this.outgoing.set(token, out)
    this.toSend.push(out)
  }

  /**
   * A record that must wait (a retry, a busy worker) goes to the retry consumer: published alone, as it
   * is now (attempt, history, due time), on its webhook's retry subject under a message id of its own
   * (the duplicate window must not take it for its first publish); its message is settled once stored.
   */
  private handBack (record: DeliveryRecord, carrier: Carrier, dueAtMs: number): void {
    const publish = this.stopped
      ? Promise.reject(new Error('stopped'))
      : new Promise<void>((resolve, reject) => {
        const batch: PublishBatch = {
          left: 1, done: false, resolve, reject,
          timer: setTimeout(() => this.giveUp(batch, `a handed-back record was not stored within ${this.publishGiveUpMs} ms`), this.publishGiveUpMs),
        }
        this.queueSend(batch, `${this.subjectOf(record)}.${RETRY_TOKEN}`, encodeMessage([encodeRecord(record)]), `${messageIdOf(record, this.nodeId)}#${Date.now().toString(36)}.${this.nextToken.toString(36)}`, [record], dueAtMs)
        this.pumpSends()
      })
    publish.then(() => this.release(carrier, false), () => this.release(carrier, true))
  }

  /** One record of a batch message is done here; the message is acked once all are (nak'd if one could not be handed back). */
  private release (carrier: Carrier, failed: boolean): void {
    if (failed) carrier.failed = true
    if (--carrier.left > 0 || !this.carriers.has(carrier)) return
    this.dropCarrier(carrier)
    if (carrier.failed) carrier.msg.nak(this.stopped ? STOP_NAK_DELAY_MS : carrier.nakMs)
    else carrier.msg.ack()
  }

  private pumpSends (): void {
    if (!this.connected || this.stopped) return
    while (this.inFlight < this.publishWindow) {
      const out = this.toSend.shift()
      if (out === undefined) break
      if (out.batch.done || out.inFlight || !this.outgoing.has(out.token)) continue
      const h = natsHeaders()
      h.set('Nats-Msg-Id', out.msgId)
      if (out.dueAtMs > 0) h.set(DUE_HEADER, String(out.dueAtMs))
      try {
        this.nc.publish(out.subject, out.data, { reply: `${this.inbox}.${out.token}`, headers: h })
      } catch (error) {
        // Closed connection, payload over the server's max_payload: this record cannot go.
        this.giveUp(out.batch, `publishing a delivery record failed: ${errorText(error)}`)
        continue
      }
      out.inFlight = true
      out.sentAtMs = Date.now()
      this.inFlight++
    }
  }

  private onPubAck (error: NatsError | null, msg: Msg): void {
    const token = msg?.subject.slice(this.inbox.length + 1)
    const out = token === undefined ? undefined : this.outgoing.get(token)
    if (out === undefined) return // a late answer to a send already answered or given up
    if (out.inFlight) {
      out.inFlight = false
      this.inFlight--
    }
    const problem = error !== null ? errorText(error) : pubAckProblem(msg)
    if (problem !== null) {
      // No JetStream responder yet (a server starting), storage trouble: send again a little later.
      this.log.debug({ problem, msgId: out.msgId }, 'delivery publish not acknowledged; will resend')
      // No responder for the subject: the stream may be gone (a server back without its store).
      if (msg?.headers?.status === '503') this.ensureSoon()
      out.sentAtMs = Date.now() - this.publishTimeoutMs + Math.min(1000, this.publishTimeoutMs / 2)
      out.inFlight = true // parked: tick() resends it once the (shortened) timeout passes
      this.inFlight++
      this.pumpSends()
      return
    }
    this.outgoing.delete(out.token)
    this.keepPublished(msg.data, out)
    const batch = out.batch
    if (!batch.done && --batch.left === 0) {
      batch.done = true
      clearTimeout(batch.timer)
      batch.resolve()
    }
    this.pumpSends()
  }

  /**
   * The records of a message the stream stored, by its stream sequence: when this node's consumer
   * gets the message, it feeds them as they are instead of decoding the bytes (most messages are
   * consumed where they were published). They are fed only for a message of the very same bytes,
   * so a sequence number given again (a stream made again) cannot feed them for another message. At
   * most publishedCacheRecords records are kept, the oldest going first (with several nodes, the
   * messages another node consumed); a message not kept, or delivered before its PubAck came, is
   * decoded.
   */
  private keepPublished (pubAck: Uint8Array, out: Outgoing): void {
    // A handed-back record waits in the retry consumer (often long): not kept, it would push out fresh ones.
    if (out.dueAtMs > 0) return
    const seq = pubAckSeqOf(pubAck)
    if (seq === 0 || this.published.has(seq) || out.records.length > this.publishedCacheRecords) return
    while (this.publishedRecords + out.records.length > this.publishedCacheRecords) {
      const [oldest, kept] = this.published.entries().next().value as [number, { records: DeliveryRecord[] }]
      this.published.delete(oldest)
      this.publishedRecords -= kept.records.length
    }
    this.published.set(seq, { data: out.data, records: out.records })
    this.publishedRecords += out.records.length
  }

  /** The records of a message as published here (see keepPublished), or undefined. */
  private takePublished (msg: JsMsg): DeliveryRecord[] | undefined {
    const seq = streamSeqOf(msg)
    const kept = seq === 0 ? undefined : this.published.get(seq)
    if (kept === undefined) return undefined
    this.published.delete(seq)
    this.publishedRecords -= kept.records.length
    return Buffer.from(kept.data.buffer, kept.data.byteOffset, kept.data.byteLength).equals(msg.data) ? kept.records : undefined
  }

  /** A stream made again (a server back without its store) numbers its messages from 1 again. */
  private forgetPublished (): void {
    this.published.clear()
    this.publishedRecords = 0
  }

  private giveUp (batch: PublishBatch, why: string): void {
    if (batch.done) return
    batch.done = true
    clearTimeout(batch.timer)
    for (const [token, out] of this.outgoing) {
      if (out.batch !== batch) continue
      this.outgoing.delete(token)
      if (out.inFlight) this.inFlight--
      out.inFlight = false
    }
    batch.reject(new Error(`JetStream publish failed: ${why}`))
    this.pumpSends()
  }

  /** Resend what waited too long for its PubAck; heartbeat held records; forget stale retry state. */
  private tick (): void {
    const nowMs = Date.now()
    if (this.connected) {
      let resend = false
      for (const out of this.outgoing.values()) {
        if (!out.inFlight || nowMs - out.sentAtMs < this.publishTimeoutMs) continue
        out.inFlight = false
        this.inFlight--
        this.toSend.push(out)
        resend = true
      }
      if (resend) this.pumpSends()
      const beatMs = this.ackWaitMs / 3
      for (const carrier of this.carriers) {
        if (nowMs - carrier.lastBeatMs < beatMs) continue
        carrier.lastBeatMs = nowMs
        carrier.msg.working()
      }
    }
    for (const [id, entry] of this.retrying) if (entry.forgetAtMs <= nowMs) this.retrying.delete(id)
    for (const [id, entry] of this.handedBack) if (entry.forgetAtMs <= nowMs) this.handedBack.delete(id)
  }

  /** Follow the connection: pause publishing while disconnected, resend on reconnect. */
  private async watchStatus (): Promise<void> {
    for await (const status of this.nc.status()) {
      if (status.type === Events.Disconnect) {
        this.connected = false
        this.onConnection(false)
        this.log.warn({ server: redactUrl(String(status.data)) }, 'NATS disconnected; webhook deliveries wait for it')
      } else if (status.type === Events.Reconnect) {
        this.connected = true
        this.onConnection(true)
        this.log.info({ server: redactUrl(String(status.data)) }, 'NATS reconnected')
        this.forgetPublished()
        // PubAcks of the old connection are lost: send again everything not yet acknowledged.
        for (const out of this.outgoing.values()) {
          if (!out.inFlight) continue
          out.inFlight = false
          this.inFlight--
          this.toSend.push(out)
        }
        this.pumpSends()
        // The server may have come back without its store: make sure the stream and consumer exist.
        this.ensureSoon()
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Stream and consumer

  /** Create the stream and the consumer if missing; reuse them otherwise. True when it created one. */
  async ensure (): Promise<boolean> {
    const stream = await this.ensureStream()
    if (stream) this.forgetPublished()
    const consumer = await this.ensureConsumer()
    return stream || consumer
  }

  /** ensure() in the background, retried until it succeeds (at most one at a time). */
  private ensureSoon (): void {
    if (this.stopped || this.ensuring !== null || Date.now() - this.lastEnsureMs < 1000) return
    this.ensuring = (async () => {
      for (let waitMs = 250; !this.stopped; waitMs = Math.min(waitMs * 2, 5000)) {
        this.lastEnsureMs = Date.now()
        try {
          // A consume running against a consumer that vanished waits for missed heartbeats before
          // pulling again: start it afresh on the new one.
          if (await this.ensure()) for (const messages of this.messages) void messages.close()
          return
        } catch (error) {
          if (this.stopped) return
          this.log.warn({ err: error }, 'could not check the JetStream delivery stream; will retry')
        }
        await sleep(waitMs)
      }
    })().finally(() => { this.ensuring = null })
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

  /** The main consumer (new records) and the retry consumer (records waiting); true when one was created. */
  private async ensureConsumer (): Promise<boolean> {
    // The retry subjects first leave the main consumer (an older release filtered `<prefix>.>`): consumers
    // of a work-queue stream may not overlap.
    const main = await this.ensureOneConsumer(this.consumerName, `${this.subjectPrefix}.*.*`, this.maxAckPending)
    const retry = await this.ensureOneConsumer(this.retryConsumerName, `${this.subjectPrefix}.*.*.${RETRY_TOKEN}`, -1)
    return main || retry
  }

  private async ensureOneConsumer (name: string, filter: string, maxAckPending: number): Promise<boolean> {
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
      if (info.config.ack_wait !== ackWait || info.config.max_ack_pending !== maxAckPending) {
        // The settings this node runs with win (every node should run with the same ones).
        await this.jsm.consumers.update(this.streamName, name, { ack_wait: ackWait, max_ack_pending: maxAckPending })
        this.log.info({ consumer: name, ackWaitMs: this.ackWaitMs, maxAckPending }, 'updated the JetStream delivery consumer')
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
        max_ack_pending: maxAckPending,
        max_deliver: -1,
      })
      this.log.info({ stream: this.streamName, consumer: name }, 'created the JetStream delivery consumer')
    } catch (error) {
      await this.jsm.consumers.info(this.streamName, name).catch(() => { throw error })
    }
    return true
  }

  // ---------------------------------------------------------------------------------------------
  // Consuming

  /** Pull for as long as the queue runs: a consume that ends (an error, a lost consumer) starts again. */
  private async consumeLoop (name: string, onMessage: (msg: JsMsg) => void): Promise<void> {
    let backoffMs = 100
    while (!this.stopped) {
      const startedMs = Date.now()
      let running: ConsumerMessages | null = null
      try {
        const consumer = await this.js.consumers.get(this.streamName, name)
        if (this.stopped) break
        const messages = await consumer.consume({ max_messages: this.pullBatch, callback: onMessage })
        running = messages
        this.messages.add(messages)
        void this.watchConsumer(messages)
        const ended = await messages.closed()
        if (this.stopped) break
        if (ended instanceof Error) this.log.warn({ err: ended }, 'the JetStream delivery consumer stopped; restarting it')
        else this.log.warn({}, 'the JetStream delivery consumer ended; restarting it')
      } catch (error) {
        if (this.stopped) break
        this.log.warn({ err: error }, 'could not pull from the JetStream delivery consumer; retrying')
        if (apiErrorCode(error) === STREAM_NOT_FOUND || apiErrorCode(error) === CONSUMER_NOT_FOUND) this.ensureSoon()
      } finally {
        if (running !== null) this.messages.delete(running)
      }
      if (Date.now() - startedMs > 30_000) backoffMs = 100
      await sleep(backoffMs)
      backoffMs = Math.min(backoffMs * 2, 5_000)
    }
  }

  /** A consumer or stream that vanished (a server that lost its store) is created again. */
  private async watchConsumer (messages: ConsumerMessages): Promise<void> {
    try {
      for await (const status of await messages.status()) {
        if (status.type === 'consumer_not_found' || status.type === 'stream_not_found' || status.type === 'consumer_deleted') {
          this.log.warn({ status: status.type }, 'the JetStream delivery consumer is missing; creating it again')
          this.ensureSoon()
        }
      }
    } catch {}
  }

  /** A message of the retry consumer: nak'd with the time left until it is due, then fed as the main consumer's are. */
  private onRetryMessage (msg: JsMsg): void {
    const due = Number(msg.headers?.get(DUE_HEADER) ?? '')
    const leftMs = Number.isFinite(due) ? due - Date.now() : 0
    if (leftMs > 0 && !this.stopped && this.feed !== null) {
      msg.nak(Math.ceil(leftMs))
      return
    }
    this.onMessage(msg, true)
  }

  private onMessage (msg: JsMsg, fromRetry = false): void {
    if (this.stopped || this.feed === null) {
      // Pulled while stopping: back to the stream (the connection drains before it closes), for
      // another node or the next start, rather than after ack_wait.
      msg.nak(STOP_NAK_DELAY_MS)
      return
    }
    let records: DeliveryRecord[]
    try {
      records = (this.published.size === 0 ? undefined : this.takePublished(msg)) ?? decodeMessage(msg.data) as DeliveryRecord[]
      if (records.length === 0 || records.some(record => typeof record?.id !== 'string')) throw new Error('no record id')
    } catch (error) {
      this.log.error({ err: error, subject: msg.subject, seq: msg.seq }, 'undecodable message in the delivery stream; dropped')
      msg.term()
      return
    }
    const nowMs = Date.now()
    for (const record of records) {
      const held = this.held.get(record.id)
      if (held !== undefined && held.msg.seq === msg.seq) {
        // Handed out again while local workers still have it (ack_wait passed): keep the newer handle.
        held.msg = msg
        held.lastBeatMs = nowMs
        return
      }
    }
    if (!fromRetry && this.overShare(msg.subject)) {
      // Its webhook (or account) holds its share of the main consumer already: the records wait in the retry one.
      const carrier: Carrier = { msg, size: records.length, left: records.length, lastBeatMs: nowMs, failed: false, nakMs: this.feedRetryMs, share: null }
      this.carriers.add(carrier)
      for (const record of records) {
        if (this.held.has(record.id)) this.release(carrier, false)
        else this.handBack(record, carrier, nowMs + this.feedRetryMs)
      }
      return
    }
    if (records.length === 1) return this.onRecord(msg, records[0]!, nowMs, fromRetry)
    const carrier: Carrier = { msg, size: records.length, left: records.length, lastBeatMs: nowMs, failed: false, nakMs: this.feedRetryMs, share: msg.subject }
    this.addCarrier(carrier)
    const deliveries = deliveryCountOf(msg)
    for (let record of records) {
      // The same record held from another message (a replay of it) is already on its way.
      if (this.held.has(record.id)) {
        this.release(carrier, false)
        continue
      }
      if (deliveries > record.attempt) record = { ...record, attempt: deliveries }
      this.held.set(record.id, carrier)
      const answer = this.tryFeed(record)
      if (answer !== 'busy' && answer !== 'gone') continue
      if (this.held.get(record.id) !== carrier) continue
      this.held.delete(record.id)
      this.handBack(record, carrier, nowMs + this.feedRetryMs)
    }
  }

  /** A message of one record: settled by its own ack, nak (with the retry's delay) or term. */
  private onRecord (msg: JsMsg, record: DeliveryRecord, nowMs: number, fromRetry: boolean): void {
    if (this.held.has(record.id)) {
      // Another message of the same record (a replay) while the first is here: after it.
      msg.nak(this.feedRetryMs)
      return
    }
    const retrying = this.retrying.get(record.id)
    if (retrying !== undefined) {
      this.retrying.delete(record.id)
      record = retrying.record
    }
    // Deliveries of this message that did not end here (a crash, another node) count as attempts;
    // those this node handed back untried (its worker full, the webhook unknown here) do not. A
    // handed-back record carries its attempt as settled (its deliveries are mostly waits until due).
    const deliveries = deliveryCountOf(msg)
    const handed = this.handedBack.get(record.id)
    const untried = handed !== undefined && handed.seq === msg.seq ? handed.naks : 0
    if (!fromRetry && deliveries - untried > record.attempt) record = { ...record, attempt: deliveries - untried }
    const carrier: Carrier = { msg, size: 1, left: 1, lastBeatMs: nowMs, failed: false, nakMs: this.feedRetryMs, share: fromRetry ? null : msg.subject }
    this.addCarrier(carrier)
    this.held.set(record.id, carrier)
    const answer = this.tryFeed(record)
    if (answer !== 'busy' && answer !== 'gone') return
    if (this.held.get(record.id) !== carrier) return
    this.held.delete(record.id)
    // A worker without room, or a webhook unknown here: the record waits in the retry consumer, not in
    // the main one's shared pending (which a deleted webhook's backlog would otherwise fill).
    if (!fromRetry) return this.handBack(record, carrier, nowMs + this.feedRetryMs)
    this.dropCarrier(carrier)
    if (answer === 'busy' || deliveries <= this.goneRetries) {
      this.handedBack.set(record.id, { seq: msg.seq, naks: untried + 1, forgetAtMs: nowMs + this.feedRetryMs * deliveries + 2 * this.ackWaitMs + 60_000 })
      msg.nak(answer === 'busy' ? this.feedRetryMs : this.feedRetryMs * deliveries)
    } else {
      this.log.warn({ id: record.id, account: record.account, webhook: record.webhookId }, 'delivery of an unknown webhook dropped from the stream')
      msg.term()
    }
  }

  private addCarrier (carrier: Carrier): void {
    this.carriers.add(carrier)
    if (carrier.share === null) return
    count(this.webhookHeld, carrier.share, 1)
    count(this.accountHeld, accountOf(carrier.share), 1)
  }

  private dropCarrier (carrier: Carrier): void {
    if (!this.carriers.delete(carrier) || carrier.share === null) return
    count(this.webhookHeld, carrier.share, -1)
    count(this.accountHeld, accountOf(carrier.share), -1)
  }

  /**
   * Whether the webhook of this subject, or its account, holds its share of the main consumer here: with
   * n webhooks (accounts) holding messages, this one counted, a share is max ack pending / (n + 1), so
   * together they never hold all of it, and a webhook (account) holding none always finds room.
   */
  private overShare (subject: string): boolean {
    return overShare(this.webhookHeld, subject, this.maxAckPending) || overShare(this.accountHeld, accountOf(subject), this.maxAckPending)
  }

  private tryFeed (record: DeliveryRecord): FeedAnswer {
    try {
      return this.feed!(record)
    } catch (error) {
      this.log.error({ err: error, id: record.id }, 'feeding a delivery failed')
      return 'busy'
    }
  }

  settle (record: DeliveryRecord, outcome: 'delivered' | 'retry' | 'dead', delayMs: number): void {
    const carrier = this.held.get(record.id)
    if (carrier === undefined) return
    this.held.delete(record.id)
    const waitMs = Math.max(0, Math.round(delayMs))
    if (carrier.size > 1) {
      // In a batch message: a retry goes to the retry consumer on its own, due after its delay;
      // delivered and dead ones are done.
      if (outcome === 'retry') this.handBack(record, carrier, Date.now() + waitMs)
      else this.release(carrier, false)
      return
    }
    if (outcome === 'delivered') {
      this.dropCarrier(carrier)
      this.handedBack.delete(record.id)
      carrier.msg.ack()
    } else if (outcome === 'dead') {
      this.dropCarrier(carrier)
      this.handedBack.delete(record.id)
      carrier.msg.term() // no reason: nats-server 2.9 takes only a bare +TERM
    } else {
      const forgetAtMs = Date.now() + waitMs + 2 * this.ackWaitMs + 60_000
      this.retrying.set(record.id, { record, forgetAtMs })
      const handed = this.handedBack.get(record.id)
      if (handed !== undefined) handed.forgetAtMs = Math.max(handed.forgetAtMs, forgetAtMs)
      // Waits in the retry consumer (as settled); if that publish fails, its message is nak'd with the delay
      // (nak(0) would be a plain nak: immediate redelivery, which is what a 0 delay means).
      carrier.nakMs = waitMs
      this.handBack(record, carrier, Date.now() + waitMs)
    }
  }

  /**
   * Stop pulling; records fed but not settled go back to the stream at once (another node, or the
   * next start, takes them); publishes still waiting reject; the connection drains and closes.
   */
  async stop (): Promise<void> {
    if (this.stopped) return
    this.stopped = true
    this.feed = null
    clearInterval(this.timer)
    await withTimeout(Promise.all([...this.messages].map(messages => messages.close())), 2_000)
    await withTimeout(this.consuming ?? Promise.resolve(), 2_000)
    for (const carrier of this.carriers) carrier.msg.nak(STOP_NAK_DELAY_MS)
    this.carriers.clear()
    this.webhookHeld.clear()
    this.accountHeld.clear()
    this.held.clear()
    this.forgetPublished()
    this.retrying.clear()
    this.handedBack.clear()
    const batches = new Set<PublishBatch>()
    for (const out of this.outgoing.values()) batches.add(out.batch)
    for (const batch of batches) this.giveUp(batch, 'the queue stopped')
    this.ackSub.unsubscribe()
    await withTimeout(this.ensuring ?? Promise.resolve(), 2_000)
    if (!this.nc.isClosed()) {
      // Drain sends the acks and naks above; without a server it cannot, and close() gives up.
      const drained = await withTimeout(this.nc.drain().then(() => true, () => false), 5_000)
      if (drained !== true && !this.nc.isClosed()) await this.nc.close().catch(() => {})
    }
    await withTimeout(this.watching, 1_000)
  }
}

const SUBJECTS_CACHED = 10_000

function count (held: Map<string, number>, key: string, by: number): void {
  const n = (held.get(key) ?? 0) + by
  if (n <= 0) held.delete(key)
  else held.set(key, n)
}

function overShare (held: Map<string, number>, key: string, total: number): boolean {
  const mine = held.get(key) ?? 0
  const holding = held.size + (mine === 0 ? 1 : 0)
  return mine >= Math.max(1, Math.floor(total / (holding + 1)))
}

/** The account part of a webhook subject (`<prefix>.<account>`). */
function accountOf (subject: string): string {
  return subject.slice(0, subject.lastIndexOf('.'))
}

/** `{"stream":"…","seq":…}` and nothing else looks like this: no JSON parse on the hot path. */
const PUBACK_PREFIX = Buffer.from('{"stream":"', 'latin1')

/**
 * The delivery count of a JetStream message, read from its reply subject without building the whole
 * DeliveryInfo: `$JS.ACK.<stream>.<consumer>.<count>.<stream seq>.…` (9 tokens) or
 * `$JS.ACK.<domain>.<hash>.<stream>.<consumer>.<count>.<stream seq>.…` (11 or 12 tokens).
 */
export function deliveryCountOf (msg: JsMsg): number {
  return ackToken(msg, 0) || msg.info.deliveryCount
}

/** The stream sequence of a JetStream message, the same way (0 when the reply subject is not one). */
export function streamSeqOf (msg: JsMsg): number {
  return ackToken(msg, 1)
}

/** The positive whole number at `offset` tokens after the delivery count in the reply subject, or 0. */
function ackToken (msg: JsMsg, offset: number): number {
  const reply = (msg as unknown as { reply?: unknown }).reply
  if (typeof reply !== 'string') return 0
  let dots = 0
  for (let i = reply.indexOf('.'); i !== -1; i = reply.indexOf('.', i + 1)) dots++
  const index = dots === 8 ? 4 : dots === 10 || dots === 11 ? 6 : -1
  if (index === -1) return 0
  let start = 0
  for (let i = 0; i < index + offset; i++) start = reply.indexOf('.', start) + 1
  const value = Number(reply.slice(start, reply.indexOf('.', start)))
  return Number.isInteger(value) && value > 0 ? value : 0
}

/** The `seq` of a PubAck (`{"stream":"…","seq":42,…}`), or 0 when it has none. */
function pubAckSeqOf (data: Uint8Array): number {
  const text = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('latin1')
  const at = text.indexOf('"seq":')
  if (at === -1) return 0
  const value = parseInt(text.slice(at + 6), 10)
  return Number.isInteger(value) && value > 0 ? value : 0
}

function pubAckProblem (msg: Msg): string | null {
  const status = msg.headers?.status
  const data = msg.data
  if (data.length === 0) return `status ${status ?? 'none'} without a PubAck`
  if (data.length > PUBACK_PREFIX.length && data.length < 512 && Buffer.from(data.buffer, data.byteOffset, PUBACK_PREFIX.length).equals(PUBACK_PREFIX)) {
    // A PubAck starts with its stream; an error answer starts with "error".
    return null
  }
  let answer: { stream?: string, seq?: number, error?: { code?: number, description?: string } }
  try {
    answer = JSON.parse(Buffer.from(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength).toString('utf8')) as typeof answer
  } catch {
    return 'an unreadable PubAck'
  }
  if (answer.error !== undefined) return `${answer.error.code ?? '?'} ${answer.error.description ?? ''}`.trim()
  if (typeof answer.stream !== 'string' || answer.stream === '') return 'a PubAck without a stream'
  return null
}

function apiErrorCode (error: unknown): number | undefined {
  return (error as { api_error?: { err_code?: number } } | null)?.api_error?.err_code
}

function validateSubjectPrefix (prefix: string): void {
  if (prefix === '' || prefix.split('.').some(token => token === '' || /[\s*>]/.test(token))) {
    throw new Error(`JetStreamQueue: subject prefix ${JSON.stringify(prefix)} is not a valid subject (dot-separated tokens without spaces, '*' or '>')`)
  }
}

function errorText (error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

function sleep (ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms).unref())
}

async function withTimeout<T> (promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<undefined>(resolve => { timer = setTimeout(() => resolve(undefined), ms) })
  try {
    return await Promise.race([promise.catch(() => undefined), timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * The servers of a comma-separated URL list, credentials taken out: nats.js does not read them from
 * a URL. `nats://user:password@host` gives user and password, `nats://token@host` a token.
 */
export function serversOf (urls: string): { servers: string[], auth: { user?: string, pass?: string, token?: string } } {
  const servers: string[] = []
  let auth: { user?: string, pass?: string, token?: string } = {}
  for (const text of urls.split(',').map(s => s.trim()).filter(s => s !== '')) {
    const url = new URL(text)
    const user = decodeURIComponent(url.username)
    const pass = decodeURIComponent(url.password)
    if (user !== '') auth = pass === '' ? { token: user } : { user, pass }
    url.username = ''
    url.password = ''
    servers.push(`${url.protocol}//${url.host}`)
  }
  return { servers, auth }
}

function noop (): void {}
