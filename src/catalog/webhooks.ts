// Webhooks: each account's configurations, compiled, their secrets sealed at rest, and what the hot
// path reads of them (which events and segment changes become outbox rows, which segments' members
// are indexed, how long a request waits for sync ones). Delivery hears of every change through the
// listeners given at construction, and reads the webhooks through WebhookLookup.

import type { Listeners } from '../listeners.js'
import type { Store } from '../store/store.js'
import { WEBHOOKS_MAX } from '../store/limits.js'
import type { Page } from '../store/paging.js'
import type { SecretRows } from '../store/seal-secrets.js'
import { refuseKeptSecretsOnNewTarget, secretsTarget } from '../webhooks/kept-secrets.js'
import { compileWebhook, mapSecrets, redactWebhook, restoreSecrets, type CompiledWebhook, type WebhookConfig } from '../webhooks/index.js'
import type { WebhookChanged, WebhookLookup } from '../webhooks/lookup.js'
import type { AccountCatalog } from './accounts.js'
import { ConfigRows, type ConfigCatalog, type ConfigKey, type PageRequest } from './config-rows.js'
import type { ConfigWriter, RowWrite } from '../store/config-writer.js'
import type { SegmentCatalog } from './segments.js'

/** Event types of updates, as event-driven webhooks select them. */
export const UPDATE_EVENTS = ['attributesUpdated', 'segmentsUpdated'] as const

/** The webhook rows' secrets (headers, auth), for sealing at rest: see src/store/seal-secrets.ts. */
export const WEBHOOK_SECRET_ROWS: SecretRows = new Map([
  ['webhook', (value, map) => mapSecrets(value as WebhookConfig, map)],
])

const NO_NAMES: ReadonlySet<string> = new Set()

/** What the hot path reads of an account's enabled webhooks, recomputed when one changes. */
interface WebhookIndex {
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

export interface WebhookCatalogOptions {
  store: Store
  accounts: AccountCatalog
  /** A change of the segments whose members are indexed renumbers the account's segments. */
  segments: SegmentCatalog
  changed: Listeners<WebhookChanged>
  /** Whether webhook targets may be private addresses (BEACON_WEBHOOK_ALLOW_PRIVATE). */
  allowPrivate: boolean
}

export class WebhookCatalog implements ConfigCatalog, WebhookLookup {
  readonly rowKinds = ['webhook']
  private readonly store: Store
  private readonly accounts: AccountCatalog
  private readonly segments: SegmentCatalog
  private readonly changed: Listeners<WebhookChanged>
  private readonly allowPrivate: boolean
  private readonly rows: ConfigRows<CompiledWebhook>
  private readonly indexes = new Map<string, WebhookIndex>()
  /** Cluster mode: changes go through the replicated configuration (Catalogs.replicate); null: embedded. */
  writer: ConfigWriter | null = null

  constructor ({ store, accounts, segments, changed, allowPrivate }: WebhookCatalogOptions) {
    this.store = store
    this.accounts = accounts
    this.segments = segments
    this.changed = changed
    this.allowPrivate = allowPrivate
    this.rows = new ConfigRows({
      store, kind: 'webhook', max: WEBHOOKS_MAX, limitMessage: 'An account has at most %d webhooks; delete some first.', notFound: 'webhook_not_found',
    })
  }

  load ([account, , id]: ConfigKey, value: unknown): void {
    const config = mapSecrets(value as WebhookConfig, secret => this.store.secrets.open(secret))
    // Saved configurations passed validation; allowPrivate is not known yet at load, so no SSRF verdict here
    // (the sender checks every connection anyway).
    this.rows.set(account, id!, compileWebhook(id!, account, config, { allowPrivate: true }))
    this.reindex(account)
  }

  loaded (): void {}

  /**
   * Cluster mode: the webhook changed in the replicated configuration: compiled, indexed and told as a
   * write through this node is. A change of the segments whose members are indexed came with a new
   * segments version in the same change (the writer's), which the segment catalog applies.
   */
  apply ([account, , id]: ConfigKey, value: unknown): void {
    if (value === null) {
      if (!this.rows.has(account, id!)) return
      this.rows.delete(account, id!)
      this.reindex(account)
      this.tell(account, id!, null)
      return
    }
    const config = mapSecrets(value as WebhookConfig, secret => this.store.secrets.open(secret))
    // Validated by the node that took the write; the sender checks every connection's address anyway.
    const compiled = compileWebhook(id!, account, config, { allowPrivate: true })
    this.rows.set(account, id!, compiled)
    this.reindex(account)
    this.tell(account, id!, compiled)
  }

  /** Drop the account's webhooks: their workers are told to go. */
  forget (account: string): void {
    const ids = [...this.rows.of(account)?.keys() ?? []]
    this.rows.forget(account)
    this.indexes.delete(account)
    for (const id of ids) this.tell(account, id, null)
  }

  /** How long a request of this account may wait for its sync webhooks (0: it has none). */
  syncTimeoutMs (account: string): number {
    return this.indexes.get(account)?.syncTimeoutMs ?? 0
  }

  /** Whether an enabled event webhook of the account selects this event type. */
  wantsEvent (account: string, type: string): boolean {
    return this.indexes.get(account)?.wantedEvents.has(type) === true
  }

  /** Whether an enabled audience webhook of the account selects this change ('enter' or 'exit') of this segment. */
  wantsChange (account: string, change: 'enter' | 'exit' | 'erase', segment: string): boolean {
    const wanted = this.indexes.get(account)?.wantedChanges
    return wanted !== undefined && wanted.size > 0 && wanted.has(change + ' ' + segment)
  }

  /** The attribute names the account's enabled webhooks read (empty: outbox rows carry no attributes). */
  attributeNames (account: string): ReadonlySet<string> {
    return this.indexes.get(account)?.attributeNames ?? NO_NAMES
  }

  /** Whether an enabled schedule webhook of the account syncs this segment (its members are indexed). */
  listsMembers (account: string, segment: string): boolean {
    return this.indexes.get(account)?.listedSegments.has(segment) === true
  }

  webhooksOf (account: string): Iterable<CompiledWebhook> {
    return this.rows.of(account)?.values() ?? []
  }

  allWebhooks (): CompiledWebhook[] {
    return [...this.rows.all()]
  }

  webhook (account: string, id: string): CompiledWebhook {
    this.accounts.get(account)
    return this.rows.get(account, id)
  }

  list (account: string, page: PageRequest): Page<{ id: string, webhook: WebhookConfig }> {
    this.accounts.get(account)
    return this.rows.list(account, page, (id, w) => ({ id, webhook: redactWebhook(w.config) }))
  }

  /** Validate, compile and save; secrets sent back as "[redacted]" keep their saved values. */
  async put (account: string, id: string, body: unknown): Promise<CompiledWebhook> {
    if (this.writer !== null) {
      let compiled: CompiledWebhook | undefined
      await this.writer.change(account, () => {
        this.accounts.get(account)
        const previous = this.rows.find(account, id)
        compiled = compileWebhook(id, account, restored(body, previous?.config ?? null), { allowPrivate: this.allowPrivate })
        this.rows.checkLimit(account, id)
        const writes: RowWrite[] = [{ row: this.rows.row(account, id), value: mapSecrets(compiled.config, secret => this.store.secrets.seal(secret)) }]
        if (this.listedSegmentsChange(account, id, compiled)) writes.push(this.segments.versionRow(account))
        return writes
      })
      return compiled!
    }
    this.accounts.get(account)
    const previous = this.rows.find(account, id)
    const compiled = compileWebhook(id, account, restored(body, previous?.config ?? null), { allowPrivate: this.allowPrivate })
    await this.rows.reserve(account, id, async () => {
      await this.rows.save(account, id, mapSecrets(compiled.config, secret => this.store.secrets.seal(secret)))
      this.rows.set(account, id, compiled)
    })
    if (this.reindex(account)) await this.segments.renumber(account)
    this.tell(account, id, compiled)
    return compiled
  }

  async delete (account: string, id: string): Promise<void> {
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        this.webhook(account, id)
        const writes: RowWrite[] = [{ row: this.rows.row(account, id), value: null }]
        if (this.listedSegmentsChange(account, id, null)) writes.push(this.segments.versionRow(account))
        return writes
      })
      return
    }
    this.webhook(account, id)
    await this.rows.remove(account, id)
    this.rows.delete(account, id)
    if (this.reindex(account)) await this.segments.renumber(account)
    this.tell(account, id, null)
  }

  private tell (account: string, id: string, webhook: CompiledWebhook | null): void {
    for (const changed of this.changed.list) changed(account, id, webhook)
  }

  /** Recompute what the hot path reads of the account's webhooks; true when the listed segments changed. */
  private reindex (account: string): boolean {
    const listedBefore = this.indexes.get(account)?.listedSegments ?? NO_NAMES
    const index = indexOf(this.webhooksOf(account))
    this.indexes.set(account, index)
    return !sameNames(listedBefore, index.listedSegments)
  }

  /** Whether setting (null: deleting) webhook `id` would change the segments whose members are indexed. */
  private listedSegmentsChange (account: string, id: string, next: CompiledWebhook | null): boolean {
    const webhooks = new Map(this.rows.of(account) ?? [])
    if (next === null) webhooks.delete(id)
    else webhooks.set(id, next)
    return !sameNames(this.indexes.get(account)?.listedSegments ?? NO_NAMES, indexOf(webhooks.values()).listedSegments)
  }
}

function sameNames (a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every(name => b.has(name))
}

/** What the hot path reads of these webhooks (the enabled ones). */
function indexOf (webhooks: Iterable<CompiledWebhook>): WebhookIndex {
  const index: WebhookIndex = { wantedEvents: new Set(), wantedChanges: new Set(), listedSegments: new Set(), syncTimeoutMs: 0, attributeNames: new Set() }
  for (const webhook of webhooks) {
    if (!webhook.enabled) continue
    for (const template of [webhook.url, webhook.payload, ...webhook.headerTemplates.map(header => header.value)]) {
      for (const name of template.attributeNames()) index.attributeNames.add(name)
    }
    const trigger = webhook.trigger
    if (trigger.kind === 'event') for (const type of trigger.events) index.wantedEvents.add(type)
    if (trigger.kind === 'audience') {
      for (const segment of trigger.segments) {
        if (trigger.onEnter) index.wantedChanges.add('enter ' + segment)
        if (trigger.onExit) index.wantedChanges.add('exit ' + segment)
      }
    }
    if (trigger.kind === 'schedule') for (const segment of trigger.segments) index.listedSegments.add(segment)
    if (webhook.mode === 'sync') index.syncTimeoutMs = Math.max(index.syncTimeoutMs, webhook.timeoutMs)
  }
  return index
}

/** The body with the stored secrets it sent back as "[redacted]", refused when its target moved (src/webhooks/kept-secrets.ts). */
function restored (body: unknown, previous: WebhookConfig | null): unknown {
  const kept: string[] = []
  const restoredBody = restoreSecrets(body, previous, kept)
  if (previous !== null) {
    const request = isRecord(body) && isRecord(body.request) ? body.request : {}
    const delivery = isRecord(body) && isRecord(body.delivery) ? body.delivery : {}
    refuseKeptSecretsOnNewTarget(kept, secretsTarget([previous.request.url, previous.delivery.proxy]), secretsTarget([request.url, delivery.proxy]))
  }
  return restoredBody
}

function isRecord (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
