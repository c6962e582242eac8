// Messages between actors whose partitions different nodes own (cluster mode, issue 17 "Cross-partition
// work"): a visitor telling its profile of a change, erasure and export walking a profile's devices.
// `ActorSender` is what those callers hold: in embedded mode it is the ActorRuntime itself (no check, no
// allocation added: the kinds default to it), in cluster mode an `ActorRouter`, which runs the message
// here when this node owns the key's partition (one `owns` check, then runtime.send) and otherwise sends
// it over NATS to the owner, which runs it in its own runtime and answers the reply value.
//
// Wire: request/reply on `beacon.<cluster>.actor.<partition>`, subscribed by the partition's owner, no
// queue group (as src/cluster/forwarder.ts, and for the same reasons: NATS interest is the routing
// table; a stalled former owner cannot capture messages, since every subscriber gets each one and a
// subscriber that does not own the partition answers "moved"). Payloads are plain msgpack: request
// {i: request id, p, k: kind name, a: account, d: id, m: message}, reply {k:'r', v: value, r?: 1 when
// answered from the message's Idempotency-Key record (its claim's `replayed`, set at the sender too)} or
// {k:'m', n: node} ("moved") or {k:'e', c: code, t: text, h: headers} (an ApiError, raised again at the
// sender). Messages and replies are plain data (device summaries, views, snapshots): compiled objects
// (campaign sets, segment sets) never cross.
//
// Delivery is at least once: the sender waits for an owner (`Ownership.ownerReady`), sends, and sends
// again on no responders, no answer within the attempt time, a lost connection or "moved", within one
// budget (5 s), then rejects 503 `unavailable` with `Retry-After: 1`. A message run here that the entity
// log refuses (503 `partition_moved`: the partition went while it ran) is sent to the new owner.
//
// Application is exactly once, in two layers:
// - A retry that reaches the same owner joins the first execution (the owner keeps each request id's
//   answer for `dedupeMs`), as the forwarder does.
// - A retry that reaches another owner (or a message re-sent after the sender crashed and its request
//   was replayed) is recognised by the receiving entity itself, in its state, written in the same
//   entity write as the change: a profile records the ids of the recent non-idempotent messages it
//   applied (`unlink`: a bounded ring, `ProfileState.applied`) and skips a repeat, answering as before;
//   a device summary carries its version (`DeviceSummary.seq`, never lower than the sender's clock)
//   and replaces the profile's copy only if not older, so a repeat or a late copy changes nothing.
//   Why versions rather than ids for summaries: the visitor's state may roll back to its last durable
//   write when its owner dies, so an id derived from the visitor's state would be sent again with other
//   content (a different event after the crash) and wrongly skipped; a summary is the device's whole
//   current copy, so "latest version wins" is both idempotent and order-proof.

import { nuid, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node'
import { Packr } from 'msgpackr'
import { ApiError, type ErrorCode } from '../src/errors.js'
import { log } from '../src/log.js'
import type { Ownership } from '../src/cluster/ownership.js'
import { RecentAnswers } from '../src/cluster/recent-answers.js'
import { Requests } from '../src/cluster/requests.js'
import type { ActorKind, ActorRuntime, Message, Replies, ReplyOf } from './runtime.js'
import type { IdempotencyClaim } from './idempotent.js'

/** Who delivers a message to an actor: the runtime (embedded mode) or the router (cluster mode). */
export interface ActorSender {
  send<S, M extends Message, P extends Replies<M>, const T extends M> (kind: ActorKind<S, M, P>, account: string, id: string, message: T): Promise<ReplyOf<P, T>>
}

export interface ActorRouterOptions {
  nc: NatsConnection
  /** The cluster's name: a subject token. */
  cluster: string
  ownership: Ownership
  runtime: ActorRuntime
  /** Whole time a message may take before 503 unavailable; default 5000. */
  budgetMs?: number
  /** How long one send waits for an answer before it is sent again (same request id); default 1000. */
  attemptTimeoutMs?: number
  /** How long an owner keeps a request id's answer for retries; default 10000 (at most dedupeMax). */
  dedupeMs?: number
  dedupeMax?: number
  /** How often the owner checks `owns` against its subscriptions; default 50. */
  syncIntervalMs?: number
  /** Told of each message sent to another node: how it ended and in how long. */
  observe?: ((outcome: 'answered' | 'unavailable', durationMs: number) => void) | null
}

interface WireRequest { i: string, p: number, k: string, a: string, d: string, m: Message }
type WireReply =
  | { k: 'r', v: unknown, r?: 1 }
  | { k: 'm', n: string }
  | { k: 'e', c: string, t: string, h: Record<string, string> | null }

const packr = new Packr({ useRecords: false, moreTypes: false })
const BACKOFF_FIRST_MS = 10
const BACKOFF_MAX_MS = 100

export class ActorRouter implements ActorSender {
  readonly subjectPrefix: string
  private readonly nc: NatsConnection
  /** Requests to the owner: sent on `nc`, answered on this node's own inbox. */
  private readonly requests: Requests
  private readonly ownership: Ownership
  private readonly runtime: ActorRuntime
  private readonly budgetMs: number
  private readonly attemptTimeoutMs: number
  private readonly observe: ActorRouterOptions['observe']
  private readonly kinds = new Map<string, ActorKind<any, any, any>>()
  private readonly subscriptions = new Map<number, Subscription>()
  private readonly answers: RecentAnswers
  private readonly timer: NodeJS.Timeout
  private closed = false
  /** Messages sent to another node, and those that got 503 unavailable (for tests and metrics). */
  sentRemote = 0
  unavailable = 0

  constructor (options: ActorRouterOptions) {
    this.nc = options.nc
    this.requests = new Requests(options.nc)
    this.ownership = options.ownership
    this.runtime = options.runtime
    this.subjectPrefix = `beacon.${options.cluster}.actor`
    this.budgetMs = options.budgetMs ?? 5000
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? 1000
    this.answers = new RecentAnswers(options.dedupeMs ?? 10_000, options.dedupeMax ?? 10_000, Date.now)
    this.observe = options.observe ?? null
    this.timer = setInterval(() => this.sync(), options.syncIntervalMs ?? 50)
    this.timer.unref()
  }

  send<S, M extends Message, P extends Replies<M>, const T extends M> (kind: ActorKind<S, M, P>, account: string, id: string, message: T): Promise<ReplyOf<P, T>> {
    const key = kind.key === undefined ? id : kind.key(id)
    const partition = this.ownership.partitionOf(account, key)
    if (!this.ownership.owns(partition)) return this.remote(partition, kind.name, account, key, message) as Promise<ReplyOf<P, T>>
    return this.runtime.send(kind, account, key, message).catch((error: unknown) => {
      // The partition went while the message ran here (its write refused, nothing acknowledged): to the new owner.
      if (!isMoved(error)) throw error
      return this.remote(partition, kind.name, account, key, message) as Promise<ReplyOf<P, T>>
    })
  }

  /** Start answering messages for the partitions this node owns, for these kinds (by name). */
  serve (kinds: ReadonlyArray<ActorKind<any, any, any>>): void {
    for (const kind of kinds) this.kinds.set(kind.name, kind)
    this.sync()
  }

  subject (partition: number): string {
    return `${this.subjectPrefix}.${partition}`
  }

  /** Subscribe to the partitions owned now, leave the others. Cheap; idempotent. */
  sync (): void {
    if (this.closed || this.kinds.size === 0 || this.nc.isClosed()) return
    for (let p = 0; p < this.ownership.partitions; p++) {
      const owns = this.ownership.owns(p)
      const subscription = this.subscriptions.get(p)
      if (owns && subscription === undefined) {
        try {
          this.subscriptions.set(p, this.nc.subscribe(this.subject(p), { callback: (error, msg) => { if (error === null) this.answer(p, msg) } }))
        } catch (error) {
          log.warn({ err: error, partition: p }, 'cannot subscribe to actor messages')
          return
        }
      } else if (!owns && subscription !== undefined) {
        this.subscriptions.delete(p)
        subscription.drain().catch(() => {})
      }
    }
  }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearInterval(this.timer)
    const subscriptions = [...this.subscriptions.values()]
    this.subscriptions.clear()
    await Promise.all(subscriptions.map(subscription => subscription.drain().catch(() => {})))
  }

  private async remote (partition: number, kind: string, account: string, id: string, message: Message): Promise<unknown> {
    const startMs = Date.now()
    const deadline = startMs + this.budgetMs
    const payload = packr.pack({ i: nuid.next(), p: partition, k: kind, a: account, d: id, m: message } satisfies WireRequest)
    const subject = this.subject(partition)
    this.sentRemote++
    let notNode: string | undefined
    let backoffMs = BACKOFF_FIRST_MS
    for (;;) {
      let remaining = deadline - Date.now()
      if (remaining <= 0) break
      const owner = await this.ownership.ownerReady(partition, remaining, notNode)
      remaining = deadline - Date.now()
      if (owner === null || remaining <= 0) break
      let answer: WireReply | null = null
      try {
        const msg = await this.requests.request(subject, payload, Math.min(remaining, this.attemptTimeoutMs))
        answer = packr.unpack(msg.data) as WireReply
      } catch {
        // No responders (nobody serves the partition yet), a timeout, the connection lost: again.
      }
      if (answer !== null && answer.k === 'r') {
        this.observe?.('answered', Date.now() - startMs)
        const claim = claimOf(message)
        if (answer.r === 1 && claim !== undefined) claim.replayed = true
        return answer.v
      }
      if (answer !== null && answer.k === 'e') {
        this.observe?.('answered', Date.now() - startMs)
        throw new ApiError(answer.c as ErrorCode, answer.t, undefined, answer.h)
      }
      if (answer !== null) notNode = answer.n
      const pause = Math.min(backoffMs, deadline - Date.now())
      if (pause > 0) await sleep(pause)
      backoffMs = Math.min(backoffMs * 2, BACKOFF_MAX_MS)
    }
    this.unavailable++
    this.observe?.('unavailable', Date.now() - startMs)
    throw new ApiError('unavailable', `The partition ${partition} (a ${kind} another node owns) has no node answering for it (waited ${this.budgetMs} ms); retry.`, undefined, { 'Retry-After': '1' })
  }

  private answer (partition: number, msg: Msg): void {
    let request: WireRequest
    try {
      request = packr.unpack(msg.data) as WireRequest
    } catch (error) {
      log.warn({ err: error, partition }, 'actor message not decodable; dropped')
      return
    }
    const nowMs = Date.now()
    const known = this.answers.get(request.i, nowMs)
    if (known !== undefined) {
      known.then(bytes => this.respond(msg, bytes), () => this.respond(msg, null))
      return
    }
    const kind = this.kinds.get(request.k)
    if (this.closed || kind === undefined || request.p !== partition || !this.ownership.owns(partition)) {
      this.respond(msg, null)
      if (!this.closed) this.sync()
      return
    }
    const reply = this.run(kind, request)
    this.answers.keep(request.i, reply, nowMs)
    reply.then(bytes => this.respond(msg, bytes), () => this.respond(msg, null))
  }

  /** The encoded reply, or null ("moved") when the partition went while the message ran. */
  private async run (kind: ActorKind<any, any, any>, request: WireRequest): Promise<Uint8Array | null> {
    try {
      const value: unknown = await this.runtime.send(kind, request.a, request.d, request.m)
      // Answered from an Idempotency-Key record: the sender's claim is told so, as a local send's would be.
      if (claimOf(request.m)?.replayed === true) return packr.pack({ k: 'r', v: value, r: 1 } satisfies WireReply)
      return packr.pack({ k: 'r', v: value } satisfies WireReply)
    } catch (error) {
      if (isMoved(error)) return null
      if (error instanceof ApiError) {
        const item = error.items[0]!
        return packr.pack({ k: 'e', c: item.code, t: item.message, h: error.headers } satisfies WireReply)
      }
      log.error({ err: error, kind: request.k, type: request.m.type }, 'actor message failed')
      return packr.pack({ k: 'e', c: 'internal', t: 'Unexpected server error.', h: null } satisfies WireReply)
    }
  }

  private respond (msg: Msg, bytes: Uint8Array | null): void {
    try {
      msg.respond(bytes ?? packr.pack({ k: 'm', n: this.ownership.nodeId } satisfies WireReply))
    } catch {
      // The connection is closing: the sender times out and retries.
    }
  }
}

/** A write message's Idempotency-Key claim (actors/idempotent.ts), if it carries one. */
function claimOf (message: Message): IdempotencyClaim | undefined {
  return (message as { idem?: IdempotencyClaim }).idem
}

function isMoved (error: unknown): boolean {
  return error instanceof ApiError && error.items[0]?.code === 'partition_moved'
}

function sleep (ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}
