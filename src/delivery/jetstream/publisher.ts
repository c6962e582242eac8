// Publishing delivery messages with their PubAcks: nats.js's js.publish makes a request (an inbox
// subscription and a timer) per message; here every PubAck comes to one wildcard inbox, matched by a
// token, with at most publishInFlightMax awaited at once. A message is sent (again, under the same
// message id, which the stream's duplicate window absorbs) until its PubAck comes or its batch gives
// up; while the connection is down nothing is sent, and on reconnect everything not acknowledged is
// sent again.

import { createInbox, headers as natsHeaders, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node'
import type { Clock } from '../../clock.js'
import { Fifo } from '../fifo.js'
import { PUBACK_SIZE_MAX_BYTES, PUBACK_RESEND_DELAY_MAX_MS } from '../limits.js'
import type { DeliveryRecord } from '../record.js'
import type { QueueLogger } from './options.js'
import { errorText } from './wait.js'

/** The header of a handed-back record's message: when it is due, in epoch milliseconds. */
export const DUE_HEADER = 'Beacon-Due'

/** A message to publish. */
export interface OutgoingMessage {
  subject: string
  data: Uint8Array
  msgId: string
  /** The records the message carries, kept for this node's consumer once the stream stored it. */
  records: DeliveryRecord[]
  /** A record handed back to the retry consumer: when it is due (epoch ms, header Beacon-Due); 0 otherwise. */
  dueAtMs: number
}

/** A message being published: sent (again) until its PubAck arrives or its batch gives up. */
interface Outgoing extends OutgoingMessage {
  token: string
  sentAtMs: number
  /** Sent on the current connection and waiting for its PubAck. */
  inFlight: boolean
  batch: PublishBatch
}

/** The messages of one publish(): it resolves once each has its PubAck. */
interface PublishBatch {
  left: number
  done: boolean
  resolve: () => void
  reject: (error: Error) => void
  timer: NodeJS.Timeout
}

export interface PublisherOptions {
  nc: NatsConnection
  clock: Clock
  log: QueueLogger
  publishInFlightMax: number
  publishTimeoutMs: number
  publishGiveUpMs: number
  /** A message was stored: its PubAck (holding its stream sequence) and what it carried. */
  onStored: (pubAck: Uint8Array, message: OutgoingMessage) => void
  /** A publish found no JetStream responder: the stream may be gone (a server back without its store). */
  onNoResponder: () => void
}

export class Publisher {
  private readonly nc: NatsConnection
  private readonly clock: Clock
  private readonly log: QueueLogger
  private readonly publishInFlightMax: number
  private readonly publishTimeoutMs: number
  private readonly publishGiveUpMs: number
  private readonly onStored: (pubAck: Uint8Array, message: OutgoingMessage) => void
  private readonly onNoResponder: () => void
  private readonly inbox: string
  private readonly ackSub: Subscription
  private readonly outgoing = new Map<string, Outgoing>()
  /** Waiting to be sent: new messages beyond the window, or resends after a reconnect or a timeout. */
  private readonly toSend = new Fifo<Outgoing>()
  private inFlight = 0
  private nextToken = 0
  private connected = true
  private stopped = false

  constructor (options: PublisherOptions) {
    this.nc = options.nc
    this.clock = options.clock
    this.log = options.log
    this.publishInFlightMax = options.publishInFlightMax
    this.publishTimeoutMs = options.publishTimeoutMs
    this.publishGiveUpMs = options.publishGiveUpMs
    this.onStored = options.onStored
    this.onNoResponder = options.onNoResponder
    this.inbox = createInbox()
    this.ackSub = this.nc.subscribe(`${this.inbox}.*`, { callback: (error, msg) => this.onPubAck(error, msg) })
  }

  /** A number no other publish of this node uses (to make message ids of their own). */
  get sequence (): number {
    return this.nextToken
  }

  /**
   * Send the messages; resolves once the stream stored every one, rejects after publishGiveUpMs
   * (`what` names them in the error). `prepare` makes them, its errors rejecting the publish.
   */
  publish (what: string, prepare: () => OutgoingMessage[]): Promise<void> {
    if (this.stopped) return Promise.reject(new Error('JetStreamQueue is stopped'))
    return new Promise<void>((resolve, reject) => {
      const batch: PublishBatch = {
        left: 1,
        done: false,
        resolve,
        reject,
        timer: setTimeout(() => this.giveUp(batch, `${what} within ${this.publishGiveUpMs} ms`), this.publishGiveUpMs),
      }
      let messages: OutgoingMessage[]
      try {
        messages = prepare()
      } catch (error) {
        this.giveUp(batch, `a delivery record could not be encoded: ${errorText(error)}`)
        return
      }
      batch.left = messages.length
      for (const message of messages) this.queueSend(batch, message)
      this.pumpSends()
    })
  }

  /** The connection went down: send nothing until it is back. */
  disconnected (): void {
    this.connected = false
  }

  /** The connection is back: PubAcks of the old one are lost, so send again everything not acknowledged. */
  reconnected (): void {
    this.connected = true
    for (const out of this.outgoing.values()) {
      if (!out.inFlight) continue
      out.inFlight = false
      this.inFlight--
      this.toSend.push(out)
    }
    this.pumpSends()
  }

  /** Send again what waited too long for its PubAck. */
  tick (nowMs: number): void {
    if (!this.connected) return
    let resend = false
    for (const out of this.outgoing.values()) {
      if (!out.inFlight || nowMs - out.sentAtMs < this.publishTimeoutMs) continue
      out.inFlight = false
      this.inFlight--
      this.toSend.push(out)
      resend = true
    }
    if (resend) this.pumpSends()
  }

  /** Publishes still waiting reject; no more PubAcks are listened to. */
  stop (): void {
    this.stopped = true
    const batches = new Set<PublishBatch>()
    for (const out of this.outgoing.values()) batches.add(out.batch)
    for (const batch of batches) this.giveUp(batch, 'the queue stopped')
    this.ackSub.unsubscribe()
  }

  private queueSend (batch: PublishBatch, message: OutgoingMessage): void {
    const token = (this.nextToken++).toString(36)
    const out: Outgoing = { ...message, token, sentAtMs: 0, inFlight: false, batch }
    this.outgoing.set(token, out)
    this.toSend.push(out)
  }

  private pumpSends (): void {
    if (!this.connected || this.stopped) return
    while (this.inFlight < this.publishInFlightMax) {
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
      out.sentAtMs = this.clock.nowMs()
      this.inFlight++
    }
  }

  private onPubAck (error: Error | null, msg: Msg): void {
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
      if (msg?.headers?.code === 503) this.onNoResponder()
      out.sentAtMs = this.clock.nowMs() - this.publishTimeoutMs + Math.min(PUBACK_RESEND_DELAY_MAX_MS, this.publishTimeoutMs / 2)
      out.inFlight = true // parked: tick() resends it once the (shortened) timeout passes
      this.inFlight++
      this.pumpSends()
      return
    }
    this.outgoing.delete(out.token)
    this.onStored(msg.data, out)
    const batch = out.batch
    if (!batch.done && --batch.left === 0) {
      batch.done = true
      clearTimeout(batch.timer)
      batch.resolve()
    }
    this.pumpSends()
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
}

/** `{"stream":"…","seq":…}` and nothing else looks like this: no JSON parse on the hot path. */
const PUBACK_PREFIX = Buffer.from('{"stream":"', 'latin1')

function pubAckProblem (msg: Msg): string | null {
  const status = msg.headers?.code
  const data = msg.data
  if (data.length === 0) return `status ${status ?? 'none'} without a PubAck`
  if (data.length > PUBACK_PREFIX.length && data.length < PUBACK_SIZE_MAX_BYTES && Buffer.from(data.buffer, data.byteOffset, PUBACK_PREFIX.length).equals(PUBACK_PREFIX)) {
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

/** The `seq` of a PubAck (`{"stream":"…","seq":42,…}`), or 0 when it has none. */
export function pubAckSeqOf (data: Uint8Array): number {
  const text = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('latin1')
  const at = text.indexOf('"seq":')
  if (at === -1) return 0
  const value = parseInt(text.slice(at + 6), 10)
  return Number.isInteger(value) && value > 0 ? value : 0
}
