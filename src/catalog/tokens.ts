// API tokens, read once at start and kept in memory: every public request checks its token against
// these maps (and its rate limiter), never the disk. Written through to the store's tokens db.

import { ApiError } from '../errors.js'
import { newToken, RateLimiter, type Access, type TokenRecord } from '../auth/tokens.js'
import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'
import { TOKENS_MAX } from '../store/limits.js'
import { pageOf, type Page } from '../store/paging.js'
import type { AccountCatalog } from './accounts.js'
import type { PageRequest } from './config-rows.js'
import type { ConfigWriter } from '../store/config-writer.js'
import { Reservations } from './reservations.js'

export interface LiveToken {
  record: TokenRecord
  limiter: RateLimiter | null
}

export class TokenCatalog {
  private readonly store: Store
  private readonly clock: Clock
  private readonly accounts: AccountCatalog
  private readonly tokens = new Map<string, LiveToken>()
  /** Token ids by account (listing and counting one account's tokens without scanning every token). */
  private readonly tokenIds = new Map<string, Map<string, string>>()
  private readonly reservations = new Reservations()
  /** Cluster mode: changes go through the replicated configuration (Catalogs.replicate); null: embedded. */
  writer: ConfigWriter | null = null

  constructor (store: Store, clock: Clock, accounts: AccountCatalog) {
    this.store = store
    this.clock = clock
    this.accounts = accounts
    // Tokens of an account being deleted (its row gone first) are not served.
    for (const { value } of store.tokens.getRange()) if (accounts.knows((value as TokenRecord).account)) this.addLiveToken(value as TokenRecord)
  }

  async create (account: string, spec: { name: string, attributes: string[], access: Access, ratePerSecond?: number }): Promise<{ record: TokenRecord, token: string }> {
    const { id, token, hash } = newToken()
    const record: TokenRecord = {
      id,
      account,
      name: spec.name,
      attributes: spec.attributes,
      access: spec.access,
      ratePerSecond: spec.ratePerSecond ?? null,
      hash,
      createdAt: new Date(this.clock.nowMs()).toISOString(),
      revokedAt: null,
    }
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        this.accounts.get(account)
        if (this.activeTokens(account) >= TOKENS_MAX) throw new ApiError('conflict', `An account has at most ${TOKENS_MAX.toLocaleString('en-US')} tokens that are not revoked; revoke some first.`)
        return [{ row: { db: 'tokens', key: id }, value: record }]
      })
      return { record, token }
    }
    this.accounts.get(account)
    await this.reservations.reserve(account + ' token', id, false, this.activeTokens(account), TOKENS_MAX, 'An account has at most %d tokens that are not revoked; revoke some first.', async () => {
      await this.store.save(this.store.tokens, id, record)
      this.addLiveToken(record)
    })
    return { record, token }
  }

  list (account: string, page: PageRequest): Page<TokenRecord> {
    this.accounts.get(account)
    return pageOf(this.tokenIdsOf(account), page.cursor, page.limit, id => this.tokens.get(id)!.record)
  }

  async revoke (account: string, id: string): Promise<TokenRecord> {
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        const live = this.tokens.get(id)
        if (live === undefined || live.record.account !== account) throw new ApiError('token_not_found')
        if (live.record.revokedAt !== null) return []
        return [{ row: { db: 'tokens', key: id }, value: { ...live.record, revokedAt: new Date(this.clock.nowMs()).toISOString() } }]
      })
      const revoked = this.tokens.get(id)
      if (revoked === undefined) throw new ApiError('token_not_found')
      return revoked.record
    }
    const live = this.tokens.get(id)
    if (live === undefined || live.record.account !== account) throw new ApiError('token_not_found')
    if (live.record.revokedAt !== null) return live.record
    const record = { ...live.record, revokedAt: new Date(this.clock.nowMs()).toISOString() }
    // Revoked in memory first: "at once" means no request is accepted with it from here on.
    live.record = record
    await this.store.save(this.store.tokens, id, record)
    return record
  }

  /** The token's live entry by id, revoked or not; the caller checks secret, account and revocation. */
  get (id: string): LiveToken | undefined { return this.tokens.get(id) }

  /** Drop the tokens of an account being deleted (their rows go with its background removal). */
  forget (account: string): void {
    for (const [tokenId, live] of this.tokens) if (live.record.account === account) this.tokens.delete(tokenId)
    this.tokenIds.delete(account)
  }

  /** Cluster mode: a token of a known account changed in the replicated configuration (null: deleted). */
  apply (id: string, record: unknown): void {
    const live = this.tokens.get(id)
    if (record === null) {
      if (live === undefined) return
      this.tokens.delete(id)
      this.tokenIds.get(live.record.account)?.delete(id)
      return
    }
    const next = record as TokenRecord
    // A revocation keeps the token's rate limiter (its record is all that changes).
    if (live !== undefined && live.record.ratePerSecond === next.ratePerSecond) live.record = next
    else this.addLiveToken(next)
  }

  private activeTokens (account: string): number {
    let n = 0
    for (const id of this.tokenIdsOf(account).keys()) if (this.tokens.get(id)!.record.revokedAt === null) n++
    return n
  }

  private addLiveToken (record: TokenRecord): void {
    const limiter = record.ratePerSecond === null ? null : new RateLimiter(record.ratePerSecond, this.clock.nowMs())
    this.tokens.set(record.id, { record, limiter })
    this.tokenIdsOf(record.account).set(record.id, record.id)
  }

  private tokenIdsOf (account: string): Map<string, string> {
    let ids = this.tokenIds.get(account)
    if (ids === undefined) this.tokenIds.set(account, ids = new Map())
    return ids
  }
}
