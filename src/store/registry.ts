// Accounts, tokens and per-account configuration, read once at start and kept in memory: the hot
// path answers "does this account exist, is this token good, what does this event type require"
// from maps, never from disk. Every change is written through and awaited before it is answered.

import { randomUUID } from 'node:crypto'
import { ApiError } from '../errors.js'
import { newToken, RateLimiter, type Access, type TokenRecord } from '../auth/tokens.js'
import { IdentityVerifier, newIdentitySecret, type IdentitySecrets } from '../auth/identity.js'
import { OriginPolicy } from '../auth/origins.js'
import type { Clock } from '../clock.js'
import type { Key, Store } from './store.js'
import { openWebhook, sealStoredSecrets, sealWebhook } from './seal-secrets.js'
import { compileCampaigns, compileCampaignsSliced, type CampaignDef, type CampaignSet } from '../matching/index.js'
import { compileSegments, EMPTY_SEGMENTS, type SegmentSet } from '../segments/segment-set.js'
import type { SegmentDef } from '../segments/rules.js'
import { compileWebhook, redactWebhook, restoreSecrets, type CompiledWebhook, type WebhookConfig } from '../webhooks/index.js'
import { ACCOUNTS_MAX, CAMPAIGNS_MAX, EVENT_TYPES_MAX, SEGMENT_DEFS_MAX, TOKENS_MAX, WEBHOOKS_MAX } from './limits.js'
import { pageOf, type Page } from './paging.js'

export { CAMPAIGNS_MAX, SEGMENT_DEFS_MAX, WEBHOOKS_MAX }

/** Which page of a listing: items whose key sorts after `cursor` ('' = the first page), at most `limit`. */
export interface PageRequest {
  cursor: string
  limit: number
}

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
}

/** Requests per second (0: unlimited) and the burst a bucket holds (default: one second's worth). */
export interface RateLimit {
  perSecond: number
  burst?: number
}

/** What PATCH may change; `rateLimit: null` goes back to the installation's default rate. */
export type AccountSettings = Partial<Pick<Account, 'name' | 'suspended' | 'allowedOrigins' | 'identityVerification' | 'allowBrowserTokens'>> & { rateLimit?: RateLimit | null }

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
}

/** What browser calls of an account are checked against, compiled when the account changes. */
export interface BrowserAccess {
  origins: OriginPolicy
  /** Null: a profileId is trusted as sent (identityVerification "off"). */
  identity: IdentityVerifier | 'none' | null
  allowBrowserTokens: boolean
}

export interface EventType {
  name: string
  required: string[]
}

/** Built-in event kinds and the fields each requires beyond the common ones. */
export const BUILT_IN_EVENTS: ReadonlyMap<string, EventType> = new Map([
  ['pageView', { name: 'pageView', required: [] }],
  ['productView', { name: 'productView', required: ['sku'] }],
  ['purchase', { name: 'purchase', required: ['orderId'] }],
  // Impressions and clicks of a campaign, as the browser SDK reports them (reports and caps count them).
  ['campaignView', { name: 'campaignView', required: ['campaignId'] }],
  ['campaignClick', { name: 'campaignClick', required: ['campaignId'] }],
])

interface AccountCampaigns {
  defs: Map<string, CampaignDef>
  /**
   * What requests match against: swapped whole when a build finishes, so requests keep using the
   * previous set while the next one is built. Null until first used after start (then compiled at once).
   */
  compiled: CampaignSet | null
  /** Bumped by every change; `compiledVersion` is the version `compiled` was built from. */
  version: number
  compiledVersion: number
  /** A build is under way (at most one per account; a change during it starts another after it). */
  building: boolean
}

/** A campaign build runs in slices of this much work, the event loop serving requests in between. */
export const COMPILE_SLICE_MS = 5

interface AccountSegments {
  defs: Map<string, SegmentDef>
  /** Bumped on every change (persisted), so entities evaluated under an older set are re-evaluated. */
  version: number
  compiled: SegmentSet | null
}

/** Event types of updates, as event-driven webhooks select them. */
export const UPDATE_EVENTS = ['attributesUpdated', 'segmentsUpdated'] as const

const NO_NAMES: ReadonlySet<string> = new Set()

interface AccountWebhooks {
  compiled: Map<string, CompiledWebhook>
  /** Event types some enabled event webhook selects: the hot path writes an outbox row only for those. */
  wantedEvents: Set<string>
  /** `enter <segment>` and `exit <segment>` some enabled audience webhook selects: only those become outbox rows. */
  wantedChanges: Set<string>
  /** Segments some enabled schedule webhook syncs: only their members are kept in the members index. */
  listedSegments: Set<string>
  /** The longest timeoutMs of the enabled sync webhooks (0: none): how long a request may wait for them. */
  syncTimeoutMs: number
  /** Attribute names the enabled webhooks' templates read (`attribute.<name>`): outbox rows carry those. */
  attributeNames: Set<string>
}

interface LiveToken {
  record: TokenRecord
  limiter: RateLimiter | null
}

export class Registry {
  private readonly store: Store
  private readonly clock: Clock
  private readonly accounts = new Map<string, Account>()
  private readonly storedAccounts = new Map<string, StoredAccount>()
  private readonly browserAccess = new Map<string, BrowserAccess>()
  private readonly tokens = new Map<string, LiveToken>()
  /** Token ids by account (listing and counting one account's tokens without scanning every token). */
  private readonly tokenIds = new Map<string, Map<string, string>>()
  /**
   * Creations awaiting their durable write, by scope (`<account> <kind>`, or '' for accounts): counted
   * with what exists, so concurrent creations cannot pass a limit between the check and the insert.
   */
  private readonly creating = new Map<string, Set<string>>()
  private readonly eventTypes = new Map<string, Map<string, EventType>>()
  private readonly campaigns = new Map<string, AccountCampaigns>()
  private readonly segments = new Map<string, AccountSegments>()
  private readonly webhooks = new Map<string, AccountWebhooks>()
  /** Whether webhook targets may be private addresses (BEACON_WEBHOOK_ALLOW_PRIVATE). */
  allowPrivateWebhooks = false
  /** Called after a webhook is saved or deleted (the delivery hub swaps its worker). */
  onWebhookChanged: ((account: string, id: string, webhook: CompiledWebhook | null) => void) | null = null
  /** Called after a segment changes (the background re-evaluation pass). */
  onSegmentsChanged: ((account: string, version: number) => void) | null = null

  constructor (store: Store, clock: Clock) {
    this.store = store
    this.clock = clock
    sealStoredSecrets(store)
    for (const { value } of store.accounts.getRange()) this.setAccount(value as StoredAccount)
    // Tokens and configuration of an account being deleted (its row gone first) are not served.
    for (const { value } of store.tokens.getRange()) if (this.accounts.has((value as TokenRecord).account)) this.addLiveToken(value as TokenRecord)
    for (const { key, value } of store.config.getRange()) {
      const [account, kind] = key as [string, string, string]
      if (!this.accounts.has(account)) continue
      if (kind === 'event-type') this.eventTypesOf(account).set((value as EventType).name, value as EventType)
      else if (kind === 'campaign') this.campaignsOf(account).defs.set((key as string[])[2]!, value as CampaignDef)
      else if (kind === 'segment') this.segmentsOf(account).defs.set((key as string[])[2]!, value as SegmentDef)
      else if (kind === 'segments-version') this.segmentsOf(account).version = value as number
      else if (kind === 'webhook') this.loadWebhook(account, (key as string[])[2]!, openWebhook(store, value as WebhookConfig))
    }
    // Built in slices from the start; a request that comes before its account's build is done compiles at once.
    for (const entry of this.campaigns.values()) this.buildCampaigns(entry)
  }

  // Accounts

  /** The account if it exists and is not suspended: what the public API may serve. */
  activeAccount (account: string): Account | undefined {
    const found = this.accounts.get(account)
    return found === undefined || found.suspended ? undefined : found
  }

  listAccounts (page: PageRequest): Page<Account> { return pageOf(this.accounts, page.cursor, page.limit, valueOf) }

  /** Whether the account exists (suspended or not): not deleted. */
  knows (account: string): boolean { return this.accounts.has(account) }

  /**
   * Delete the account from what is served: its row goes, in the transaction of `jobKey`'s record (the
   * background removal of its data, which resumes after a restart); at once nothing of it is served.
   */
  async forgetAccount (id: string, jobKey: Key, job: unknown): Promise<void> {
    this.getAccount(id)
    this.store.ignoreFailure(this.store.meta.put(jobKey, job))
    const write = this.store.durable(this.store.accounts.remove(id))
    // Out of memory first: no request is served for it from here on.
    this.accounts.delete(id)
    this.storedAccounts.delete(id)
    this.browserAccess.delete(id)
    for (const [tokenId, live] of this.tokens) if (live.record.account === id) this.tokens.delete(tokenId)
    this.tokenIds.delete(id)
    this.eventTypes.delete(id)
    this.campaigns.delete(id)
    this.segments.delete(id)
    const webhooks = this.webhooks.get(id)
    this.webhooks.delete(id)
    for (const webhookId of webhooks?.compiled.keys() ?? []) this.onWebhookChanged?.(id, webhookId, null)
    await write
  }

  getAccount (account: string): Account {
    const found = this.accounts.get(account)
    if (found === undefined) throw new ApiError('account_not_found', 'No such account.')
    return found
  }

  /** A new account requires verified identity; its first identity secret is in this answer only. */
  async createAccount (name: string): Promise<{ account: Account, identitySecret: string }> {
    const identitySecret = newIdentitySecret()
    const now = this.isoNow()
    const stored: StoredAccount = {
      account: randomUUID(), name, suspended: false, createdAt: now, allowedOrigins: [], identityVerification: 'required', allowBrowserTokens: false,
      identitySecrets: { current: this.store.secrets.seal(identitySecret), currentSince: now, previous: null, previousUntil: null },
    }
    let account: Account | undefined
    await this.reserve('', stored.account, false, this.accounts.size, ACCOUNTS_MAX, 'An installation has at most %d accounts.', async () => {
      await this.store.save(this.store.accounts, stored.account, stored)
      account = this.setAccount(stored)
    })
    return { account: account!, identitySecret }
  }

  async updateAccount (id: string, patch: AccountSettings): Promise<Account> {
    this.getAccount(id)
    const { rateLimit, ...rest } = patch
    const next: StoredAccount = { ...this.storedAccounts.get(id)!, ...rest }
    if (rateLimit === null) delete next.rateLimit
    else if (rateLimit !== undefined) next.rateLimit = rateLimit
    await this.store.save(this.store.accounts, id, next)
    return this.setAccount(next)
  }

  /**
   * A new identity secret, answered once; the one it replaces stays valid for `graceMs` (0: refused at
   * once). A secret older than that is dropped: at most two are ever valid.
   */
  async rotateIdentitySecret (id: string, graceMs: number): Promise<{ account: Account, identitySecret: string }> {
    this.getAccount(id)
    const stored = this.storedAccounts.get(id)!
    const identitySecret = newIdentitySecret()
    const nowMs = this.clock.nowMs()
    const previous = graceMs > 0 ? stored.identitySecrets?.current ?? null : null
    const identitySecrets: IdentitySecrets = {
      current: this.store.secrets.seal(identitySecret),
      currentSince: new Date(nowMs).toISOString(),
      previous,
      previousUntil: previous === null ? null : new Date(nowMs + graceMs).toISOString(),
    }
    const next: StoredAccount = { ...stored, identitySecrets }
    await this.store.save(this.store.accounts, id, next)
    return { account: this.setAccount(next), identitySecret }
  }

  /** The account's compiled browser rules (origins, identity); the caller checks it is active. */
  browserAccessOf (account: string): BrowserAccess | undefined {
    return this.browserAccess.get(account)
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
      identitySecretSince: secrets?.currentSince ?? null,
      previousIdentitySecretUntil: secrets?.previousUntil ?? null,
    }
    // The same object while the account is unchanged (the account limiter rebuilds its bucket when it changes).
    if (stored.rateLimit !== undefined) account.rateLimit = stored.rateLimit
    this.storedAccounts.set(account.account, stored)
    this.accounts.set(account.account, account)
    this.browserAccess.set(account.account, {
      origins: new OriginPolicy(account.allowedOrigins),
      identity: verification === 'off' ? null : secrets === null ? 'none' : new IdentityVerifier(secrets, stored => this.store.secrets.open(stored)),
      allowBrowserTokens: account.allowBrowserTokens,
    })
    return account
  }

  // Tokens

  async createToken (account: string, spec: { name: string, attributes: string[], access: Access, ratePerSecond?: number }): Promise<{ record: TokenRecord, token: string }> {
    this.getAccount(account)
    const { id, token, hash } = newToken()
    const record: TokenRecord = {
      id,
      account,
      name: spec.name,
      attributes: spec.attributes,
      access: spec.access,
      ratePerSecond: spec.ratePerSecond ?? null,
      hash,
      createdAt: this.isoNow(),
      revokedAt: null,
    }
    await this.reserve(account + ' token', id, false, this.activeTokens(account), TOKENS_MAX, 'An account has at most %d tokens that are not revoked; revoke some first.', async () => {
      await this.store.save(this.store.tokens, id, record)
      this.addLiveToken(record)
    })
    return { record, token }
  }

  listTokens (account: string, page: PageRequest): Page<TokenRecord> {
    this.getAccount(account)
    return pageOf(this.tokenIdsOf(account), page.cursor, page.limit, id => this.tokens.get(id)!.record)
  }

  private activeTokens (account: string): number {
    let n = 0
    for (const id of this.tokenIdsOf(account).keys()) if (this.tokens.get(id)!.record.revokedAt === null) n++
    return n
  }

  async revokeToken (account: string, id: string): Promise<TokenRecord> {
    const live = this.tokens.get(id)
    if (live === undefined || live.record.account !== account) throw new ApiError('token_not_found')
    if (live.record.revokedAt !== null) return live.record
    const record = { ...live.record, revokedAt: this.isoNow() }
    // Revoked in memory first: "at once" means no request is accepted with it from here on.
    live.record = record
    await this.store.save(this.store.tokens, id, record)
    return record
  }

  /** The token's live entry by id, revoked or not; the caller checks secret, account and revocation. */
  token (id: string): LiveToken | undefined { return this.tokens.get(id) }

  // Event types

  eventType (account: string, name: string): EventType | undefined {
    return BUILT_IN_EVENTS.get(name) ?? this.eventTypes.get(account)?.get(name)
  }

  /** Built-in event types on the first page, then the account's in name order. */
  listEventTypes (account: string, page: PageRequest): Page<EventType> {
    this.getAccount(account)
    const custom = pageOf(this.eventTypes.get(account) ?? [], page.cursor, page.limit, valueOf)
    return page.cursor === '' ? { items: [...BUILT_IN_EVENTS.values(), ...custom.items], next: custom.next } : custom
  }

  async putEventType (account: string, type: EventType): Promise<EventType> {
    this.getAccount(account)
    if (BUILT_IN_EVENTS.has(type.name)) throw new ApiError('conflict', `"${type.name}" is a built-in event type and cannot be changed.`, '/name')
    const types = this.eventTypesOf(account)
    await this.reserve(account + ' event-type', type.name, types.has(type.name), types.size, EVENT_TYPES_MAX, 'An account has at most %d custom event types; delete some first.', async () => {
      await this.store.save(this.store.config, [account, 'event-type', type.name], type)
      types.set(type.name, type)
    })
    return type
  }

  async deleteEventType (account: string, name: string): Promise<void> {
    this.getAccount(account)
    if (BUILT_IN_EVENTS.has(name)) throw new ApiError('conflict', `"${name}" is a built-in event type and cannot be deleted.`)
    if (this.eventTypes.get(account)?.get(name) === undefined) throw new ApiError('event_type_not_found')
    await this.store.durable(this.store.config.remove([account, 'event-type', name]))
    this.eventTypes.get(account)?.delete(name)
  }

  // Campaigns

  /**
   * The account's compiled campaigns, or null when it has none. After a change this is the previous set
   * until the new one is built (in slices, off the request path: `rebuildCampaigns`); only a request
   * that comes before the first build after start is done, with no previous set to serve, compiles at once.
   */
  campaignSet (account: string): CampaignSet | null {
    const entry = this.campaigns.get(account)
    if (entry === undefined) return null
    if (entry.compiled === null && entry.defs.size > 0) {
      entry.compiled = compileCampaigns(campaignInputs(entry.defs))
      entry.compiledVersion = entry.version
    }
    return entry.compiled
  }

  /**
   * Build the account's campaigns again after a change, in slices of COMPILE_SLICE_MS; requests keep
   * matching the previous set until it is swapped in. A small account builds within the first slice,
   * before the change is answered; a large one within its build time after.
   */
  private rebuildCampaigns (entry: AccountCampaigns): void {
    entry.version++
    this.buildCampaigns(entry)
  }

  /** Start a build of the current version unless one is under way (which starts the next when it ends). */
  private buildCampaigns (entry: AccountCampaigns): void {
    if (entry.building) return
    entry.building = true
    const version = entry.version
    const inputs = campaignInputs(entry.defs)
    compileCampaignsSliced(inputs, COMPILE_SLICE_MS, set => {
      entry.building = false
      if (version >= entry.compiledVersion) {
        entry.compiled = inputs.length === 0 ? null : set
        entry.compiledVersion = version
      }
      if (entry.version !== version) this.buildCampaigns(entry)
    })
  }

  listCampaigns (account: string, page: PageRequest): Page<{ id: string, campaign: CampaignDef }> {
    this.getAccount(account)
    return pageOf(this.campaigns.get(account)?.defs ?? [], page.cursor, page.limit, (id, campaign) => ({ id, campaign }))
  }

  /** Whether the account has this campaign (no throw: for counting). */
  hasCampaign (account: string, id: string): boolean {
    return this.campaigns.get(account)?.defs.has(id) === true
  }

  getCampaign (account: string, id: string): CampaignDef {
    this.getAccount(account)
    const def = this.campaigns.get(account)?.defs.get(id)
    if (def === undefined) throw new ApiError('campaign_not_found')
    return def
  }

  async putCampaign (account: string, id: string, def: CampaignDef): Promise<void> {
    this.getAccount(account)
    const entry = this.campaignsOf(account)
    await this.reserve(account + ' campaign', id, entry.defs.has(id), entry.defs.size, CAMPAIGNS_MAX, 'An account has at most %d campaigns; delete some first.', async () => {
      await this.store.save(this.store.config, [account, 'campaign', id], def)
      entry.defs.set(id, def)
      this.rebuildCampaigns(entry)
    })
  }

  async deleteCampaign (account: string, id: string): Promise<void> {
    this.getCampaign(account, id)
    await this.store.durable(this.store.config.remove([account, 'campaign', id]))
    const entry = this.campaignsOf(account)
    entry.defs.delete(id)
    this.rebuildCampaigns(entry)
  }

  // Segments

  /** The account's compiled segments (compiled on first use after a change). */
  segmentSet (account: string): SegmentSet {
    const entry = this.segments.get(account)
    if (entry === undefined) return EMPTY_SEGMENTS
    entry.compiled ??= compileSegments(entry.defs, entry.version)
    return entry.compiled
  }

  listSegments (account: string, page: PageRequest): Page<{ name: string, segment: SegmentDef }> {
    this.getAccount(account)
    return pageOf(this.segments.get(account)?.defs ?? [], page.cursor, page.limit, (name, segment) => ({ name, segment }))
  }

  getSegment (account: string, name: string): SegmentDef {
    this.getAccount(account)
    const def = this.segments.get(account)?.defs.get(name)
    if (def === undefined) throw new ApiError('segment_not_found')
    return def
  }

  async putSegment (account: string, name: string, def: SegmentDef): Promise<void> {
    this.getAccount(account)
    const entry = this.segmentsOf(account)
    await this.reserve(account + ' segment', name, entry.defs.has(name), entry.defs.size, SEGMENT_DEFS_MAX, 'An account has at most %d segments; delete some first.', async () => {
      this.store.config.put([account, 'segment', name], def).catch(noop)
      const version = await this.newSegmentsVersion(account, entry)
      entry.defs.set(name, def)
      this.segmentsChanged(account, entry, version)
    })
  }

  async deleteSegment (account: string, name: string): Promise<void> {
    this.getSegment(account, name)
    const entry = this.segmentsOf(account)
    this.store.config.remove([account, 'segment', name]).catch(noop)
    const version = await this.newSegmentsVersion(account, entry)
    entry.defs.delete(name)
    this.segmentsChanged(account, entry, version)
  }

  private segmentsChanged (account: string, entry: AccountSegments, version: number): void {
    entry.version = version
    entry.compiled = null
    this.onSegmentsChanged?.(account, version)
  }

  // Webhooks

  /** How long a request of this account may wait for its sync webhooks (0: it has none). */
  syncTimeoutMs (account: string): number {
    return this.webhooks.get(account)?.syncTimeoutMs ?? 0
  }

  /** Whether an enabled event webhook of the account selects this event type. */
  wantsEvent (account: string, type: string): boolean {
    return this.webhooks.get(account)?.wantedEvents.has(type) === true
  }

  /** Whether an enabled audience webhook of the account selects this change ('enter' or 'exit') of this segment. */
  wantsChange (account: string, change: 'enter' | 'exit', segment: string): boolean {
    const wanted = this.webhooks.get(account)?.wantedChanges
    return wanted !== undefined && wanted.size > 0 && wanted.has(change + ' ' + segment)
  }

  /** The attribute names the account's enabled webhooks read (empty: outbox rows carry no attributes). */
  webhookAttributes (account: string): ReadonlySet<string> {
    return this.webhooks.get(account)?.attributeNames ?? NO_NAMES
  }

  /** Whether an enabled schedule webhook of the account syncs this segment (its members are indexed). */
  listsMembers (account: string, segment: string): boolean {
    return this.webhooks.get(account)?.listedSegments.has(segment) === true
  }

  /**
   * The segments whose members are indexed changed: a new segments version makes every entity file
   * itself again, lazily on its next message and in the background pass (which schedules wait for).
   */
  private async relist (account: string): Promise<void> {
    const entry = this.segmentsOf(account)
    this.segmentsChanged(account, entry, await this.newSegmentsVersion(account, entry))
  }

  /**
   * Save the account's next segments version; called in the event turn of the configuration write
   * that causes it, both commit together. Entities evaluated under an older version re-evaluate.
   */
  private async newSegmentsVersion (account: string, entry: AccountSegments): Promise<number> {
    const version = Math.max(entry.version + 1, this.clock.nowMs())
    await this.store.save(this.store.config, [account, 'segments-version'], version)
    return version
  }

  /** The account's compiled webhooks (configuration with secrets: never return it as is). */
  webhooksOf (account: string): Iterable<CompiledWebhook> {
    return this.webhooks.get(account)?.compiled.values() ?? []
  }

  allWebhooks (): CompiledWebhook[] {
    return [...this.webhooks.values()].flatMap(entry => [...entry.compiled.values()])
  }

  webhook (account: string, id: string): CompiledWebhook {
    this.getAccount(account)
    const found = this.webhooks.get(account)?.compiled.get(id)
    if (found === undefined) throw new ApiError('webhook_not_found')
    return found
  }

  listWebhooks (account: string, page: PageRequest): Page<{ id: string, webhook: WebhookConfig }> {
    this.getAccount(account)
    return pageOf(this.webhooks.get(account)?.compiled ?? [], page.cursor, page.limit, (id, w) => ({ id, webhook: redactWebhook(w.config) }))
  }

  /** Validate, compile and save; secrets sent back as "[redacted]" keep their saved values. */
  async putWebhook (account: string, id: string, body: unknown): Promise<CompiledWebhook> {
    this.getAccount(account)
    const entry = this.webhookEntry(account)
    const previous = entry.compiled.get(id)
    const compiled = compileWebhook(id, account, restoreSecrets(body, previous?.config ?? null), { allowPrivate: this.allowPrivateWebhooks })
    await this.reserve(account + ' webhook', id, previous !== undefined, entry.compiled.size, WEBHOOKS_MAX, 'An account has at most %d webhooks; delete some first.', async () => {
      await this.store.save(this.store.config, [account, 'webhook', id], sealWebhook(this.store, compiled.config))
      entry.compiled.set(id, compiled)
    })
    if (this.indexWebhooks(entry)) await this.relist(account)
    this.onWebhookChanged?.(account, id, compiled)
    return compiled
  }

  async deleteWebhook (account: string, id: string): Promise<void> {
    this.webhook(account, id)
    await this.store.durable(this.store.config.remove([account, 'webhook', id]))
    const entry = this.webhookEntry(account)
    entry.compiled.delete(id)
    if (this.indexWebhooks(entry)) await this.relist(account)
    this.onWebhookChanged?.(account, id, null)
  }

  private loadWebhook (account: string, id: string, config: WebhookConfig): void {
    const entry = this.webhookEntry(account)
    // Saved configurations passed validation; allowPrivate is not known yet at load, so no SSRF verdict here
    // (the sender checks every connection anyway).
    entry.compiled.set(id, compileWebhook(id, account, config, { allowPrivate: true }))
    this.indexWebhooks(entry)
  }

  /** Recompute what the hot path reads of the webhooks; true when the listed segments changed. */
  private indexWebhooks (entry: AccountWebhooks): boolean {
    const listedBefore = entry.listedSegments
    entry.wantedEvents = new Set()
    entry.wantedChanges = new Set()
    entry.listedSegments = new Set()
    entry.syncTimeoutMs = 0
    entry.attributeNames = new Set()
    for (const webhook of entry.compiled.values()) {
      if (!webhook.enabled) continue
      for (const template of [webhook.url, webhook.payload, ...webhook.headerTemplates.map(header => header.value)]) {
        for (const name of template.attributeNames()) entry.attributeNames.add(name)
      }
      const trigger = webhook.trigger
      if (trigger.kind === 'event') for (const type of trigger.events) entry.wantedEvents.add(type)
      if (trigger.kind === 'audience') {
        for (const segment of trigger.segments) {
          if (trigger.onEnter) entry.wantedChanges.add('enter ' + segment)
          if (trigger.onExit) entry.wantedChanges.add('exit ' + segment)
        }
      }
      if (trigger.kind === 'schedule') for (const segment of trigger.segments) entry.listedSegments.add(segment)
      if (webhook.mode === 'sync') entry.syncTimeoutMs = Math.max(entry.syncTimeoutMs, webhook.timeoutMs)
    }
    return listedBefore.size !== entry.listedSegments.size || [...listedBefore].some(segment => !entry.listedSegments.has(segment))
  }

  private webhookEntry (account: string): AccountWebhooks {
    let entry = this.webhooks.get(account)
    if (entry === undefined) {
      entry = { compiled: new Map(), wantedEvents: new Set(), wantedChanges: new Set(), listedSegments: new Set(), syncTimeoutMs: 0, attributeNames: new Set() }
      this.webhooks.set(account, entry)
    }
    return entry
  }

  private segmentsOf (account: string): AccountSegments {
    let entry = this.segments.get(account)
    if (entry === undefined) {
      entry = { defs: new Map(), version: 0, compiled: null }
      this.segments.set(account, entry)
    }
    return entry
  }

  private campaignsOf (account: string): AccountCampaigns {
    let entry = this.campaigns.get(account)
    if (entry === undefined) {
      entry = { defs: new Map(), compiled: null, version: 0, compiledVersion: 0, building: false }
      this.campaigns.set(account, entry)
    }
    return entry
  }

  private eventTypesOf (account: string): Map<string, EventType> {
    let types = this.eventTypes.get(account)
    if (types === undefined) {
      types = new Map()
      this.eventTypes.set(account, types)
    }
    return types
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

  /**
   * Create-or-replace under a limit, atomically: a new key is checked against what exists plus the
   * creations still awaiting their write, and holds its slot until `write` settled (which inserts it).
   * `limitMessage` has %d for the limit. A key already being created counts once.
   */
  private async reserve (scope: string, key: string, exists: boolean, size: number, max: number, limitMessage: string, write: () => Promise<void>): Promise<void> {
    if (exists) return write()
    let pending = this.creating.get(scope)
    if (pending === undefined) this.creating.set(scope, pending = new Set())
    if (pending.has(key)) return write()
    if (size + pending.size >= max) throw new ApiError('conflict', limitMessage.replace('%d', max.toLocaleString('en-US')))
    pending.add(key)
    try {
      await write()
    } finally {
      pending.delete(key)
      if (pending.size === 0) this.creating.delete(scope)
    }
  }

  private isoNow (): string { return new Date(this.clock.nowMs()).toISOString() }
}

function noop (): void {}

function campaignInputs (defs: Map<string, CampaignDef>): Array<{ id: string, def: CampaignDef }> {
  return [...defs].map(([id, def]) => ({ id, def }))
}

function valueOf<V> (_key: string, value: V): V { return value }
