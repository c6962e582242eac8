// Requests-per-second limit of one webhook. The bucket holds a tenth of a second of requests (at
// least one): a bucket of one at high rates would need a timer every few microseconds, and timers
// tick in milliseconds. So over any second at most ratePerSecond × 1.1 (+1) requests start. In
// cluster mode each node's worker takes its share of the rate (`share`: one over the live nodes,
// which all pull the webhook's deliveries), so the cluster together keeps to about the rate.

import { assert } from '../assert.js'

export const BURST_MS = 100

export class TokenBucket {
  private readonly ratePerSecond: number
  private readonly share: () => number
  private perMs: number
  private capacity: number
  private tokens: number
  private updatedMs: number

  constructor (ratePerSecond: number, nowMs: number, share: () => number = whole) {
    // Validated configuration (CONFIG_LIMITS.rateMinPerSecond): a rate of 0 would wait forever, NaN never refill.
    assert(ratePerSecond > 0, 'a webhook rate is positive', { ratePerSecond })
    this.ratePerSecond = ratePerSecond
    this.share = share
    this.perMs = 0
    this.capacity = 0
    this.scale()
    this.tokens = this.capacity
    this.updatedMs = nowMs
  }

  /** Take one token if there is one. */
  take (nowMs: number): boolean {
    this.refill(nowMs)
    if (this.tokens < 1) return false
    this.tokens -= 1
    return true
  }

  /** Milliseconds until a token is available (0 if one is). */
  waitMs (nowMs: number): number {
    this.refill(nowMs)
    return this.tokens >= 1 ? 0 : Math.ceil((1 - this.tokens) / this.perMs)
  }

  private refill (nowMs: number): void {
    this.scale()
    const elapsedMs = nowMs - this.updatedMs
    if (elapsedMs > 0) {
      this.tokens += elapsedMs * this.perMs
      this.updatedMs = nowMs
    }
    this.tokens = Math.min(this.capacity, this.tokens)
  }

  /** This node's share of the rate, as it is now. */
  private scale (): void {
    const rate = this.ratePerSecond * this.share()
    this.perMs = rate / 1000
    this.capacity = Math.max(1, Math.floor(rate * BURST_MS / 1000))
  }
}

function whole (): number {
  return 1
}
