// Consuming the delivery stream: every node pulls from the two durable consumers, feeds the records
// to its delivery workers, acks after the receiver's 2xx, hands a retry back, terms a dead one.
//
// Messages whose records are held by local workers (waiting for the rate, a slot, or in flight) get
// an in-progress heartbeat, so ack_wait only redelivers the messages of a node that is gone. A record
// the consumer hands out again while it is still held here is not fed twice.
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

import type { ConsumerMessages, JetStreamClient, JsMsg } from '@nats-io/jetstream'
import type { Clock } from '../../clock.js'
import { decodeMessage, encodeMessage, encodeRecord } from '../../store/record-codec.js'
import { RETRY_STATE_MARGIN_MS, STOP_CONSUMES_WAIT_MAX_MS, STOP_NAK_DELAY_MS } from '../limits.js'
import type { Feed, FeedAnswer } from '../queue.js'
import { laterThan, type DeliveryOutcome, type DeliveryRecord } from '../record.js'
import { deliveryCountOf } from './ack-reply.js'
import { consumeForever } from './consume-loop.js'
import type { QueueLogger } from './options.js'
import type { PublishedCache } from './published-cache.js'
import { DUE_HEADER, type Publisher } from './publisher.js'
import { Shares } from './shares.js'
import type { StreamSetup } from './stream-setup.js'
import { messageIdOf, RETRY_TOKEN, type Subjects } from './subjects.js'
import { withTimeout } from './wait.js'

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

/** A one-record message this node nak'd untried (busy, gone): how often, so those are not counted as attempts. */
interface HandedBack {
  seq: number
  naks: number
  forgetAtMs: number
}

export interface ConsumerOptions {
  js: JetStreamClient
  clock: Clock
  log: QueueLogger
  setup: StreamSetup
  publisher: Publisher
  published: PublishedCache
  subjects: Subjects
  nodeId: string
  ackWaitMs: number
  ackPendingMax: number
  pullMessagesMax: number
  feedRetryDelayMs: number
  goneRetriesMax: number
}

export class Consumer {
  private readonly js: JetStreamClient
  private readonly clock: Clock
  private readonly log: QueueLogger
  private readonly setup: StreamSetup
  private readonly publisher: Publisher
  private readonly published: PublishedCache
  private readonly subjects: Subjects
  private readonly nodeId: string
  private readonly ackWaitMs: number
  private readonly pullMessagesMax: number
  private readonly feedRetryDelayMs: number
  private readonly goneRetriesMax: number
  private feed: Feed | null = null
  /** The running consumes, main and retry. */
  private readonly messages = new Set<ConsumerMessages>()
  private consuming: Promise<void> | null = null
  /** The records fed to local workers and not settled yet, with the message each came in. */
  private readonly held = new Map<string, Carrier>()
  private readonly carriers = new Set<Carrier>()
  private readonly shares: Shares
  private readonly retrying = new Map<string, Retrying>()
  /** One-record messages this node nak'd untried, by record id. */
  private readonly handedBack = new Map<string, HandedBack>()
  private stopped = false

  constructor (options: ConsumerOptions) {
    this.js = options.js
    this.clock = options.clock
    this.log = options.log
    this.setup = options.setup
    this.publisher = options.publisher
    this.published = options.published
    this.subjects = options.subjects
    this.nodeId = options.nodeId
    this.ackWaitMs = options.ackWaitMs
    this.pullMessagesMax = options.pullMessagesMax
    this.feedRetryDelayMs = options.feedRetryDelayMs
    this.goneRetriesMax = options.goneRetriesMax
    this.shares = new Shares(options.ackPendingMax)
  }

  /** Records held by the local workers (fed, not yet settled). */
  get heldCount (): number {
    return this.held.size
  }

  /** Pull from both consumers, feeding `feed`, until stop(). */
  start (feed: Feed): void {
    this.feed = feed
    this.consuming = Promise.all([
      this.consumeLoop(this.setup.consumerName, msg => this.onMessage(msg)),
      this.consumeLoop(this.setup.retryConsumerName, msg => this.onRetryMessage(msg)),
    ]).then(noop)
  }

  /** A consumer created again: a consume running against the one that vanished waits for missed heartbeats before pulling again, so start it afresh. */
  restart (): void {
    for (const messages of this.messages) void messages.close()
  }

  /** Heartbeat held messages; forget stale retry state. */
  tick (nowMs: number, connected: boolean): void {
    if (connected) {
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

  settle (record: DeliveryRecord, outcome: DeliveryOutcome, delayMs: number): void {
    const carrier = this.held.get(record.id)
    if (carrier === undefined) return
    this.held.delete(record.id)
    const waitMs = Math.max(0, Math.round(delayMs))
    if (carrier.size > 1) {
      // In a batch message: a retry goes to the retry consumer on its own, due after its delay;
      // delivered and dead ones are done.
      if (outcome === 'retry') this.handBack(record, carrier, this.clock.nowMs() + waitMs)
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
      const forgetAtMs = this.clock.nowMs() + waitMs + 2 * this.ackWaitMs + RETRY_STATE_MARGIN_MS
      this.retrying.set(record.id, { record, forgetAtMs })
      const handed = this.handedBack.get(record.id)
      if (handed !== undefined) handed.forgetAtMs = Math.max(handed.forgetAtMs, forgetAtMs)
      // Waits in the retry consumer (as settled); if that publish fails, its message is nak'd with the delay
      // (nak(0) would be a plain nak: immediate redelivery, which is what a 0 delay means).
      carrier.nakMs = waitMs
      this.handBack(record, carrier, this.clock.nowMs() + waitMs)
    }
  }

  /** Stop pulling; records fed but not settled go back to the stream at once (another node, or the next start, takes them). */
  async stop (): Promise<void> {
    this.stopped = true
    this.feed = null
    await withTimeout(Promise.all([...this.messages].map(messages => messages.close())), STOP_CONSUMES_WAIT_MAX_MS)
    await withTimeout(this.consuming ?? Promise.resolve(), STOP_CONSUMES_WAIT_MAX_MS)
    for (const carrier of this.carriers) carrier.msg.nak(STOP_NAK_DELAY_MS)
    this.carriers.clear()
    this.shares.clear()
    this.held.clear()
    this.retrying.clear()
    this.handedBack.clear()
  }

  /** Pull for as long as the queue runs (consume-loop.ts). */
  private consumeLoop (consumer: string, onMessage: (msg: JsMsg) => void): Promise<void> {
    return consumeForever({
      js: this.js, clock: this.clock, log: this.log, stream: this.setup.streamName, consumer, pullMessagesMax: this.pullMessagesMax,
      what: 'delivery', running: this.messages, stopped: () => this.stopped, ensureSoon: () => this.setup.ensureSoon(), onMessage,
    })
  }

  /** A message of the retry consumer: nak'd with the time left until it is due, then fed as the main consumer's are. */
  private onRetryMessage (msg: JsMsg): void {
    const due = Number(msg.headers?.get(DUE_HEADER) ?? '')
    const leftMs = Number.isFinite(due) ? due - this.clock.nowMs() : 0
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
      records = (this.published.size === 0 ? undefined : this.published.take(msg)) ?? decodeMessage(msg.data) as DeliveryRecord[]
      if (records.length === 0 || records.some(record => typeof record?.id !== 'string')) throw new Error('no record id')
    } catch (error) {
      this.log.error({ err: error, subject: msg.subject, seq: msg.seq }, 'undecodable message in the delivery stream; dropped')
      msg.term()
      return
    }
    const nowMs = this.clock.nowMs()
    for (const record of records) {
      const held = this.held.get(record.id)
      if (held !== undefined && held.msg.seq === msg.seq) {
        // Handed out again while local workers still have it (ack_wait passed): keep the newer handle.
        held.msg = msg
        held.lastBeatMs = nowMs
        return
      }
    }
    if (!fromRetry && this.shares.full(msg.subject)) {
      // Its webhook (or account) holds its share of the main consumer already: the records wait in the retry one.
      const carrier: Carrier = { msg, size: records.length, left: records.length, lastBeatMs: nowMs, failed: false, nakMs: this.feedRetryDelayMs, share: null }
      this.carriers.add(carrier)
      for (const record of records) {
        if (this.held.has(record.id)) this.release(carrier, false)
        else this.handBack(record, carrier, nowMs + this.feedRetryDelayMs)
      }
      return
    }
    if (records.length === 1) return this.onRecord(msg, records[0]!, nowMs, fromRetry)
    const carrier: Carrier = { msg, size: records.length, left: records.length, lastBeatMs: nowMs, failed: false, nakMs: this.feedRetryDelayMs, share: msg.subject }
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
      this.handBack(record, carrier, nowMs + this.feedRetryDelayMs)
    }
  }

  /** A message of one record: settled by its own ack, nak (with the retry's delay) or term. */
  private onRecord (msg: JsMsg, record: DeliveryRecord, nowMs: number, fromRetry: boolean): void {
    if (this.held.has(record.id)) {
      // Another message of the same record (a replay) while the first is here: after it.
      msg.nak(this.feedRetryDelayMs)
      return
    }
    const retrying = this.retrying.get(record.id)
    if (retrying !== undefined) {
      this.retrying.delete(record.id)
      // As this node settled it, unless the message carries a later state (other nodes attempted it
      // since, or it was replayed): an earlier copy would repeat attempts and send an old replay's.
      if (!laterThan(record, retrying.record)) record = retrying.record
    }
    // Deliveries of this message that did not end here (a crash, another node) count as attempts;
    // those this node handed back untried (its worker full, the webhook unknown here) do not. A
    // handed-back record carries its attempt as settled (its deliveries are mostly waits until due).
    const deliveries = deliveryCountOf(msg)
    const handed = this.handedBack.get(record.id)
    const untried = handed !== undefined && handed.seq === msg.seq ? handed.naks : 0
    if (!fromRetry && deliveries - untried > record.attempt) record = { ...record, attempt: deliveries - untried }
    const carrier: Carrier = { msg, size: 1, left: 1, lastBeatMs: nowMs, failed: false, nakMs: this.feedRetryDelayMs, share: fromRetry ? null : msg.subject }
    this.addCarrier(carrier)
    this.held.set(record.id, carrier)
    const answer = this.tryFeed(record)
    if (answer !== 'busy' && answer !== 'gone') return
    if (this.held.get(record.id) !== carrier) return
    this.held.delete(record.id)
    // A worker without room, or a webhook unknown here: the record waits in the retry consumer, not in
    // the main one's shared pending (which a deleted webhook's backlog would otherwise fill).
    if (!fromRetry) return this.handBack(record, carrier, nowMs + this.feedRetryDelayMs)
    this.dropCarrier(carrier)
    if (answer === 'busy' || deliveries <= this.goneRetriesMax) {
      this.handedBack.set(record.id, { seq: msg.seq, naks: untried + 1, forgetAtMs: nowMs + this.feedRetryDelayMs * deliveries + 2 * this.ackWaitMs + RETRY_STATE_MARGIN_MS })
      msg.nak(answer === 'busy' ? this.feedRetryDelayMs : this.feedRetryDelayMs * deliveries)
    } else {
      this.log.warn({ id: record.id, account: record.account, webhook: record.webhookId }, 'delivery of an unknown webhook dropped from the stream')
      msg.term()
    }
  }

  private addCarrier (carrier: Carrier): void {
    this.carriers.add(carrier)
    if (carrier.share !== null) this.shares.add(carrier.share)
  }

  private dropCarrier (carrier: Carrier): void {
    if (!this.carriers.delete(carrier) || carrier.share === null) return
    this.shares.remove(carrier.share)
  }

  private tryFeed (record: DeliveryRecord): FeedAnswer {
    try {
      return this.feed!(record)
    } catch (error) {
      this.log.error({ err: error, id: record.id }, 'feeding a delivery failed')
      return 'busy'
    }
  }

  /**
   * A record that must wait (a retry, a busy worker) goes to the retry consumer: published alone, as it
   * is now (attempt, history, due time), on its webhook's retry subject under a message id of its own
   * (the duplicate window must not take it for its first publish); its message is settled once stored.
   */
  private handBack (record: DeliveryRecord, carrier: Carrier, dueAtMs: number): void {
    const publish = this.stopped
      ? Promise.reject(new Error('stopped'))
      : this.publisher.publish('a handed-back record was not stored', () => [{
        subject: `${this.subjects.of(record)}.${RETRY_TOKEN}`,
        data: encodeMessage([encodeRecord(record)]),
        msgId: `${messageIdOf(record, this.nodeId)}#${this.clock.nowMs().toString(36)}.${this.publisher.sequence.toString(36)}`,
        records: [record],
        dueAtMs,
      }])
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
}

function noop (): void {}
