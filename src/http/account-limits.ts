// Per-account bulkhead and rate limit of the public endpoints. BEACON_INFLIGHT_MAX bounds the whole
// process at the door, before the body is read; the account is only known once the body is parsed,
// so right after that (and after the account is found to exist), before any actor work, each request
// takes one of its account's in-flight slots (BEACON_ACCOUNT_INFLIGHT_MAX) and one token of its
// account's bucket (BEACON_ACCOUNT_RATE_PER_SECOND, or the account's own `rateLimit`). An account
// that is slow (a sync webhook) or flooded can hold at most its own share of the process, so every
// other account keeps being served. The per-request cost: one Map lookup and a few field updates.
// Cluster mode: the rate is counted against this node's share of it (`share`, src/cluster/rate-shares.ts).

import { ApiError } from '../errors.js'
import { RateLimiter } from '../auth/tokens.js'
import type { Clock } from '../clock.js'
import type { Account, RateLimit } from '../catalog/accounts.js'

export interface AccountLimitsOptions {
  clock: Clock
  /** Requests of one account in flight at once (BEACON_ACCOUNT_INFLIGHT_MAX). */
  inflightMax: number
  /** The rate of accounts without a `rateLimit` of their own; perSecond 0: unlimited. */
  defaultRate: RateLimit
  /** Cluster mode: this node's share of each account's rate, in (0, 1]; default all of it. */
  share?: () => number
}

/** One account's state; the caller hands it back to `leave` when its request is answered. */
export interface AccountSlot {
  inflight: number
  /** The limit the bucket was built from: a PATCH replaces the account record's, and the bucket follows. */
  rate: RateLimit | undefined
  bucket: RateLimiter | null
}

export class AccountLimits {
  private readonly options: AccountLimitsOptions
  private readonly slots = new Map<string, AccountSlot>()
  private readonly busy: ApiError

  constructor (options: AccountLimitsOptions) {
    this.options = options
    this.busy = new ApiError('overloaded', `The account has ${options.inflightMax} requests in flight (its share of the server); retry shortly.`, undefined, { 'Retry-After': '1' })
  }

  /** Take a slot and a token for this (existing) account, or throw 503 overloaded / 429 rate_limited. */
  enter (account: Account): AccountSlot {
    let slot = this.slots.get(account.account)
    if (slot === undefined) {
      this.slots.set(account.account, slot = { inflight: 0, rate: undefined, bucket: null })
      this.rebuild(slot, account.rateLimit)
    }
    if (slot.inflight >= this.options.inflightMax) throw this.busy
    if (slot.rate !== account.rateLimit) this.rebuild(slot, account.rateLimit)
    if (slot.bucket !== null) {
      const waitMs = slot.bucket.take(this.options.clock.nowMs(), this.options.share?.() ?? 1)
      if (waitMs > 0) {
        const rate = account.rateLimit ?? this.options.defaultRate
        throw new ApiError('rate_limited', `The account allows ${rate.perSecond} requests per second.`, undefined, { 'Retry-After': String(Math.ceil(waitMs / 1000)) })
      }
    }
    slot.inflight++
    return slot
  }

  leave (slot: AccountSlot): void {
    slot.inflight--
  }

  private rebuild (slot: AccountSlot, own: RateLimit | undefined): void {
    const rate = own ?? this.options.defaultRate
    slot.rate = own
    slot.bucket = rate.perSecond === 0 ? null : new RateLimiter(rate.perSecond, this.options.clock.nowMs(), rate.burst ?? rate.perSecond)
  }
}
