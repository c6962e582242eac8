// Every catalog of the installation, one per configuration kind, read once at start and kept in
// memory: the hot path answers "does this account exist, is this token good, what does this event
// type require, which campaigns match" from maps, never from disk. Every change is written through
// and awaited before it is answered. A new configuration kind is one file beside this one (a
// ConfigCatalog over ConfigRows) and one line here.

import type { Clock } from '../clock.js'
import type { Listeners } from '../listeners.js'
import { KEY_PART_MAX, type Key, type Store } from '../store/store.js'
import type { TokenRecord } from '../auth/tokens.js'
import { log } from '../log.js'
import { sealStoredSecrets, type SecretRows } from '../store/seal-secrets.js'
import type { WebhookChanged } from '../webhooks/lookup.js'
import { AccountCatalog } from './accounts.js'
import { CampaignCatalog } from './campaigns.js'
import type { ConfigCatalog, ConfigKey } from './config-rows.js'
import type { ConfigRow, ConfigWriter } from '../store/config-writer.js'
import { EventTypeCatalog } from './event-types.js'
import { SavedReportCatalog } from './saved-reports.js'
import { SegmentCatalog, type SegmentsChanged } from './segments.js'
import { TokenCatalog } from './tokens.js'
import { WEBHOOK_SECRET_ROWS, WebhookCatalog } from './webhooks.js'
import { DESTINATION_SECRET_ROWS, DestinationCatalog } from './destinations.js'
import { UndiciProviderHttp, type ProviderHttp } from '../destinations/http.js'
import type { DestinationObserver } from '../destinations/compile.js'

/** The configuration rows that hold secrets, by kind (sealed at rest: src/store/seal-secrets.ts). */
export const CONFIG_SECRET_ROWS: SecretRows = new Map([...WEBHOOK_SECRET_ROWS, ...DESTINATION_SECRET_ROWS])

export interface CatalogsOptions {
  store: Store
  clock: Clock
  /** Told of every change of an account's segments (the background re-evaluation). */
  segmentsChanged: Listeners<SegmentsChanged>
  /** Told of every webhook saved or deleted (the delivery hub swaps its worker). */
  webhookChanged: Listeners<WebhookChanged>
  /** Whether webhook targets may be private addresses (BEACON_WEBHOOK_ALLOW_PRIVATE). */
  allowPrivateWebhooks: boolean
  /** The destinations' HTTP client (SSRF-guarded like webhooks unless private targets are allowed); default: one of its own, never closed (tests without destinations). */
  destinationHttp?: ProviderHttp
  /** Told of every batch a destination sends (metrics). */
  observeDestinations?: DestinationObserver | null
}

export class Catalogs {
  readonly accounts: AccountCatalog
  readonly tokens: TokenCatalog
  readonly eventTypes: EventTypeCatalog
  readonly campaigns: CampaignCatalog
  readonly segments: SegmentCatalog
  readonly webhooks: WebhookCatalog
  readonly destinations: DestinationCatalog
  /** Saved reports (with a retained log; replicated in cluster mode). */
  readonly savedReports: SavedReportCatalog
  /** The per-account configuration kinds, each loading its rows of the config db. */
  private readonly kinds: readonly ConfigCatalog[]
  private readonly byRowKind = new Map<string, ConfigCatalog>()
  private readonly store: Store
  /** The accounts loaded from the local store at start, with all their rows (cluster mode compares against them). */
  readonly loadedAtStart: ReadonlySet<string>
  private writer: ConfigWriter | null = null

  constructor ({ store, clock, segmentsChanged, webhookChanged, allowPrivateWebhooks, destinationHttp, observeDestinations = null }: CatalogsOptions) {
    this.store = store
    sealStoredSecrets(store, CONFIG_SECRET_ROWS)
    const accounts = this.accounts = new AccountCatalog(store, clock)
    this.tokens = new TokenCatalog(store, clock, accounts)
    this.eventTypes = new EventTypeCatalog(store, accounts)
    this.campaigns = new CampaignCatalog(store, accounts, clock)
    this.segments = new SegmentCatalog({ store, clock, accounts, changed: segmentsChanged })
    this.webhooks = new WebhookCatalog({ store, accounts, segments: this.segments, changed: webhookChanged, allowPrivate: allowPrivateWebhooks })
    this.destinations = new DestinationCatalog({ store, accounts, changed: webhookChanged, allowPrivate: allowPrivateWebhooks, http: destinationHttp ?? new UndiciProviderHttp(allowPrivateWebhooks), clock, observe: observeDestinations })
    this.savedReports = new SavedReportCatalog(store, accounts, clock)
    this.kinds = [this.eventTypes, this.campaigns, this.segments, this.webhooks, this.destinations, this.savedReports]
    const byRowKind = this.byRowKind
    for (const kind of this.kinds) for (const rowKind of kind.rowKinds) byRowKind.set(rowKind, kind)
    this.loadedAtStart = new Set(store.accounts.getKeys() as Iterable<string>)
    for (const { key, value } of store.config.getRange()) {
      const configKey = key as ConfigKey
      // The configuration of an account being deleted (its row gone first) is not served.
      if (!accounts.knows(configKey[0])) continue
      byRowKind.get(configKey[1])?.load(configKey, value)
    }
    for (const kind of this.kinds) kind.loaded()
  }

  /**
   * Delete the account from what is served: its row goes, in the transaction of `jobKey`'s record (the
   * background removal of its data, which resumes after a restart); at once nothing of it is served.
   */
  async forgetAccount (id: string, jobKey: Key, job: unknown): Promise<void> {
    if (this.writer !== null) {
      // Cluster mode: the account's record goes from the replicated configuration (every node stops
      // serving it), then the job's record is written here (this node's background removal), then the
      // records of its tokens and configuration go from the bucket in the background. Interrupted, those
      // stay in the bucket unserved (no node serves rows of an unknown account).
      const writer = this.writer
      let rows: ConfigRow[] = []
      await writer.change(id, () => {
        this.accounts.get(id)
        rows = this.rowsOf(id)
        return [{ row: { db: 'accounts', key: id }, value: null }]
      })
      await this.store.save(this.store.meta, jobKey, job)
      writer.removeAll(rows).catch((error: unknown) => log.error({ err: error, account: id }, 'removing a deleted account\'s configuration from the cluster failed'))
      return
    }
    const write = this.accounts.forget(id, jobKey, job)
    this.tokens.forget(id)
    for (const kind of this.kinds) kind.forget(id)
    await write
  }

  /**
   * Cluster mode: told when an account's record left the replicated configuration (deleted through any
   * node, or while this node was away), after it stopped being served: the wiring starts this node's
   * share of the deletion (src/jobs/account-deletion.ts).
   */
  accountRemoved: ((account: string, name: string) => void) | null = null

  /**
   * Cluster mode: from here on every change is written through `writer` (the replicated configuration)
   * and comes back through `apply`. Called once, before any request is served.
   */
  replicate (writer: ConfigWriter): void {
    this.writer = writer
    for (const catalog of [this.accounts, this.tokens, this.eventTypes, this.campaigns, this.segments, this.webhooks, this.destinations, this.savedReports]) catalog.writer = writer
  }

  /**
   * Cluster mode: a row changed in the replicated configuration (value null: deleted) and was written to
   * the local store; update memory and tell the listeners, as a write through this node does. Rows of
   * an account this node does not know (deleted, or not yet seen) are only kept on disk.
   */
  apply (row: ConfigRow, value: unknown): void {
    if (row.db === 'accounts') {
      if (value !== null) {
        this.accounts.apply(row.key, value)
      } else if (this.accounts.knows(row.key)) {
        const { name } = this.accounts.get(row.key)
        this.accounts.apply(row.key, null)
        this.accountRemoved?.(row.key, name)
        this.tokens.forget(row.key)
        for (const kind of this.kinds) kind.forget(row.key)
      }
      return
    }
    if (row.db === 'tokens') {
      const account = value === null ? this.tokens.get(row.key)?.record.account : (value as TokenRecord).account
      if (account !== undefined && this.accounts.knows(account)) this.tokens.apply(row.key, value)
      return
    }
    // Users rows are the panel users' (src/users/users.ts), applied there.
    if (row.db === 'config' && this.accounts.knows(row.key[0])) this.byRowKind.get(row.key[1])?.apply(row.key, value)
  }

  /** Every configuration row of the account: its tokens and its config rows (what deleting it removes). */
  private rowsOf (account: string): ConfigRow[] {
    const rows: ConfigRow[] = []
    for (const record of this.tokens.list(account, { cursor: '', limit: Number.MAX_SAFE_INTEGER }).items) rows.push({ db: 'tokens', key: record.id })
    for (const key of this.store.config.getKeys({ start: [account], end: [account, KEY_PART_MAX] })) {
      // Only configuration: the config db also keeps rows of this node's own (a segment pass's cursor, a schedule's last run).
      if (this.byRowKind.has((key as ConfigKey)[1])) rows.push({ db: 'config', key: key as ConfigKey })
    }
    return rows
  }
}
