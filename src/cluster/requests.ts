// Request/reply in cluster mode (changelog appends, forwarded requests, actor messages, calls to a named node)
// without nats.js's per-request machinery. `nc.request` (and `js.publish`, which is built on it) makes a
// request object, a timer and, even with `noAsyncTraces`, a `RequestError("cancelled")` with its stack
// trace for every request that succeeds (its RequestOne rejects its settled promise once more when it
// is done): 8-10 % of a cluster node's CPU in a bench:cluster profile (2026-11-26).
//
// Here: one subscription on a wildcard inbox per Requests, each request publishing with the reply
// subject `<inbox>.<n>`, its promise settled by the answer, by NATS's "no responders" status, or by a
// sweep every SWEEP_MS that times out what waited too long (to within SWEEP_MS). Failures are shared
// constant errors: a caller tells them apart by identity, and no stack trace is built per request.

import { createInbox, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/transport-node'

/** Why a request got no answer: no subscriber, no answer in time, or the connection closing. */
export class RequestFailed extends Error {
  constructor (readonly reason: 'no responders' | 'timeout' | 'closed') {
    super(`NATS request failed: ${reason}`)
    this.name = 'RequestFailed'
  }
}

export const NO_RESPONDERS = new RequestFailed('no responders')
export const TIMED_OUT = new RequestFailed('timeout')
export const CLOSED = new RequestFailed('closed')

const SWEEP_MS = 25

interface Waiting {
  resolve: (msg: Msg) => void
  reject: (error: RequestFailed) => void
  deadlineMs: number
}

export class Requests {
  private readonly nc: NatsConnection
  private readonly prefix: string
  private readonly waiting = new Map<number, Waiting>()
  private readonly subscription: Subscription
  private readonly sweeper: NodeJS.Timeout
  private next = 0
  private closed = false

  constructor (nc: NatsConnection) {
    this.nc = nc
    this.prefix = createInbox() + '.'
    this.subscription = nc.subscribe(this.prefix + '*', { callback: (error, msg) => { if (error === null) this.settle(msg) } })
    this.sweeper = setInterval(this.sweep, SWEEP_MS)
    this.sweeper.unref()
  }

  /**
   * Publishes `payload` to `subject` with a reply subject of this Requests and resolves with the first
   * answer; rejects with NO_RESPONDERS, TIMED_OUT (after about `timeoutMs`) or CLOSED.
   */
  request (subject: string, payload: Uint8Array, timeoutMs: number, headers?: MsgHdrs): Promise<Msg> {
    const n = ++this.next
    return new Promise<Msg>((resolve, reject) => {
      if (this.closed || this.nc.isClosed()) return reject(CLOSED)
      this.waiting.set(n, { resolve, reject, deadlineMs: performance.now() + timeoutMs })
      try {
        this.nc.publish(subject, payload, { reply: this.prefix + n, headers })
      } catch {
        // Closing or draining: nothing was sent.
        this.waiting.delete(n)
        reject(CLOSED)
      }
    })
  }

  /** Rejects what still waits with CLOSED and stops listening. */
  close (): void {
    if (this.closed) return
    this.closed = true
    clearInterval(this.sweeper)
    if (!this.nc.isClosed()) this.subscription.unsubscribe()
    for (const waiting of this.waiting.values()) waiting.reject(CLOSED)
    this.waiting.clear()
  }

  private settle (msg: Msg): void {
    const n = Number(msg.subject.slice(this.prefix.length))
    const waiting = this.waiting.get(n)
    if (waiting === undefined) return // timed out already, or a second answer
    this.waiting.delete(n)
    if (msg.data.length === 0 && msg.headers?.code === 503) waiting.reject(NO_RESPONDERS)
    else waiting.resolve(msg)
  }

  private readonly sweep = (): void => {
    // The connection closed (the node stopping): nothing will answer, and the timer goes.
    if (this.nc.isClosed()) return this.close()
    if (this.waiting.size === 0) return
    const nowMs = performance.now()
    for (const [n, waiting] of this.waiting) {
      if (waiting.deadlineMs > nowMs) continue
      this.waiting.delete(n)
      waiting.reject(TIMED_OUT)
    }
  }
}
