// Accounts, tokens and per-account configuration, read once at start and kept in memory: the hot
// path answers "does this account exist, is this token good, what does this event type require"
// from maps, never from disk. Every change is written through and awaited before it is answered.

import { randomUUID } from 'node:crypto'
import { ApiError } from '../errors.js'
import { newToken, RateLimiter, type Access, type TokenRecord } from '../auth/tokens.js'
import type { Clock } from '../clock.js'
import type { Store } from './store.js'
import { compileCampaigns, type CampaignDef, type CampaignSet } from '../matching/index.js'
import { compileSegments, EMPTY_SEGMENTS, type SegmentSet } from '../segments/segment-set.js'
import type { SegmentDef } from '../segments/rules.js'
import { compileWebhook, redactWebhook, restoreSecrets, type CompiledWebhook, type WebhookConfig } from '../webhooks/index.js'

export interface Account {
  account: string
  name: string
  suspended: boolean
  createdAt: string
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
])

/** Campaigns per account are bounded: the compiled set and each visitor's caps grow with it. */
export const CAMPAIGNS_MAX = 10_000

interface AccountCampaigns {
  defs: Map<string, CampaignDef>
  /** Compiled on first use after a change (so a bulk load compiles once), then swapped whole. */
  compiled: CampaignSet | null
}

/** Segments per account are bounded: each computed one is evaluated after every change of every entity. */
export const SEGMENT_DEFS_MAX = 1_000

interface AccountSegments {
  defs: Map<string, SegmentDef>
  /** Bumped on every change (persisted), so entities evaluated under an older set are re-evaluated. */
  version: number
  compiled: SegmentSet | null
}

export const WEBHOOKS_MAX = 100

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
  private readonly tokens = new Map<string, LiveToken>()
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
    for (const { value } of store.accounts.getRange()) {
      const account = value as Account
      this.accounts.set(account.account, account)
    }
    for (const { value } of store.tokens.getRange()) this.addLiveToken(value as TokenRecord)
    for (const { key, value } of store.config.getRange()) {
      const [account, kind] = key as [string, string, string]
      if (kind === 'event-type') this.eventTypesOf(account).set((value as EventType).name, value as EventType)
      else if (kind === 'campaign') this.campaignsOf(account).defs.set((key as string[])[2]!, value as CampaignDef)
      else if (kind === 'segment') this.segmentsOf(account).defs.set((key as string[])[2]!, value as SegmentDef)
      else if (kind === 'segments-version') this.segmentsOf(account).version = value as number
      else if (kind === 'webhook') this.loadWebhook(account, (key as string[])[2]!, value as WebhookConfig)
    }
  }

  // Accounts

  /** The account if it exists and is not suspended: what the public API may serve. */
  activeAccount (account: string): Account | undefined {
    const found = this.accounts.get(account)
    return found === undefined || found.suspended ? undefined : found
  }

  listAccounts (): Account[] { return [...this.accounts.values()] }

  getAccount (account: string): Account {
    const found = this.accounts.get(account)
    if (found === undefined) throw new ApiError('account_not_found', 'No such account.')
    return found
  }

  async createAccount (name: string): Promise<Account> {
    const account: Account = { account: randomUUID(), name, suspended: false, createdAt: this.isoNow() }
    await this.store.save(this.store.accounts, account.account, account)
    this.accounts.set(account.account, account)
    return account
  }

  async updateAccount (id: string, patch: { name?: string, suspended?: boolean }): Promise<Account> {
    const next = { ...this.getAccount(id), ...patch }
    await this.store.save(this.store.accounts, id, next)
    this.accounts.set(id, next)
    return next
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
    await this.store.save(this.store.tokens, id, record)
    this.addLiveToken(record)
    return { record, token }
  }

  listTokens (account: string): TokenRecord[] {
    this.getAccount(account)
    const out: TokenRecord[] = []
    for (const live of this.tokens.values()) if (live.record.account === account) out.push(live.record)
    return out
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

  listEventTypes (account: string): EventType[] {
    this.getAccount(account)
    return [...BUILT_IN_EVENTS.values(), ...(this.eventTypes.get(account)?.values() ?? [])]
  }

  async putEventType (account: string, type: EventType): Promise<EventType> {
    this.getAccount(account)
    if (BUILT_IN_EVENTS.has(type.name)) throw new ApiError('conflict', `"${type.name}" is a built-in event type and cannot be changed.`, '/name')
    await this.store.save(this.store.config, [account, 'event-type', type.name], type)
    this.eventTypesOf(account).set(type.name, type)
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

  /** The account's compiled campaigns (compiling them if they changed), or null when it has none. */
  campaignSet (account: string): CampaignSet | null {
    const entry = this.campaigns.get(account)
    if (entry === undefined || entry.defs.size === 0) return null
    entry.compiled ??= compileCampaigns([...entry.defs].map(([id, def]) => ({ id, def })))
    return entry.compiled
  }

  listCampaigns (account: string): { id: string, campaign: CampaignDef }[] {
    this.getAccount(account)
    return [...(this.campaigns.get(account)?.defs ?? [])].map(([id, campaign]) => ({ id, campaign }))
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
    if (!entry.defs.has(id) && entry.defs.size >= CAMPAIGNS_MAX) {
      throw new ApiError('conflict', `An account has at most ${CAMPAIGNS_MAX} campaigns; delete some first.`)
    }
    await this.store.save(this.store.config, [account, 'campaign', id], def)
    entry.defs.set(id, def)
    entry.compiled = null
  }

  async deleteCampaign (account: string, id: string): Promise<void> {
    this.getCampaign(account, id)
    await this.store.durable(this.store.config.remove([account, 'campaign', id]))
    const entry = this.campaignsOf(account)
    entry.defs.delete(id)
    entry.compiled = null
  }

  // Segments

  /** The account's compiled segments (compiled on first use after a change). */
  segmentSet (account: string): SegmentSet {
    const entry = this.segments.get(account)
    if (entry === undefined) return EMPTY_SEGMENTS
    entry.compiled ??= compileSegments(entry.defs, entry.version)
    return entry.compiled
  }

  listSegments (account: string): { name: string, segment: SegmentDef }[] {
    this.getAccount(account)
    return [...(this.segments.get(account)?.defs ?? [])].map(([name, segment]) => ({ name, segment }))
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
    if (!entry.defs.has(name) && entry.defs.size >= SEGMENT_DEFS_MAX) {
      throw new ApiError('conflict', `An account has at most ${SEGMENT_DEFS_MAX} segments; delete some first.`)
    }
    this.store.config.put([account, 'segment', name], def).catch(noop)
    const version = await this.newSegmentsVersion(account, entry)
    entry.defs.set(name, def)
    this.segmentsChanged(account, entry, version)
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

  listWebhooks (account: string): { id: string, webhook: WebhookConfig }[] {
    this.getAccount(account)
    return [...(this.webhooks.get(account)?.compiled.values() ?? [])].map(w => ({ id: w.id, webhook: redactWebhook(w.config) }))
  }

  /** Validate, compile and save; secrets sent back as "[redacted]" keep their saved values. */
  async putWebhook (account: string, id: string, body: unknown): Promise<CompiledWebhook> {
    this.getAccount(account)
    const entry = this.webhookEntry(account)
    const previous = entry.compiled.get(id)
    if (previous === undefined && entry.compiled.size >= WEBHOOKS_MAX) {
      throw new ApiError('conflict', `An account has at most ${WEBHOOKS_MAX} webhooks; delete some first.`)
    }
    const compiled = compileWebhook(id, account, restoreSecrets(body, previous?.config ?? null), { allowPrivate: this.allowPrivateWebhooks })
    await this.store.save(this.store.config, [account, 'webhook', id], compiled.config)
    entry.compiled.set(id, compiled)
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
      entry = { defs: new Map(), compiled: null }
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
  }

  private isoNow (): string { return new Date(this.clock.nowMs()).toISOString() }
}

function noop (): void {}
