// The answers of writes made with an Idempotency-Key (docs/retries-and-limits.md, "Idempotent writes"). A public write
// that carries a key stores, in the same LMDB transaction as the state it writes (and in cluster mode in
// the same changelog entry: actors/entity-log.ts), a record of the request's fingerprint and the answer
// it got; a retry with the key finds it and is answered the same, without applying again.
//
// A record's scope is the visitor or profile written (`v<visitorId>` or `p<profileId>`, then NUL and the
// key): the one actor that writes that entity is the one that reads and writes its records, so two
// requests with one key are applied in turn, never both. Records live IDEMPOTENCY_RETENTION_MS, then a
// background sweep removes them in batches, walking an index by expiry.

import type { Store } from './store.js'
import type { Listeners } from '../listeners.js'

/** How long a key's answer is kept (at least: the sweep runs every IDEMPOTENCY_SWEEP_MS). */
export const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000
/**
 * How long the record of a forwarded key is kept (FORWARDED_KEY_PREFIX): as long as the forwarding node
 * may retry (its budget, 5 s, plus at most a sync webhook's timeout, 60 s), with a margin.
 */
export const IDEMPOTENCY_FORWARDED_RETENTION_MS = 5 * 60 * 1000
/**
 * What starts the key a node gives a keyless public write it forwards to the partition's owner (cluster
 * mode, src/cluster/forwarder.ts): a control character, which a client's key (printable ASCII) never
 * holds, so the two can neither collide nor be forged.
 */
export const FORWARDED_KEY_PREFIX = '\u0001fwd:'
export const IDEMPOTENCY_SWEEP_MS = 60_000
/** Records removed per sweep turn (one transaction); a full batch runs the next turn at once. */
export const IDEMPOTENCY_SWEEP_BATCH_MAX = 5_000
export const IDEMPOTENCY_KEY_MAX_CHARS = 255

/** A stored answer: `f` the request's fingerprint, `x` when it expires (ms), `r` the actor's reply (absent when none). */
export interface IdempotencyRecord {
  f: string
  x: number
  r?: unknown
}

/** Told of each record the sweep removed (cluster mode: the entity log forgets it in its partition index). */
export type IdempotencySwept = (account: string, scope: string) => void

/** The scope of a key used on one visitor (`v`) or profile (`p`). */
export function idempotencyScope (tag: 'v' | 'p', id: string, key: string): string {
  return tag + id + '\u0000' + key
}

/** The entity id of a scope (keys are printable ASCII: the last NUL ends the id). */
export function entityOfScope (scope: string): string {
  return scope.slice(1, scope.lastIndexOf('\u0000'))
}

/** Whether a header value is a valid key: 1–255 characters from space to tilde. */
export function validIdempotencyKey (key: string): boolean {
  if (key.length === 0 || key.length > IDEMPOTENCY_KEY_MAX_CHARS) return false
  for (let i = 0; i < key.length; i++) {
    const code = key.charCodeAt(i)
    if (code < 0x20 || code > 0x7e) return false
  }
  return true
}

export class IdempotencyRecords {
  private readonly store: Store
  private readonly swept: Listeners<IdempotencySwept> | null
  /** Records put and not committed yet (LMDB reads see only committed data): account NUL scope → record. */
  private readonly inFlight = new Map<string, IdempotencyRecord>()

  constructor (store: Store, swept: Listeners<IdempotencySwept> | null = null) {
    this.store = store
    this.swept = swept
  }

  /** The live record of the key, or null. */
  find (account: string, scope: string, nowMs: number): IdempotencyRecord | null {
    const pending = this.inFlight.size === 0 ? undefined : this.inFlight.get(account + '\u0000' + scope)
    const record = pending ?? this.store.idempotency.get([account, scope]) as IdempotencyRecord | undefined
    return record !== undefined && record.x > nowMs ? record : null
  }

  /** Store a record: issued in the event turn of the write it answers, it commits in its transaction. */
  put (account: string, scope: string, record: IdempotencyRecord): void {
    const slot = account + '\u0000' + scope
    this.inFlight.set(slot, record)
    const put = this.store.idempotency.put([account, scope], record)
    this.store.ignoreFailure(this.store.idempotencyExpiries.put([record.x, account, scope], null))
    const settled = (): void => {
      if (this.inFlight.get(slot) === record) this.inFlight.delete(slot)
    }
    put.then(settled, settled)
  }

  /**
   * Take back a record whose write failed (refused, or not confirmed: the partition is dropped then, and
   * a recovery restores the record from the changelog if the write was stored after all). Left, it made
   * a retry with the key answer "done" from it, for a write in no state. Issued after the put, so
   * removed after it in LMDB's write order.
   */
  withdraw (account: string, scope: string, record: IdempotencyRecord): void {
    const slot = account + '\u0000' + scope
    if (this.inFlight.get(slot) === record) this.inFlight.delete(slot)
    this.store.ignoreFailure(this.store.idempotency.remove([account, scope]))
  }

  /**
   * Remove up to `max` records expired at `nowMs`, in this event turn (one transaction). A record put
   * again under the same scope since (another expiry, or not committed yet) is kept. Returns how many
   * expiry entries were walked.
   */
  sweep (nowMs: number, max = IDEMPOTENCY_SWEEP_BATCH_MAX): number {
    const { idempotency, idempotencyExpiries } = this.store
    let walked = 0
    for (const key of idempotencyExpiries.getKeys({ end: [nowMs + 1], limit: max }) as Iterable<[number, string, string]>) {
      const [x, account, scope] = key
      this.store.ignoreFailure(idempotencyExpiries.remove(key))
      const record = idempotency.get([account, scope]) as IdempotencyRecord | undefined
      if (record !== undefined && record.x === x && !this.inFlight.has(account + '\u0000' + scope)) {
        this.store.ignoreFailure(idempotency.remove([account, scope]))
        if (this.swept !== null) for (const told of this.swept.list) told(account, scope)
      }
      walked++
    }
    return walked
  }
}

/**
 * The background sweep: every IDEMPOTENCY_SWEEP_MS, batches of expired records until none is left (one
 * transaction per batch, the event loop served between them). Returns what stops it.
 */
export function sweepIdempotency (records: IdempotencyRecords, nowMs: () => number, onError: (error: unknown) => void, everyMs = IDEMPOTENCY_SWEEP_MS): () => void {
  let stopped = false
  let timer: NodeJS.Timeout | null = null
  const turn = (): void => {
    timer = null
    if (stopped) return
    let walked = 0
    try {
      walked = records.sweep(nowMs())
    } catch (error) {
      onError(error)
    }
    if (stopped) return
    if (walked >= IDEMPOTENCY_SWEEP_BATCH_MAX) setImmediate(turn)
    else timer = setTimeout(turn, everyMs).unref()
  }
  timer = setTimeout(turn, everyMs).unref()
  return () => {
    stopped = true
    if (timer !== null) clearTimeout(timer)
  }
}
