// API tokens: `bk_<id>_<secret>`. Only a SHA-256 of the secret is stored; the id finds the record and
// the hashes are compared in constant time, so neither a lookup nor a comparison leaks the secret.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'

export const ACCESS = ['read', 'write', 'read-write'] as const
export type Access = typeof ACCESS[number]

/** What is kept on disk (no secret). */
export interface TokenRecord {
  id: string
  account: string
  name: string
  attributes: string[]
  access: Access
  ratePerSecond: number | null
  hash: Uint8Array
  createdAt: string
  revokedAt: string | null
}

const PREFIX = 'bk_'

export function newToken (): { id: string, secret: string, token: string, hash: Buffer } {
  const id = randomBytes(8).toString('hex')
  const secret = randomBytes(32).toString('base64url')
  return { id, secret, token: `${PREFIX}${id}_${secret}`, hash: hashSecret(secret) }
}

export function hashSecret (secret: string): Buffer {
  return createHash('sha256').update(secret).digest()
}

/** Split a presented token into id and secret, or null when it is not of our shape. */
export function parseToken (token: string): { id: string, secret: string } | null {
  if (!token.startsWith(PREFIX) || token.length > 200) return null
  const cut = token.indexOf('_', PREFIX.length)
  if (cut < 0) return null
  return { id: token.slice(PREFIX.length, cut), secret: token.slice(cut + 1) }
}

export function secretMatches (secret: string, hash: Uint8Array): boolean {
  const presented = hashSecret(secret)
  return presented.length === hash.length && timingSafeEqual(presented, hash)
}

export function allowsAttribute (record: TokenRecord, name: string): boolean {
  const list = record.attributes
  return list.length === 1 && list[0] === '*' ? true : list.includes(name)
}

export function canRead (record: TokenRecord): boolean { return record.access !== 'write' }
export function canWrite (record: TokenRecord): boolean { return record.access !== 'read' }

/**
 * Token bucket: `ratePerSecond` refilled continuously, bursts up to `burst` (default: one second's worth).
 * `share` (cluster mode: this node's share of the limited traffic, in (0, 1]) scales both, the burst
 * never below one request.
 */
export class RateLimiter {
  private tokens: number
  private lastMs: number
  private readonly ratePerSecond: number
  private readonly burst: number

  constructor (ratePerSecond: number, nowMs: number, burst = ratePerSecond) {
    this.ratePerSecond = ratePerSecond
    this.burst = burst
    this.tokens = burst
    this.lastMs = nowMs
  }

  /** Take one request; 0 when allowed, else the milliseconds until one would be. */
  take (nowMs: number, share = 1): number {
    const rate = this.ratePerSecond * share
    const elapsedMs = nowMs - this.lastMs
    if (elapsedMs > 0) {
      this.tokens += elapsedMs * rate / 1000
      this.lastMs = nowMs
    }
    this.tokens = Math.min(Math.max(1, this.burst * share), this.tokens)
    if (this.tokens >= 1) {
      this.tokens -= 1
      return 0
    }
    return Math.ceil((1 - this.tokens) * 1000 / rate)
  }
}
