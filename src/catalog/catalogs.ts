// Every catalog of the installation, one per configuration kind, read once at start and kept in
// memory: the hot path answers "does this account exist, is this token good, what does this event
// type require, which campaigns match" from maps, never from disk. Every change is written through
// and awaited before it is answered. A new configuration kind is one file beside this one (a
// ConfigCatalog over ConfigRows) and one line here.

import type { Clock } from '../clock.js'
import type { Listeners } from '../listeners.js'
import type { Key, Store } from '../store/store.js'
import { sealStoredSecrets, type SecretRows } from '../store/seal-secrets.js'
import type { WebhookChanged } from '../webhooks/lookup.js'
import { AccountCatalog } from './accounts.js'
import { CampaignCatalog } from './campaigns.js'
import type { ConfigCatalog, ConfigKey } from './config-rows.js'
import { EventTypeCatalog } from './event-types.js'
import { SegmentCatalog, type SegmentsChanged } from './segments.js'
import { TokenCatalog } from './tokens.js'
import { WEBHOOK_SECRET_ROWS, WebhookCatalog } from './webhooks.js'

/** The configuration rows that hold secrets, by kind (sealed at rest: src/store/seal-secrets.ts). */
export const CONFIG_SECRET_ROWS: SecretRows = new Map([...WEBHOOK_SECRET_ROWS])

export interface CatalogsOptions {
  store: Store
  clock: Clock
  /** Told of every change of an account's segments (the background re-evaluation). */
  segmentsChanged: Listeners<SegmentsChanged>
  /** Told of every webhook saved or deleted (the delivery hub swaps its worker). */
  webhookChanged: Listeners<WebhookChanged>
  /** Whether webhook targets may be private addresses (BEACON_WEBHOOK_ALLOW_PRIVATE). */
  allowPrivateWebhooks: boolean
}

export class Catalogs {
  readonly accounts: AccountCatalog
  readonly tokens: TokenCatalog
  readonly eventTypes: EventTypeCatalog
  readonly campaigns: CampaignCatalog
  readonly segments: SegmentCatalog
  readonly webhooks: WebhookCatalog
  /** The per-account configuration kinds, each loading its rows of the config db. */
  private readonly kinds: readonly ConfigCatalog[]

  constructor ({ store, clock, segmentsChanged, webhookChanged, allowPrivateWebhooks }: CatalogsOptions) {
    sealStoredSecrets(store, CONFIG_SECRET_ROWS)
    const accounts = this.accounts = new AccountCatalog(store, clock)
    this.tokens = new TokenCatalog(store, clock, accounts)
    this.eventTypes = new EventTypeCatalog(store, accounts)
    this.campaigns = new CampaignCatalog(store, accounts)
    this.segments = new SegmentCatalog({ store, clock, accounts, changed: segmentsChanged })
    this.webhooks = new WebhookCatalog({ store, accounts, segments: this.segments, changed: webhookChanged, allowPrivate: allowPrivateWebhooks })
    this.kinds = [this.eventTypes, this.campaigns, this.segments, this.webhooks]
    const byRowKind = new Map<string, ConfigCatalog>()
    for (const kind of this.kinds) for (const rowKind of kind.rowKinds) byRowKind.set(rowKind, kind)
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
    const write = this.accounts.forget(id, jobKey, job)
    this.tokens.forget(id)
    for (const kind of this.kinds) kind.forget(id)
    await write
  }
}
