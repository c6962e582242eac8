// Request routing between the nodes of a cluster (issue 17, "Routing"): a request for a key whose
// partition this node does not own is sent to the owner over NATS request/reply, and the owner's answer
// (status, headers, body bytes) comes back to be written unchanged.
//
// Subjects: one per partition, `beacon.<cluster>.fwd.<partition>`, subscribed by the node that owns the
// partition (`Ownership.owns`), not one per node. The sender then needs no view of who the owner is:
// NATS interest is the routing table, so a sender whose lease view lags still reaches the node that
// serves the partition now, and a stalled former owner (paused, its lease lapsed, its connection not yet
// timed out) cannot capture requests as it would in a queue group: every subscriber gets each request,
// the owner runs it, a subscriber that does not own the partition answers "moved", and the sender takes
// the first answer. A handover thus shows as a short gap (no responders: nobody subscribed yet) or a
// short overlap (a "moved" may come first: the retry reaches the owner, which is already running that
// request id and answers it once done, below). The owner keeps its subscriptions in line with `owns` by
// polling it (every `syncIntervalMs`, P cheap calls) and whenever `sync()` is called (the cluster node
// calls it when it gains or loses a partition).
//
// Sender (`forward`): within one budget (`budgetMs`, 5 s by default, the whole exchange included, plus
// the time the account's requests may spend at the owner on purpose: `handlerExtraMs`, its sync
// webhooks' timeout) it
// waits for the partition to have an owner (`Ownership.ownerReady`), sends, and on no responders, no
// answer within `attemptTimeoutMs` (1 s), a lost connection or "moved" waits a little (and, after
// "moved", for an owner other than the node that said so) and sends again. When the budget is spent it
// rejects with 503 `unavailable` and `Retry-After: 1`: never a silent loss, never a 500. A request
// whose handler at the owner takes longer than the budget gets that 503 too (the owner may still
// complete it).
//
// Retries and writes: each forwarded request carries an id, made before the first send and the same on
// every retry; the owner keeps the answer being computed of each id, and the answer for `dedupeMs`
// (10 s, twice the budget) once computed, so a retry that reaches the same owner (after an attempt timed
// out: a slow handler, a lost reply) gets the first execution's answer instead of running it again. A
// retry that reaches another owner (the partition moved meanwhile: the first owner paused or killed
// after it applied the write, before its answer came back) is not deduplicated here but by the write
// itself: the handler gets the id, and a public write the client sent without an Idempotency-Key claims
// it as an internal key (src/http/idempotency-key.ts, FORWARDED_KEY_PREFIX), whose record rides in the
// write's changelog entry, so the new owner answers the retry from it instead of applying the write
// again. Those records are kept IDEMPOTENCY_FORWARDED_RETENTION_MS (5 min), longer than any retry.
//
// Batching (`batch`, on by default; BEACON_FORWARD_BATCH): a request's first send goes in a batch to the
// node its ownership view names, with the other requests for that node of the same event-loop turn,
// and is answered in a batch (src/cluster/forward-batch.ts, which says why per node and how the
// guarantees above hold); its retries take the partition subject as above. Off, every send takes the
// partition subject. A node serves both ways whatever its own setting, so nodes may differ in it.
//
// Size: a request or an answer travels as one NATS message, at most the server's max_payload (1 MB by
// default). A larger request is refused at once (413 body_too_large); a larger answer becomes a 500
// naming the limit, logged at the owner.

import { nuid, type NatsConnection, type Msg, type Subscription } from '@nats-io/transport-node'
import { Packr } from 'msgpackr'
import { ApiError } from '../errors.js'
import { log } from '../log.js'
import { ANSWER_FRAME_BYTES, BatchAnswers, BatchSender, REQUEST_FRAME_BYTES, requestsOf } from './forward-batch.js'
import { RecentAnswers } from './recent-answers.js'
import { Requests } from './requests.js'
import type { Clock } from '../clock.js'
import { systemClock } from '../clock.js'
import { invalidArgument, positiveInteger } from './errors.js'
import type { Ownership } from './ownership.js'

/** A request as the owner's HTTP server replays it; the same route list is served on every node. */
export interface ForwardedRequest {
  /** The route: "<method> <pattern>" as the router declares it (e.g. "post /campaigns/query"). */
  route: string
  method: string
  url: string
  query: string
  /** The path parameters, decoded. */
  params: string[]
  /** The request headers routes read (lower-case names), only those present. */
  headers: Record<string, string>
  remoteAddress: string
  /** The raw body, as received (null: none). */
  body: Uint8Array | null
}

/** The owner's answer, written as is by the node that received the request. */
export interface ForwardedReply {
  status: number
  contentType: string
  /** Headers beyond Content-Type (CORS, Retry-After, Allow…), or null. */
  headers: Record<string, string> | null
  /** The body bytes; null for none (204, 304). */
  body: Uint8Array | null
  /**
   * Set by the owner's server (never sent): the answer is 503 partition_moved (the node lost the
   * partition while running it; nothing was acknowledged); the forwarder answers "moved" instead, so
   * the sender retries at the new owner.
   */
  moved?: boolean
}

/**
 * Runs a forwarded request on this node (the HTTP server's route pipeline); never rejects for a refusal.
 * `id`: the forward's id, the same on each retry of the request (its writes' internal idempotency key).
 */
export type LocalHandler = (request: ForwardedRequest, id: string) => Promise<ForwardedReply>

/** Told once per forwarded request at the sender: how it ended, after how many sends, in how long. */
export type ForwardObserver = (outcome: 'answered' | 'unavailable', attempts: number, durationMs: number) => void

export interface ForwarderOptions {
  nc: NatsConnection
  /** The cluster's name: a subject token. */
  cluster: string
  ownership: Ownership
  /** Whole time a forwarded request may take before 503 unavailable; default 5000. */
  budgetMs?: number
  /** Time an account's requests may spend at the owner on purpose, added to the budget (its sync webhooks' timeout); default none. */
  handlerExtraMs?: (account: string) => number
  /** How long one send waits for an answer before it is sent again (same id); default 1000. */
  attemptTimeoutMs?: number
  /** How long an owner keeps the answer of a request id for retries; default 10000. */
  dedupeMs?: number
  /** At most this many answers kept for retries; default 10000. */
  dedupeMax?: number
  /** How often the owner checks `owns` against its subscriptions; default 50. */
  syncIntervalMs?: number
  /** Send a request's first attempt in a batch per owner node (src/cluster/forward-batch.ts); default true. */
  batch?: boolean
  /** At most this many requests in one batch; default 64. */
  batchMax?: number
  clock?: Clock
  /** Metrics hook (forwarded requests, their outcome and time). */
  observe?: ForwardObserver | null
}

/** What goes over NATS: a request with its id and partition, and an answer or "moved". */
interface WireRequest { id: string, p: number, r: ForwardedRequest }
type WireReply =
  | { k: 'r', s: number, t: string, h: Record<string, string> | null, b: Uint8Array | null }
  | { k: 'm', n: string }

// Plain msgpack (no records extension), as the changelog: every message decodes on its own on any node.
const packr = new Packr({ useRecords: false, moreTypes: false })
const BACKOFF_FIRST_MS = 10
const BACKOFF_MAX_MS = 100

export class Forwarder {
  readonly subjectPrefix: string
  private readonly cluster: string
  private readonly nc: NatsConnection
  /** Requests to the owner: sent on `nc`, answered on this node's own inbox. */
  private readonly requests: Requests
  private readonly ownership: Ownership
  private readonly budgetMs: number
  private readonly handlerExtraMs: (account: string) => number
  private readonly attemptTimeoutMs: number
  private readonly clock: Clock
  private readonly observe: ForwardObserver | null
  private readonly subscriptions = new Map<number, Subscription>()
  /** Batches sent to owner nodes (null: batching off). */
  private readonly batches: BatchSender | null
  /** This node's batch subject, subscribed while it serves. */
  private nodeSubscription: Subscription | null = null
  private readonly answers: RecentAnswers
  private readonly timer: NodeJS.Timeout | null = null
  private handler: LocalHandler | null = null
  private closed = false

  constructor (options: ForwarderOptions) {
    if (!/^[A-Za-z0-9_-]+$/.test(options.cluster)) throw invalidArgument('cluster', 'must be letters, digits, - or _')
    this.nc = options.nc
    this.requests = new Requests(options.nc)
    this.ownership = options.ownership
    this.cluster = options.cluster
    this.subjectPrefix = `beacon.${options.cluster}.fwd`
    this.budgetMs = positiveInteger('budgetMs', options.budgetMs ?? 5000)
    this.attemptTimeoutMs = positiveInteger('attemptTimeoutMs', options.attemptTimeoutMs ?? 1000)
    this.handlerExtraMs = options.handlerExtraMs ?? noExtra
    this.clock = options.clock ?? systemClock
    this.answers = new RecentAnswers(positiveInteger('dedupeMs', options.dedupeMs ?? 10_000), positiveInteger('dedupeMax', options.dedupeMax ?? 10_000), () => this.clock.nowMs())
    this.observe = options.observe ?? null
    const batchMax = positiveInteger('batchMax', options.batchMax ?? 64)
    this.batches = options.batch === false ? null : new BatchSender(options.nc, node => this.nodeSubject(node), batchMax)
    const every = positiveInteger('syncIntervalMs', options.syncIntervalMs ?? 50)
    this.timer = setInterval(() => this.sync(), every)
    this.timer.unref()
  }

  subject (partition: number): string {
    return `${this.subjectPrefix}.${partition}`
  }

  /** The subject of the batches a node answers (src/cluster/forward-batch.ts). */
  nodeSubject (node: string): string {
    return `beacon.${this.cluster}.fwdn.${node}`
  }

  /** Batches this node has sent (each one NATS message); 0 with batching off. */
  get batchesSent (): number {
    return this.batches?.batches ?? 0
  }

  /** Start answering forwarded requests of the partitions this node owns, through `handler`. */
  serve (handler: LocalHandler): void {
    this.handler = handler
    this.sync()
  }

  /** Subscribe to the partitions this node owns now, and leave those it no longer owns. Cheap; idempotent. */
  sync (): void {
    // A closed connection (the node stopping) subscribes to nothing: nc.subscribe would throw.
    if (this.closed || this.handler === null || this.nc.isClosed()) return
    if (this.nodeSubscription === null) {
      try {
        this.nodeSubscription = this.nc.subscribe(this.nodeSubject(this.ownership.nodeId), {
          callback: (error, msg) => { if (error === null) this.answerBatch(msg) },
        })
      } catch (error) {
        log.warn({ err: error }, 'cannot subscribe to forwarded batches')
        return
      }
    }
    for (let p = 0; p < this.ownership.partitions; p++) {
      const owns = this.ownership.owns(p)
      const subscription = this.subscriptions.get(p)
      if (owns && subscription === undefined) {
        try {
          this.subscriptions.set(p, this.nc.subscribe(this.subject(p), {
            callback: (error, msg) => { if (error === null) this.answer(p, msg) },
          }))
        } catch (error) {
          // Draining or closing: the next sync tries again, if any.
          log.warn({ err: error, partition: p }, 'cannot subscribe to forwarded requests')
          return
        }
      } else if (!owns && subscription !== undefined) {
        this.subscriptions.delete(p)
        // Drain: requests already delivered to this node are still answered ("moved"), not dropped.
        subscription.drain().catch(() => {})
      }
    }
  }

  /**
   * Sends the request to the partition's owner and resolves with its answer; rejects with 503
   * `unavailable` (Retry-After: 1) when no owner answered within the budget (plus `extraMs`).
   */
  async forward (partition: number, request: ForwardedRequest, extraMs = 0): Promise<ForwardedReply> {
    const startMs = this.clock.nowMs()
    const budgetMs = this.budgetMs + extraMs
    const deadline = startMs + budgetMs
    const payload = packr.pack({ id: nuid.next(), p: partition, r: request } satisfies WireRequest)
    const maxPayload = this.nc.info?.max_payload ?? Infinity
    if (payload.byteLength > maxPayload) {
      throw new ApiError('body_too_large', `The request (${payload.byteLength} bytes with its headers) is larger than the cluster forwards between nodes (the NATS max_payload, ${maxPayload} bytes).`)
    }
    const subject = this.subject(partition)
    // The first send in a batch to the owner in view, unless it would not fit in one with its frame.
    let batched = this.batches !== null && payload.byteLength + REQUEST_FRAME_BYTES <= maxPayload
    let notNode: string | undefined
    let backoffMs = BACKOFF_FIRST_MS
    let attempts = 0
    for (;;) {
      let remaining = deadline - this.clock.nowMs()
      if (remaining <= 0) break
      const owner = await this.ownership.ownerReady(partition, remaining, notNode)
      remaining = deadline - this.clock.nowMs()
      if (owner === null || remaining <= 0) break
      attempts++
      let answer: WireReply | null = null
      const viaBatch = batched
      try {
        const timeoutMs = Math.min(remaining, this.attemptTimeoutMs)
        if (batched) {
          batched = false
          answer = packr.unpack(await this.batches!.send(owner, payload, timeoutMs)) as WireReply
        } else {
          answer = packr.unpack((await this.requests.request(subject, payload, timeoutMs)).data) as WireReply
        }
      } catch {
        // No responders (nobody serves the partition yet), a timeout, the connection lost: again.
      }
      if (answer !== null && answer.k === 'r') {
        this.observe?.('answered', attempts, this.clock.nowMs() - startMs)
        return { status: answer.s, contentType: answer.t, headers: answer.h, body: answer.b }
      }
      // "moved" on the partition's subject: its sender is losing the partition (a stalled or draining
      // former owner still subscribed); wait for an owner other than it. On a node's batch subject,
      // "moved" may also come from the node gaining it (its lease is held, the recovery not done, so it
      // does not serve the partition yet): that node must stay eligible, and the retry, on the
      // partition's subject, reaches whoever serves it (no responders until someone does).
      if (answer !== null && !viaBatch) notNode = answer.n
      const pause = Math.min(backoffMs, deadline - this.clock.nowMs())
      if (pause > 0) await sleep(pause)
      backoffMs = Math.min(backoffMs * 2, BACKOFF_MAX_MS)
    }
    this.observe?.('unavailable', attempts, this.clock.nowMs() - startMs)
    throw new ApiError('unavailable', `The partition of this visitor or profile has no node answering for it (waited ${budgetMs} ms); retry.`, undefined, { 'Retry-After': '1' })
  }

  /**
   * What the HTTP server takes as its `cluster` option (ClusterRouting in src/http/server.ts) and the
   * batch route its `placement` (EventPlacement in src/http/event-batch.ts): keys
   * placed by this cluster's ownership, requests of other nodes' keys forwarded through this forwarder.
   */
  routing (): { owns: (key: { account: string, id: string }) => boolean, groupOf: (key: { account: string, id: string }) => number, forward: (key: { account: string, id: string }, request: ForwardedRequest) => Promise<ForwardedReply> } {
    const ownership = this.ownership
    return {
      owns: key => ownership.owns(ownership.partitionOf(key.account, key.id)),
      // The partition: what a batch's events are grouped by (src/http/event-batch.ts).
      groupOf: key => ownership.partitionOf(key.account, key.id),
      forward: (key, request) => this.forward(ownership.partitionOf(key.account, key.id), request, this.handlerExtraMs(key.account)),
    }
  }

  /** Stop answering (the node leaves); requests already delivered are answered. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    if (this.timer !== null) clearInterval(this.timer)
    const subscriptions = [...this.subscriptions.values()]
    this.subscriptions.clear()
    if (this.nodeSubscription !== null) subscriptions.push(this.nodeSubscription)
    this.nodeSubscription = null
    this.batches?.close()
    await Promise.all(subscriptions.map(subscription => subscription.drain().catch(() => {})))
  }

  private answer (partition: number, msg: Msg): void {
    let request: WireRequest
    try {
      request = packr.unpack(msg.data) as WireRequest
    } catch (error) {
      log.warn({ err: error, partition }, 'forwarded request not decodable; dropped')
      return
    }
    this.execute(request, partition).then(bytes => this.respond(msg, bytes), () => this.respond(msg, null))
  }

  /** A batch sent to this node: each request run (or answered "moved") as on its partition's subject. */
  private answerBatch (msg: Msg): void {
    if (msg.reply === undefined || msg.reply === '') return
    let frames: Uint8Array[]
    try {
      frames = requestsOf(msg.data)
    } catch (error) {
      log.warn({ err: error }, 'forwarded batch not decodable; dropped')
      return
    }
    const answers = new BatchAnswers(this.nc, msg.reply)
    for (let index = 0; index < frames.length; index++) {
      let request: WireRequest
      try {
        request = packr.unpack(frames[index]!) as WireRequest
      } catch (error) {
        // Left unanswered: the sender's attempt times out and its retry takes the partition subject.
        log.warn({ err: error }, 'forwarded request of a batch not decodable; dropped')
        continue
      }
      this.execute(request, request.p).then(bytes => answers.add(index, bytes ?? this.moved()), () => answers.add(index, this.moved()))
    }
  }

  /**
   * The encoded answer of a request received for `partition`, or null ("moved") when this node does not
   * own it; a retry of a request this node ran or is running gets that execution's answer.
   */
  private execute (request: WireRequest, partition: number): Promise<Uint8Array | null> {
    const nowMs = this.clock.nowMs()
    const known = this.answers.get(request.id, nowMs)
    // A retry of a request this node ran or is running: the same answer, not a second execution.
    if (known !== undefined) return known
    if (this.closed || this.handler === null || !this.ownership.owns(partition) || request.p !== partition) {
      if (!this.closed) this.sync()
      return Promise.resolve(null)
    }
    const reply = this.run(this.handler, request.r, request.id)
    this.answers.keep(request.id, reply, nowMs)
    return reply
  }

  /** The encoded answer, or null when the node lost the partition while running it. */
  private async run (handler: LocalHandler, request: ForwardedRequest, id: string): Promise<Uint8Array | null> {
    let reply: ForwardedReply
    try {
      reply = await handler(request, id)
    } catch (error) {
      // The HTTP server turns every refusal and failure into an answer; reaching here is a bug.
      log.error({ err: error, route: request.route }, 'forwarded request failed')
      reply = { status: 500, contentType: 'application/json', headers: null, body: Buffer.from(JSON.stringify({ status: 500, message: 'Unexpected server error.', errors: [{ code: 'internal', message: 'Unexpected server error.' }] })) }
    }
    if (reply.moved === true) return null
    const bytes = packr.pack({ k: 'r', s: reply.status, t: reply.contentType, h: reply.headers, b: reply.body } satisfies WireReply)
    const maxPayload = this.nc.info?.max_payload ?? Infinity
    // Room for its frame in a batch's answer, whichever way it goes back.
    if (bytes.byteLength + ANSWER_FRAME_BYTES <= maxPayload) return bytes
    // Not sendable: said at once (and logged for the operator), rather than left to time out as a 503.
    log.error({ route: request.route, bytes: bytes.byteLength, maxPayload }, 'forwarded answer larger than the NATS max_payload')
    const message = `The answer (${bytes.byteLength} bytes) is larger than the cluster forwards between nodes (the NATS max_payload, ${maxPayload} bytes).`
    const body = Buffer.from(JSON.stringify({ status: 500, message, errors: [{ code: 'internal', message }] }))
    return packr.pack({ k: 'r', s: 500, t: 'application/json', h: null, b: body } satisfies WireReply)
  }

  /** The answer "moved": this node does not own the request's partition (now). */
  private moved (): Uint8Array {
    return packr.pack({ k: 'm', n: this.ownership.nodeId } satisfies WireReply)
  }

  private respond (msg: Msg, bytes: Uint8Array | null): void {
    try {
      msg.respond(bytes ?? this.moved())
    } catch {
      // The connection is closing: the sender times out and retries.
    }
  }
}

function sleep (ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}

function noExtra (): number {
  return 0
}
