// The accounts, read once at start and kept in memory: the hot path asks "does this account exist, is
// it active, which browser origins and identities does it accept" of maps, never of the disk. Every
// change is written through (the store's accounts db) and awaited before it is answered.

import { randomUUID } from 'node:crypto'
import { ApiError } from '../errors.js'
import { IdentityVerifier, newIdentitySecret, type IdentitySecrets } from '../auth/identity.js'
import { OriginPolicy } from '../auth/origins.js'
import type { Clock } from '../clock.js'
import type { Key, Store } from '../store/store.js'
import { ACCOUNTS_MAX } from '../store/limits.js'
import { pageOf, type Page } from '../store/paging.js'
import type { PageRequest } from './config-rows.js'
import type { ConfigWriter, RowWrite } from '../store/config-writer.js'
import { Reservations } from './reservations.js'
import { seedOf } from '../matching/index.js'

export const IDENTITY_VERIFICATION = ['required', 'off'] as const
export type IdentityVerification = typeof IDENTITY_VERIFICATION[number]

/** An account as the admin API shows it: never its identity secrets. */
export interface Account {
  account: string
  name: string
  suspended: boolean
  createdAt: string
  /** Browser origins allowed to call the public API (CORS); empty: no browser access. */
  allowedOrigins: string[]
  /** 'required': a profileId on /campaigns/query needs a profileIdSignature. */
  identityVerification: IdentityVerification
  /** Whether allowed origins may also call the token endpoints (/visitors/*, /profiles/*). */
  allowBrowserTokens: boolean
  /** When the current identity secret was made (null: none yet, rotate to get one). */
  identitySecretSince: string | null
  /** Until when the previous identity secret is still accepted (null: no previous one). */
  previousIdentitySecretUntil: string | null
  /** The account's own rate on the public endpoints (absent: BEACON_ACCOUNT_RATE_PER_SECOND). */
  rateLimit?: RateLimit
  /** The share of visitors (0–50 %) that gets no campaign at all (absent: none). */
  holdoutPercent?: number
  /** Destinations send only for people whose consent attribute holds the destination's purpose. */
  requireConsent: boolean
}

/** The account's global holdout as the visitors read it: its share and its hash seed. */
export interface HoldoutRule {
  percent: number
  seed: number
}

/** Requests per second (0: unlimited) and the burst a bucket holds (default: one second's worth). */
export interface RateLimit {
  perSecond: number
  burst?: number
}

/** What PATCH may change; `rateLimit: null` goes back to the installation's default rate. */
export type AccountSettings = Partial<Pick<Account, 'name' | 'suspended' | 'allowedOrigins' | 'identityVerification' | 'allowBrowserTokens' | 'holdoutPercent' | 'requireConsent'>> & { rateLimit?: RateLimit | null }

/** What is kept on disk: the settings and the identity secrets (sealed). Fields absent from older records take safe defaults. */
interface StoredAccount {
  account: string
  name: string
  suspended: boolean
  createdAt: string
  allowedOrigins?: string[]
  identityVerification?: IdentityVerification
  allowBrowserTokens?: boolean
  identitySecrets?: IdentitySecrets
  rateLimit?: RateLimit
  holdoutPercent?: number
  requireConsent?: boolean
  /** The rate last set with the admin key: an owner may lower the account's rate below it, never raise it. */
  operatorRateLimit?: RateLimit
}

/** Who changes an account's settings: the operator (admin key), or an owner, bounded by the operator's rate. */
export type ChangedBy = { type: 'operator' } | { type: 'owner', defaultRate: RateLimit }

/** Whether `rate` is no more than `ceiling` (perSecond 0 is unlimited; a burst defaults to perSecond). */
export function withinRate (rate: RateLimit, ceiling: RateLimit): boolean {
  if (ceiling.perSecond === 0) return true
  return rate.perSecond > 0 && rate.perSecond <= ceiling.perSecond && (rate.burst ?? rate.perSecond) <= (ceiling.burst ?? ceiling.perSecond)
}

/** What browser calls of an account are checked against, compiled when the account changes. */
export interface BrowserAccess {
  origins: OriginPolicy
  /** Null: a profileId is trusted as sent (identityVerification "off"). */
  identity: IdentityVerifier | 'none' | null
  allowBrowserTokens: boolean
}

export class AccountCatalog {
  private readonly store: Store
  private readonly clock: Clock
  private readonly accounts = new Map<string, Account>()
  private readonly stored = new Map<string, StoredAccount>()
  private readonly browserAccess = new Map<string, BrowserAccess>()
  private readonly holdouts = new Map<string, HoldoutRule>()
  private readonly reservations = new Reservations()
  /** Cluster mode: changes go through the replicated configuration (Catalogs.replicate); null: embedded. */
  writer: ConfigWriter | null = null

  constructor (store: Store, clock: Clock) {
    this.store = store
    this.clock = clock
    for (const { value } of store.accounts.getRange()) this.setAccount(value as StoredAccount)
  }

  /** The account if it exists and is not suspended: what the public API may serve. */
  active (account: string): Account | undefined {
    const found = this.accounts.get(account)
    return found === undefined || found.suspended ? undefined : found
  }

  list (page: PageRequest): Page<Account> { return pageOf(this.accounts, page.cursor, page.limit, valueOf) }

  /** Whether the account exists (suspended or not): not deleted. */
  knows (account: string): boolean { return this.accounts.has(account) }

  /** Whether the account's destinations send only for people who consented to their purpose (false for an unknown account). */
  requiresConsent (account: string): boolean {
    return this.accounts.get(account)?.requireConsent === true
  }

  get (account: string): Account {
    const found = this.accounts.get(account)
    if (found === undefined) throw new ApiError('account_not_found', 'No such account.')
    return found
  }

  /**
   * Delete the account's row, in the transaction of `jobKey`'s record (the background removal of its
   * data, which resumes after a restart), and drop it from memory at once; resolves once durable.
   * Catalogs.forgetAccount drops the account's configuration too.
   */
  forget (id: string, jobKey: Key, job: unknown): Promise<void> {
    this.get(id)
    this.store.ignoreFailure(this.store.meta.put(jobKey, job))
    const write = this.store.durable(this.store.accounts.remove(id))
    // Out of memory first: no request is served for it from here on.
    this.accounts.delete(id)
    this.stored.delete(id)
    this.browserAccess.delete(id)
    this.holdouts.delete(id)
    return write
  }

  /** A new account requires verified identity; its first identity secret is in this answer only. */
  async create (name: string): Promise<{ account: Account, identitySecret: string }> {
    const identitySecret = newIdentitySecret()
    const now = new Date(this.clock.nowMs()).toISOString()
    const stored: StoredAccount = {
      account: randomUUID(), name, suspended: false, createdAt: now, allowedOrigins: [], identityVerification: 'required', allowBrowserTokens: false,
      identitySecrets: { current: this.store.secrets.seal(identitySecret), currentSince: now, previous: null, previousUntil: null },
    }
    if (this.writer !== null) {
      await this.writer.change('', () => {
        if (this.accounts.size >= ACCOUNTS_MAX) throw new ApiError('conflict', `An installation has at most ${ACCOUNTS_MAX.toLocaleString('en-US')} accounts.`)
        return [accountRow(stored)]
      })
      return { account: this.get(stored.account), identitySecret }
    }
    let account: Account | undefined
    await this.reservations.reserve('', stored.account, false, this.accounts.size, ACCOUNTS_MAX, 'An installation has at most %d accounts.', async () => {
      await this.store.save(this.store.accounts, stored.account, stored)
      account = this.setAccount(stored)
    })
    return { account: account!, identitySecret }
  }

  async update (id: string, patch: AccountSettings, by: ChangedBy = { type: 'operator' }): Promise<Account> {
    const patched = (): StoredAccount => {
      this.get(id)
      const { rateLimit, ...rest } = patch
      const next: StoredAccount = { ...this.stored.get(id)!, ...rest }
      if (rateLimit !== undefined) setRate(next, rateLimit, by)
      return next
    }
    if (this.writer !== null) {
      await this.writer.change(id, () => [accountRow(patched())])
      return this.get(id)
    }
    const next = patched()
    await this.store.save(this.store.accounts, id, next)
    return this.setAccount(next)
  }

  /**
   * A new identity secret, answered once; the one it replaces stays valid for `graceMs` (0: refused at
   * once). A secret older than that is dropped: at most two are ever valid.
   */
  async rotateIdentitySecret (id: string, graceMs: number): Promise<{ account: Account, identitySecret: string }> {
    const identitySecret = newIdentitySecret()
    const rotated = (): StoredAccount => {
      this.get(id)
      const stored = this.stored.get(id)!
      const nowMs = this.clock.nowMs()
      const previous = graceMs > 0 ? stored.identitySecrets?.current ?? null : null
      const identitySecrets: IdentitySecrets = {
        current: this.store.secrets.seal(identitySecret),
        currentSince: new Date(nowMs).toISOString(),
        previous,
        previousUntil: previous === null ? null : new Date(nowMs + graceMs).toISOString(),
      }
      return { ...stored, identitySecrets }
    }
    if (this.writer !== null) {
      await this.writer.change(id, () => [accountRow(rotated())])
      return { account: this.get(id), identitySecret }
    }
    const next = rotated()
    await this.store.save(this.store.accounts, id, next)
    return { account: this.setAccount(next), identitySecret }
  }

  /**
   * Cluster mode: the account's record changed in the replicated configuration (null: deleted); true
   * when it is new here (Catalogs.apply then loads its configuration rows).
   */
  apply (id: string, stored: unknown): boolean {
    if (stored === null) {
      this.accounts.delete(id)
      this.stored.delete(id)
      this.browserAccess.delete(id)
      this.holdouts.delete(id)
      return false
    }
    const known = this.accounts.has(id)
    this.setAccount(stored as StoredAccount)
    return !known
  }

  /** The account's compiled browser rules (origins, identity); the caller checks it is active. */
  browserAccessOf (account: string): BrowserAccess | undefined {
    return this.browserAccess.get(account)
  }

  /** The account's global holdout, or null when it has none (a map read: the event path asks). */
  holdoutOf (account: string): HoldoutRule | null {
    return this.holdouts.get(account) ?? null
  }

  /** Keep the stored record, its admin view and its compiled browser rules; answers the view. */
  private setAccount (stored: StoredAccount): Account {
    const secrets = stored.identitySecrets ?? null
    // Records written before verified identity existed read as "required": the safe side (see the upgrade notes).
    const verification = stored.identityVerification ?? 'required'
    const account: Account = {
      account: stored.account,
      name: stored.name,
      suspended: stored.suspended,
      createdAt: stored.createdAt,
      allowedOrigins: stored.allowedOrigins ?? [],
      identityVerification: verification,
      allowBrowserTokens: stored.allowBrowserTokens ?? false,
      requireConsent: stored.requireConsent ?? false,
      identitySecretSince: secrets?.currentSince ?? null,
      previousIdentitySecretUntil: secrets?.previousUntil ?? null,
    }
    // The same object while the account is unchanged (the account limiter rebuilds its bucket when it changes).
    if (stored.rateLimit !== undefined) account.rateLimit = stored.rateLimit
    if (stored.holdoutPercent !== undefined && stored.holdoutPercent > 0) {
      account.holdoutPercent = stored.holdoutPercent
      this.holdouts.set(account.account, { percent: stored.holdoutPercent, seed: seedOf(account.account, '$holdout') })
    } else {
      this.holdouts.delete(account.account)
    }
    this.stored.set(account.account, stored)
    this.accounts.set(account.account, account)
    this.browserAccess.set(account.account, {
      origins: new OriginPolicy(account.allowedOrigins),
      identity: verification === 'off' ? null : secrets === null ? 'none' : new IdentityVerifier(secrets, stored => this.store.secrets.open(stored)),
      allowBrowserTokens: account.allowBrowserTokens,
    })
    return account
  }
}

function valueOf<V> (_key: string, value: V): V { return value }

/**
 * The admin key sets the operator's rate (null removes it); an owner may set any rate within it (or
 * within BEACON_ACCOUNT_RATE_PER_SECOND when the operator set none), and null goes back to it.
 */
function setRate (next: StoredAccount, rateLimit: RateLimit | null, by: ChangedBy): void {
  if (by.type === 'operator') {
    if (rateLimit === null) {
      delete next.rateLimit
      delete next.operatorRateLimit
    } else {
      next.rateLimit = rateLimit
      next.operatorRateLimit = rateLimit
    }
    return
  }
  const ceiling = next.operatorRateLimit ?? by.defaultRate
  if (rateLimit === null) {
    if (next.operatorRateLimit === undefined) delete next.rateLimit
    else next.rateLimit = next.operatorRateLimit
    return
  }
  if (!withinRate(rateLimit, ceiling)) {
    const burst = ceiling.burst ?? ceiling.perSecond
    throw new ApiError('role_forbidden', `The operator limits this account to ${ceiling.perSecond} requests per second (burst ${burst}): an owner may lower the rate, never raise or remove it.`, '/rateLimit')
  }
  next.rateLimit = rateLimit
}

function accountRow (stored: StoredAccount): RowWrite {
  return { row: { db: 'accounts', key: stored.account }, value: stored }
}
