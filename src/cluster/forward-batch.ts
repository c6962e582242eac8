// Batched forwarding (issue 32, "A cheaper hop"): the requests one node forwards to one owner node are
// sent together, one NATS message per target node per event-loop turn (a setImmediate flush) or per
// `max` requests, and the owner's answers come back together, one message per turn of its own. NATS
// then routes a message per batch instead of one per request and per answer, and each side parses and
// dispatches one message for many requests: the hop's cost is mostly per message, not per byte.
//
// Why per owner node, and not per partition subject: with 64 partitions over a few nodes, the requests
// of one turn rarely share a partition, so per-partition batches would hold one request each. The
// sender knows the owner it is waiting for (Ownership.ownerReady), so it sends to that node's subject
// (`beacon.<cluster>.fwdn.<node>`); the owner checks each request's partition against `owns` and answers
// "moved" for one it does not own, exactly as on the partition subject. Only the first send of a request
// goes this way: its retries take the partition subject (src/cluster/forwarder.ts), whose NATS interest
// follows the owner itself, so a sender whose ownership view lags, or a stalled former owner still
// subscribed to its node subject, costs at most one attempt's wait (attemptTimeoutMs) and never captures
// the request: a stalled node answers nothing, and once it runs again it answers "moved" for what it no
// longer owns. The owner dedupes request ids across both paths (one RecentAnswers), so a retry on the
// partition subject joins the batched first execution.
//
// Wire: a batch is frames [u32 length][request bytes] (each request the forwarder's msgpack, id and
// partition inside), published with the reply subject `<inbox>.<batch number>`. An answer is frames
// [u32 index in the batch][u32 length][answer bytes], as many messages as the owner's turns it took (a
// slow request does not hold back the answers of the others). NATS's "no responders" status on that
// reply subject fails every request of the batch still waiting; a sweep fails those that waited past
// their own timeout. Every frame fits in max_payload: the forwarder refuses or shrinks what does not.

import { createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node'
import { CLOSED, NO_RESPONDERS, TIMED_OUT, type RequestFailed } from './requests.js'

/** Bytes a request takes in a batch beyond its own: its length. */
export const REQUEST_FRAME_BYTES = 4
/** Bytes an answer takes in a batch's answer beyond its own: its index and its length. */
export const ANSWER_FRAME_BYTES = 8

const SWEEP_MS = 25

interface Waiter {
  resolve: (answer: Uint8Array) => void
  reject: (error: RequestFailed) => void
  deadlineMs: number
}

interface Sent {
  /** Per index, the request still waiting, or null once settled. */
  waiters: Array<Waiter | null>
  left: number
}

interface Pending {
  frames: Uint8Array[]
  bytes: number
  waiters: Waiter[]
}

export class BatchSender {
  /** Batches published (each one NATS message), for tests and the benchmark's account. */
  batches = 0
  private readonly nc: NatsConnection
  private readonly subjectOf: (node: string) => string
  private readonly max: number
  private readonly prefix: string
  private readonly subscription: Subscription
  private readonly sweeper: NodeJS.Timeout
  private readonly pending = new Map<string, Pending>()
  private readonly sent = new Map<number, Sent>()
  private flushScheduled = false
  private next = 0
  private closed = false

  constructor (nc: NatsConnection, subjectOf: (node: string) => string, max: number) {
    this.nc = nc
    this.subjectOf = subjectOf
    this.max = max
    this.prefix = createInbox() + '.'
    this.subscription = nc.subscribe(this.prefix + '*', { callback: (error, msg) => { if (error === null) this.settle(msg) } })
    this.sweeper = setInterval(this.sweep, SWEEP_MS)
    this.sweeper.unref()
  }

  /**
   * Queues `payload` for `node`'s batch of this turn and resolves with the owner's answer bytes; rejects
   * with NO_RESPONDERS, TIMED_OUT (after about `timeoutMs`) or CLOSED. `payload` plus REQUEST_FRAME_BYTES
   * must fit in max_payload.
   */
  send (node: string, payload: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    return new Promise<Uint8Array>((resolve, reject) => {
      if (this.closed || this.nc.isClosed()) return reject(CLOSED)
      const maxPayload = this.nc.info?.max_payload ?? Infinity
      const frameBytes = REQUEST_FRAME_BYTES + payload.byteLength
      let pending = this.pending.get(node)
      if (pending !== undefined && pending.bytes + frameBytes > maxPayload) {
        this.publish(node, pending)
        pending = undefined
      }
      if (pending === undefined) {
        pending = { frames: [], bytes: 0, waiters: [] }
        this.pending.set(node, pending)
      }
      const length = Buffer.allocUnsafe(REQUEST_FRAME_BYTES)
      length.writeUInt32BE(payload.byteLength, 0)
      pending.frames.push(length, payload)
      pending.bytes += frameBytes
      pending.waiters.push({ resolve, reject, deadlineMs: performance.now() + timeoutMs })
      if (pending.waiters.length >= this.max) {
        this.publish(node, pending)
        return
      }
      if (!this.flushScheduled) {
        this.flushScheduled = true
        setImmediate(this.flush)
      }
    })
  }

  /** Rejects what still waits with CLOSED and stops listening. */
  close (): void {
    if (this.closed) return
    this.closed = true
    clearInterval(this.sweeper)
    if (!this.nc.isClosed()) this.subscription.unsubscribe()
    for (const pending of this.pending.values()) for (const waiter of pending.waiters) waiter.reject(CLOSED)
    this.pending.clear()
    for (const sent of this.sent.values()) for (const waiter of sent.waiters) waiter?.reject(CLOSED)
    this.sent.clear()
  }

  private readonly flush = (): void => {
    this.flushScheduled = false
    for (const [node, pending] of this.pending) this.publish(node, pending)
  }

  private publish (node: string, pending: Pending): void {
    this.pending.delete(node)
    const n = ++this.next
    this.sent.set(n, { waiters: pending.waiters, left: pending.waiters.length })
    try {
      this.nc.publish(this.subjectOf(node), Buffer.concat(pending.frames, pending.bytes), { reply: this.prefix + n })
      this.batches++
    } catch {
      // Closing or draining: nothing was sent.
      this.sent.delete(n)
      for (const waiter of pending.waiters) waiter.reject(CLOSED)
    }
  }

  private settle (msg: Msg): void {
    const n = Number(msg.subject.slice(this.prefix.length))
    const sent = this.sent.get(n)
    if (sent === undefined) return // timed out already
    const data = msg.data
    if (data.length === 0 && msg.headers?.code === 503) {
      this.sent.delete(n)
      for (const waiter of sent.waiters) waiter?.reject(NO_RESPONDERS)
      return
    }
    const view = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
    let at = 0
    while (at + ANSWER_FRAME_BYTES <= view.length) {
      const index = view.readUInt32BE(at)
      const length = view.readUInt32BE(at + 4)
      at += ANSWER_FRAME_BYTES
      const waiter = sent.waiters[index]
      if (waiter !== undefined && waiter !== null) {
        sent.waiters[index] = null
        sent.left--
        waiter.resolve(data.subarray(at, at + length))
      }
      at += length
    }
    if (sent.left <= 0) this.sent.delete(n)
  }

  private readonly sweep = (): void => {
    if (this.nc.isClosed()) return this.close()
    if (this.sent.size === 0) return
    const nowMs = performance.now()
    for (const [n, sent] of this.sent) {
      for (let i = 0; i < sent.waiters.length; i++) {
        const waiter = sent.waiters[i]
        if (waiter === null || waiter === undefined || waiter.deadlineMs > nowMs) continue
        sent.waiters[i] = null
        sent.left--
        waiter.reject(TIMED_OUT)
      }
      if (sent.left <= 0) this.sent.delete(n)
    }
  }
}

/** The requests of a batch message, in order (their index is their place here). */
export function requestsOf (data: Uint8Array): Uint8Array[] {
  const view = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  const out: Uint8Array[] = []
  let at = 0
  while (at + REQUEST_FRAME_BYTES <= view.length) {
    const length = view.readUInt32BE(at)
    at += REQUEST_FRAME_BYTES
    if (at + length > view.length) throw new Error(`batch truncated: a request of ${length} bytes at ${at} in ${view.length}`)
    out.push(data.subarray(at, at + length))
    at += length
  }
  return out
}

/**
 * The owner's side of one batch: answers are added as they are computed and published together once
 * per event-loop turn (or sooner, when the next would not fit in max_payload) to the batch's reply subject.
 */
export class BatchAnswers {
  private frames: Uint8Array[] = []
  private bytes = 0
  private scheduled = false

  constructor (private readonly nc: NatsConnection, private readonly reply: string) {}

  add (index: number, answer: Uint8Array): void {
    const frameBytes = ANSWER_FRAME_BYTES + answer.byteLength
    if (this.bytes + frameBytes > (this.nc.info?.max_payload ?? Infinity)) this.flush()
    const head = Buffer.allocUnsafe(ANSWER_FRAME_BYTES)
    head.writeUInt32BE(index, 0)
    head.writeUInt32BE(answer.byteLength, 4)
    this.frames.push(head, answer)
    this.bytes += frameBytes
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(this.flush)
    }
  }

  private readonly flush = (): void => {
    this.scheduled = false
    if (this.frames.length === 0) return
    const data = Buffer.concat(this.frames, this.bytes)
    this.frames = []
    this.bytes = 0
    try {
      this.nc.publish(this.reply, data)
    } catch {
      // The connection is closing: the sender times out and retries.
    }
  }
}
