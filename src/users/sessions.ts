// Panel sessions, server-side: the cookie holds a random 256-bit id; only its SHA-256 is stored (in
// LMDB, so a restart keeps them, and in memory, so a request reads no disk). A session ends a fixed
// time after sign-in (BEACON_SESSION_TTL_MS, 12 h by default: absolute, no sliding renewal, so no
// write per request), and at once on sign-out or when its user is removed.
//
// Cluster mode (`share`): sessions live in the cluster's session bucket instead of the local LMDB
// (src/cluster/session-kv.ts), which this node watches into the same map: a session made or ended
// through any node is in effect on every node as its watch delivers it, and checking a cookie is still
// a map lookup. A sign-in or sign-out is answered once the bucket stored it (a quorum with R3); a NATS
// failure then answers 503 unavailable. Expired entries lapse from the bucket by its max age.

import { createHash, randomBytes } from 'node:crypto'
import { Packr } from 'msgpackr'
import { assert } from '../assert.js'
import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'
import { log } from '../log.js'
import type { Store } from '../store/store.js'

export const SESSION_COOKIE = 'beacon_session'

interface SessionRecord {
  userId: string
  createdAtMs: number
  expiresAtMs: number
}

export interface Session extends SessionRecord {
  /** The stored key (hash of the id). */
  key: string
}

/** Cluster mode: the bucket every node's sessions live in (src/cluster/session-kv.ts fits). */
export interface SessionBucket {
  /** Resolve with the entry's revision once stored on a quorum. */
  put (key: string, value: Uint8Array): Promise<number>
  delete (key: string): Promise<number>
  /** Every live entry, then every change, in revision order (value null: deleted). */
  watch (onChange: (key: string, value: Uint8Array | null, revision: number) => void): Promise<{ ready: Promise<void>, stop (): void }>
}

/** Plain msgpack maps in the bucket (no msgpackr records). */
const packr = new Packr({ useRecords: false })

export class Sessions {
  private readonly store: Store
  private readonly clock: Clock
  readonly ttlMs: number
  private readonly live = new Map<string, SessionRecord>()
  /** Cluster mode: the shared bucket; null in embedded mode (the local store). */
  private bucket: SessionBucket | null = null
  private watch: { stop (): void } | null = null
  /**
   * Cluster mode: sessions ended through this node, by the revision of their delete, until the watch
   * delivers it: an earlier put the watch delivers meanwhile does not bring them back here.
   */
  private readonly ending = new Map<string, number>()
  /** Cluster mode: the last revision the watch delivered. */
  private watched = 0

  constructor (store: Store, clock: Clock, ttlMs: number) {
    this.store = store
    this.clock = clock
    this.ttlMs = ttlMs
    assert(Number.isInteger(ttlMs) && ttlMs > 0, 'a session lasts a positive time', { ttlMs })
    const nowMs = clock.nowMs()
    for (const { key, value } of store.sessions.getRange()) {
      const record = value as SessionRecord
      assert(typeof record.userId === 'string' && record.createdAtMs <= record.expiresAtMs, 'a stored session has a user and ends after it starts', { createdAtMs: record.createdAtMs, expiresAtMs: record.expiresAtMs })
      if (record.expiresAtMs > nowMs) this.live.set(key as string, record)
      else store.ignoreFailure(store.sessions.remove(key))
    }
  }

  /** A new session for the user; returns the id to put in the cookie (never stored). */
  async create (userId: string): Promise<string> {
    const id = randomBytes(32).toString('base64url')
    const nowMs = this.clock.nowMs()
    const record: SessionRecord = { userId, createdAtMs: nowMs, expiresAtMs: nowMs + this.ttlMs }
    const key = keyOf(id)
    if (this.bucket !== null) await viaNats('signing in', this.bucket.put(key, packr.pack(record)))
    else await this.store.save(this.store.sessions, key, record)
    this.live.set(key, record)
    this.pruneSome(nowMs)
    return id
  }

  /** The live session the Cookie header names, or null (absent, unknown, revoked or expired). */
  fromCookie (cookie: string): Session | null {
    const id = cookieValue(cookie, SESSION_COOKIE)
    if (id === null || id.length !== 43) return null
    const key = keyOf(id)
    const record = this.live.get(key)
    if (record === undefined) return null
    if (record.expiresAtMs <= this.clock.nowMs()) {
      this.forget(key).catch(noop)
      return null
    }
    return { key, ...record }
  }

  /** End one session (sign-out). */
  async revoke (key: string): Promise<void> {
    if (!this.live.has(key)) return
    if (this.bucket !== null) await viaNats('signing out', this.end(this.bucket, key))
    else await this.forget(key)
  }

  /** End every session of a user (removed): in memory at once, on disk (or in the bucket) in the background. */
  revokeUser (userId: string): void {
    for (const [key, record] of this.live) {
      if (record.userId !== userId) continue
      if (this.bucket === null) {
        this.forget(key).catch(noop)
        continue
      }
      this.live.delete(key)
      this.end(this.bucket, key).catch((error: unknown) => log.warn({ err: error, userId }, 'a session of a removed user (refused anyway) or of one whose password changed (other nodes may accept it until it expires) could not be deleted from the cluster\'s bucket'))
    }
  }

  /**
   * Cluster mode on: from here on sessions are the bucket's. The local store's are not served (signing
   * in again is needed after a data folder joins a cluster). Resolves once the bucket's sessions are
   * in memory here.
   */
  async share (bucket: SessionBucket): Promise<void> {
    this.bucket = bucket
    this.live.clear()
    const watch = await bucket.watch((key, value, revision) => this.received(key, value, revision))
    this.watch = watch
    await watch.ready
  }

  /** Cluster mode: stops watching the bucket (the node is stopping). */
  close (): void {
    this.watch?.stop()
  }

  private received (key: string, value: Uint8Array | null, revision: number): void {
    this.watched = revision
    const ended = this.ending.get(key)
    if (ended !== undefined) {
      if (revision < ended) return
      this.ending.delete(key)
    }
    if (value === null) {
      this.live.delete(key)
      return
    }
    const record = decoded(value)
    if (record === null) log.warn({ revision }, 'a session entry of the cluster\'s bucket is not a session; ignored')
    else if (record.expiresAtMs > this.clock.nowMs()) this.live.set(key, record)
  }

  /**
   * Cluster mode: a delete in the bucket, then from this node's memory (a sign-out that failed leaves
   * the session here, so signing out again retries it).
   */
  private async end (bucket: SessionBucket, key: string): Promise<void> {
    const revision = await bucket.delete(key)
    this.live.delete(key)
    // Not delivered yet: nor is, perhaps, the session's own put, which must not bring it back meanwhile.
    if (this.watched < revision) this.ending.set(key, revision)
  }

  /** Forgotten here; from the local store too in embedded mode (the bucket's entries lapse by themselves). */
  private forget (key: string): Promise<void> {
    this.live.delete(key)
    if (this.bucket !== null) return Promise.resolve()
    return this.store.durable(this.store.sessions.remove(key))
  }

  /** Expired sessions nobody presents again are dropped a few at a time, as new ones are made. */
  private pruneSome (nowMs: number): void {
    let looked = 0
    for (const [key, record] of this.live) {
      if (++looked > 16) break
      if (record.expiresAtMs <= nowMs) this.forget(key).catch(noop)
    }
  }
}

function decoded (value: Uint8Array): SessionRecord | null {
  try {
    const record = packr.unpack(value) as Partial<SessionRecord> | null
    if (typeof record?.userId !== 'string' || typeof record.createdAtMs !== 'number' || typeof record.expiresAtMs !== 'number') return null
    return { userId: record.userId, createdAtMs: record.createdAtMs, expiresAtMs: record.expiresAtMs }
  } catch {
    return null
  }
}

/** A NATS failure while signing in or out answers 503 unavailable, not 500. */
async function viaNats<T> (what: string, step: Promise<T>): Promise<T> {
  try {
    return await step
  } catch (error) {
    log.warn({ err: error }, `the cluster's session bucket failed while ${what}`)
    throw new ApiError('unavailable', `The cluster cannot store panel sessions right now (${what}); retry shortly.`, undefined, { 'Retry-After': '1' })
  }
}

function keyOf (id: string): string {
  return createHash('sha256').update(id).digest('hex')
}

/** The value of one cookie in a Cookie header, or null. */
export function cookieValue (header: string, name: string): string | null {
  if (header === '') return null
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq < 0) continue
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return null
}

function noop (): void {}
