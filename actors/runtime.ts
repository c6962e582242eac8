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
  /** The partition that owns this key (see partitionOf). */
  readonly partition: number
  state: S
  lastUsedMs: number
  /** Its neighbours in the runtime's order of use (older toward the least recently used; null at the ends). */
  older: Actor<any> | null = null
  newer: Actor<any> | null = null
  /** The latest write not yet durable, or the latest write when it failed (kept: see track), or null. */
  pending: Promise<void> | null = null
  /** A write failed, or the actor was evicted while busy: memory may be ahead of disk, so this activation must not serve again. */
  broken = false
  /** A write of this activation failed (its `pending` stays rejected). */
  writeFailed = false
  running = false
  readonly mailbox: Envelope<any, any>[] = []

  constructor (kind: ActorKind<S, any, any>, account: string, id: string, state: S, nowMs: number) {
    this.kind = kind
    this.account = account
    this.id = id
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

/** Resident actors of one kind: by account, then id (no key is built per message: see activate). */
type Residents = Map<string, Map<string, Actor<any>>>

export class ActorRuntime {
  /**
   * Resident actors by kind, account and id. Nested maps, not one keyed by a string of the three: that
   * string, built and hashed on every message, cost a batched event 2 µs of its 30 (a tenth).
   */
  private readonly resident = new Map<ActorKind<any, any, any>, Residents>()
  private residents = 0
  /** The order of use, a list through the actors themselves: the least recently used first. */
  private oldest: Actor<any> | null = null
  private newest: Actor<any> | null = null
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

  get residentCount (): number { return this.residents }

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
    const nowMs = this.options.clock.nowMs()
    let ofKind = this.resident.get(kind)
    if (ofKind === undefined) this.resident.set(kind, ofKind = new Map())
    let ofAccount = ofKind.get(account)
    if (ofAccount === undefined) ofKind.set(account, ofAccount = new Map())
    let actor = ofAccount.get(id) as Actor<S> | undefined
    if (actor !== undefined && !actor.broken) {
      this.unlink(actor)
      this.append(actor)
      actor.lastUsedMs = nowMs
      return actor
    }
    // A broken activation is replaced (it finishes the message it runs, unknown to the runtime).
    if (actor !== undefined) this.unlink(actor)
    else this.residents++
    actor = new Actor(kind, account, id, kind.load(account, id), nowMs)
    ofAccount.set(id, actor)
    this.append(actor)
    this.activations++
    if (this.residents > this.options.actorsMax) this.evictOverCap()
    return actor
  }

  /** Puts an actor at the newest end of the order of use. */
  private append (actor: Actor<any>): void {
    actor.older = this.newest
    actor.newer = null
    if (this.newest === null) this.oldest = actor
    else this.newest.newer = actor
    this.newest = actor
  }

  /** Takes an actor out of the order of use. */
  private unlink (actor: Actor<any>): void {
    if (actor.older === null) this.oldest = actor.newer
    else actor.older.newer = actor.newer
    if (actor.newer === null) this.newest = actor.older
    else actor.newer.older = actor.older
    actor.older = actor.newer = null
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
    let actor = this.oldest
    while (actor !== null && this.residents > this.options.actorsMax) {
      const newer = actor.newer
      if (this.evictable(actor)) this.passivate(actor)
      actor = newer
    }
  }

  private sweepIdle (): void {
    const oldestAllowedMs = this.options.clock.nowMs() - this.options.actorIdleMs
    let actor = this.oldest
    // In order of use: the first one used since ends the walk.
    while (actor !== null && actor.lastUsedMs <= oldestAllowedMs) {
      const newer = actor.newer
      if (this.evictable(actor)) this.passivate(actor)
      actor = newer
    }
  }

  private passivate (actor: Actor<any>): void {
    const ofKind = this.resident.get(actor.kind)!
    const ofAccount = ofKind.get(actor.account)!
    ofAccount.delete(actor.id)
    if (ofAccount.size === 0) ofKind.delete(actor.account)
    this.unlink(actor)
    this.residents--
    this.passivations++
  }

  /**
   * Forget the resident actors `which` selects (cluster mode: a partition recovered or lost), so their
   * next message reloads the state from LMDB. One busy at the moment is marked broken instead: it
   * finishes the message it runs, and the messages after it go to a fresh activation.
   */
  evict (which: (account: string, id: string) => boolean): number {
    let evicted = 0
    let actor = this.oldest
    while (actor !== null) {
      const newer = actor.newer
      if (which(actor.account, actor.id)) {
        if (this.evictable(actor)) this.passivate(actor)
        else actor.broken = true
        evicted++
      }
      actor = newer
    }
    return evicted
  }

  /** Wait until every actor's writes are durable (shutdown). */
  async drain (): Promise<void> {
    const pending: Promise<void>[] = []
    for (let actor = this.oldest; actor !== null; actor = actor.newer) if (actor.pending !== null) pending.push(actor.pending.catch(() => {}))
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
