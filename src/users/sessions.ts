// Panel sessions, server-side: the cookie holds a random 256-bit id; only its SHA-256 is stored (in
// LMDB, so a restart keeps them, and in memory, so a request reads no disk). A session ends a fixed
// time after sign-in (BEACON_SESSION_TTL_MS, 12 h by default: absolute, no sliding renewal, so no
// write per request), and at once on sign-out or when its user is removed.

import { createHash, randomBytes } from 'node:crypto'
import { assert } from '../assert.js'
import type { Clock } from '../clock.js'
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

export class Sessions {
  private readonly store: Store
  private readonly clock: Clock
  readonly ttlMs: number
  private readonly live = new Map<string, SessionRecord>()

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
    await this.store.save(this.store.sessions, key, record)
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
    await this.forget(key)
  }

  /** End every session of a user (removed): in memory at once, on disk in the background. */
  revokeUser (userId: string): void {
    for (const [key, record] of this.live) if (record.userId === userId) this.forget(key).catch(noop)
  }

  private forget (key: string): Promise<void> {
    this.live.delete(key)
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
