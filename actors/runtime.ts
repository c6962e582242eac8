// Virtual actors, one per key (Orleans-style): activated on their first message with their state read
// from LMDB, run one message at a time from a bounded mailbox, and passivated when idle or when the
// resident cap is reached. One owner per key is what makes updates race-free without locks.
//
// A handler applies a message to the in-memory state synchronously and issues its LMDB puts; the
// caller's promise resolves only once those puts are durable. The next message may run before that
// (its puts queue behind in the same or a later transaction, in order), which is what lets one hot key
// take thousands of updates a second while each acknowledgement still means "on disk".
//
// Keys are split into PARTITIONS by a stable hash of account+id. Here every partition is owned by this
// process; the partition is the unit a cluster will hand to another owner.

import { ApiError } from '../src/errors.js'
import type { Clock } from '../src/clock.js'

export const PARTITIONS = 256

/** A message: a union of these, discriminated by `type`, is what one kind of actor takes. */
export interface Message {
  readonly type: string
}

/** By message type, the reply a kind's message of that type resolves with. */
export type Replies<M extends Message> = { [T in M['type']]: unknown }

/** The reply to message `M` of a kind whose replies are `P`. */
export type ReplyOf<P, M extends Message> = P[M['type'] & keyof P]

/**
 * One kind of actor: its state `S`, its messages `M`, and the reply to each by type, `P` (so
 * `runtime.send` resolves with the reply of the message sent, typed, and no caller casts).
 */
export interface ActorKind<S, M extends Message, P extends Replies<M>> {
  readonly name: string
  /** The one spelling of an id (visitor UUIDs: lower case), applied to every message sent; absent: as given. */
  readonly key?: (id: string) => string
  /** Read the actor's state from the store (synchronous: LMDB reads are). */
  load (account: string, id: string): S
  /** Apply one message. May call `actor.track(write)` for each write; may return a promise. */
  handle (actor: Actor<S>, message: M): ReplyOf<P, M> | Promise<ReplyOf<P, M>>
}

interface Envelope<M, R> {
  message: M
  resolve: (value: R) => void
  reject: (error: unknown) => void
}

export class Actor<S> {
  readonly kind: ActorKind<S, any, any>
  readonly account: string
  readonly id: string
  readonly slot: string
  /** The partition that owns this key (see partitionOf). */
  readonly partition: number
  state: S
  lastUsedMs: number
  /** The latest write not yet durable, or the latest write when it failed (kept: see track), or null. */
  pending: Promise<void> | null = null
  /** A write failed, or the actor was evicted while busy: memory may be ahead of disk, so this activation must not serve again. */
  broken = false
  /** A write of this activation failed (its `pending` stays rejected). */
  writeFailed = false
  running = false
  readonly mailbox: Envelope<any, any>[] = []

  constructor (kind: ActorKind<S, any, any>, account: string, id: string, slot: string, state: S, nowMs: number) {
    this.kind = kind
    this.account = account
    this.id = id
    this.slot = slot
    this.partition = partitionOf(account, id)
    this.state = state
    this.lastUsedMs = nowMs
  }

  /**
   * Register a write of this message: the reply waits for it, and so does passivation. A failed write
   * stays `pending`: an async handler's reply is read a few microtasks after its last write was issued,
   * and a write refused at once (the partition went while the handler awaited) has failed by then; the
   * reply must see that failure, never an empty `pending` it would take for "durable".
   */
  track (write: Promise<void>): void {
    const tracked: Promise<void> = write.then(() => {
      if (this.pending === tracked) this.pending = null
    }, (error: unknown) => {
      this.broken = true
      this.writeFailed = true
      throw error
    })
    // The reply (or drain) that waits for it takes the failure; a handler that failed after its write
    // (its own error is the answer) leaves nobody waiting, which must not be an unhandled rejection.
    tracked.catch(noop)
    this.pending = tracked
  }
}

export interface RuntimeOptions {
  clock: Clock
  actorsMax: number
  actorIdleMs: number
  mailboxMax: number
}

export class ActorRuntime {
  private readonly resident = new Map<string, Actor<any>>()
  private readonly options: RuntimeOptions
  private sweeper: NodeJS.Timeout | null = null
  activations = 0
  passivations = 0
  /** Messages waiting in all mailboxes (not counting the one each actor is running). */
  mailboxDepth = 0

  constructor (options: RuntimeOptions) {
    this.options = options
    this.sweeper = setInterval(() => this.sweepIdle(), Math.max(50, options.actorIdleMs / 2))
    this.sweeper.unref()
  }

  get residentCount (): number { return this.resident.size }

  /** Deliver a message to the actor (kind, account, id) and resolve with its durable reply. */
  send<S, M extends Message, P extends Replies<M>, const T extends M> (kind: ActorKind<S, M, P>, account: string, id: string, message: T): Promise<ReplyOf<P, T>> {
    const actor = this.activate(kind, account, kind.key === undefined ? id : kind.key(id))
    if (actor.running || actor.mailbox.length > 0) {
      if (actor.mailbox.length >= this.options.mailboxMax) {
        return Promise.reject(new ApiError('overloaded', `Too many messages queued for this ${kind.name}; retry shortly.`, undefined, { 'Retry-After': '1' }))
      }
      this.mailboxDepth++
      return new Promise<ReplyOf<P, T>>((resolve, reject) => { actor.mailbox.push({ message, resolve, reject }) })
    }
    return new Promise<ReplyOf<P, T>>((resolve, reject) => { this.run(actor, { message, resolve, reject }) })
  }

  private activate<S> (kind: ActorKind<S, any, any>, account: string, id: string): Actor<S> {
    const slot = kind.name + '\u0000' + account + '\u0000' + id
    const nowMs = this.options.clock.nowMs()
    let actor = this.resident.get(slot) as Actor<S> | undefined
    if (actor !== undefined && !actor.broken) {
      // Re-insert to keep the map in least-recently-used order for passivation.
      this.resident.delete(slot)
      this.resident.set(slot, actor)
      actor.lastUsedMs = nowMs
      return actor
    }
    actor = new Actor(kind, account, id, slot, kind.load(account, id), nowMs)
    this.resident.set(slot, actor)
    this.activations++
    if (this.resident.size > this.options.actorsMax) this.evictOverCap()
    return actor
  }

  private run<R> (actor: Actor<any>, envelope: Envelope<any, R>): void {
    let out: R | Promise<R>
    try {
      out = actor.kind.handle(actor, envelope.message)
    } catch (error) {
      envelope.reject(error)
      this.next(actor)
      return
    }
    if (out instanceof Promise) {
      actor.running = true
      out.then(
        value => { actor.running = false; this.reply(actor, envelope, value); this.next(actor) },
        error => { actor.running = false; envelope.reject(error); this.next(actor) }
      )
      return
    }
    this.reply(actor, envelope, out)
    this.next(actor)
  }

  private reply<R> (actor: Actor<any>, envelope: Envelope<any, R>, value: R): void {
    const pending = actor.pending
    if (pending === null) envelope.resolve(value)
    else pending.then(() => envelope.resolve(value), envelope.reject)
  }

  private next (actor: Actor<any>): void {
    const envelope = actor.mailbox.shift()
    if (envelope === undefined) return
    this.mailboxDepth--
    if (actor.broken) {
      // Memory may be ahead of disk: hand the rest to a fresh activation that reloads from LMDB.
      const fresh = this.activate(actor.kind, actor.account, actor.id)
      fresh.mailbox.push(envelope, ...actor.mailbox.splice(0))
      this.mailboxDepth++
      this.next(fresh)
      return
    }
    this.run(actor, envelope)
  }

  private evictable (actor: Actor<any>): boolean {
    return !actor.running && actor.mailbox.length === 0 && (actor.pending === null || actor.writeFailed)
  }

  private evictOverCap (): void {
    for (const [slot, actor] of this.resident) {
      if (this.resident.size <= this.options.actorsMax) return
      if (this.evictable(actor)) this.passivate(slot)
    }
  }

  private sweepIdle (): void {
    const oldestAllowedMs = this.options.clock.nowMs() - this.options.actorIdleMs
    for (const [slot, actor] of this.resident) {
      if (actor.lastUsedMs > oldestAllowedMs) return // LRU order: the rest are newer
      if (this.evictable(actor)) this.passivate(slot)
    }
  }

  private passivate (slot: string): void {
    this.resident.delete(slot)
    this.passivations++
  }

  /**
   * Forget the resident actors `which` selects (cluster mode: a partition recovered or lost), so their
   * next message reloads the state from LMDB. One busy at the moment is marked broken instead: it
   * finishes the message it runs, and the messages after it go to a fresh activation.
   */
  evict (which: (account: string, id: string) => boolean): number {
    let evicted = 0
    for (const [slot, actor] of this.resident) {
      if (!which(actor.account, actor.id)) continue
      if (this.evictable(actor)) this.passivate(slot)
      else actor.broken = true
      evicted++
    }
    return evicted
  }

  /** Wait until every actor's writes are durable (shutdown). */
  async drain (): Promise<void> {
    const pending: Promise<void>[] = []
    for (const actor of this.resident.values()) if (actor.pending !== null) pending.push(actor.pending.catch(() => {}))
    await Promise.all(pending)
  }

  close (): void {
    if (this.sweeper !== null) clearInterval(this.sweeper)
    this.sweeper = null
  }
}

/** FNV-1a over account and id: stable across processes and releases, so a cluster agrees on owners. */
export function partitionOf (account: string, id: string): number {
  let hash = 0x811c9dc5
  for (let i = 0; i < account.length; i++) hash = Math.imul(hash ^ account.charCodeAt(i), 0x01000193)
  hash = Math.imul(hash ^ 0, 0x01000193)
  for (let i = 0; i < id.length; i++) hash = Math.imul(hash ^ id.charCodeAt(i), 0x01000193)
  return (hash >>> 0) % PARTITIONS
}

function noop (): void {}
