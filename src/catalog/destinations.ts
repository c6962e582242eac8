// Native destinations: each account's configurations, compiled, their credentials sealed at rest, and
// what the hot path reads of them (which events and segment changes become outbox rows, which
// attributes those rows carry). Delivery hears of every change through the webhook listeners (a
// destination rides the webhook machinery under the key `~<id>`: src/destinations/compile.ts).

import type { Clock } from '../clock.js'
import type { Listeners } from '../listeners.js'
import type { Store } from '../store/store.js'
import { DESTINATIONS_MAX } from '../store/limits.js'
import type { Page } from '../store/paging.js'
import type { SecretRows } from '../store/seal-secrets.js'
import type { ConfigWriter } from '../store/config-writer.js'
import type { WebhookChanged } from '../webhooks/lookup.js'
import type { CompiledWebhook } from '../webhooks/compile.js'
import { mapCredentials, validateDestination, type DestinationConfig } from '../destinations/config.js'
import { compileDestination, destinationKey, DESTINATION_KEY_PREFIX, type CompiledDestination, type DestinationObserver } from '../destinations/compile.js'
import type { ProviderHttp } from '../destinations/http.js'
import type { AccountCatalog } from './accounts.js'
import { ConfigRows, type ConfigCatalog, type ConfigKey, type PageRequest } from './config-rows.js'

/** The destination rows' credentials, for sealing at rest: see src/store/seal-secrets.ts. */
export const DESTINATION_SECRET_ROWS: SecretRows = new Map([
  ['destination', (value, map) => mapCredentials(value as DestinationConfig, map)],
])

const NO_NAMES: ReadonlySet<string> = new Set()

interface DestinationIndex {
  wantedEvents: Set<string>
  wantedChanges: Set<string>
  attributeNames: Set<string>
}

export interface DestinationCatalogOptions {
  store: Store
  accounts: AccountCatalog
  changed: Listeners<WebhookChanged>
  allowPrivate: boolean
  http: ProviderHttp
  clock: Clock
  observe?: DestinationObserver | null
}

export class DestinationCatalog implements ConfigCatalog {
  readonly rowKinds = ['destination']
  private readonly store: Store
  private readonly accounts: AccountCatalog
  private readonly changed: Listeners<WebhookChanged>
  private readonly allowPrivate: boolean
  private readonly deps: { http: ProviderHttp, clock: Clock, observe: DestinationObserver | null, accountRequiresConsent: (account: string) => boolean }
  private readonly rows: ConfigRows<CompiledDestination>
  private readonly indexes = new Map<string, DestinationIndex>()
  writer: ConfigWriter | null = null

  constructor ({ store, accounts, changed, allowPrivate, http, clock, observe = null }: DestinationCatalogOptions) {
    this.store = store
    this.accounts = accounts
    this.changed = changed
    this.allowPrivate = allowPrivate
    this.deps = { http, clock, observe, accountRequiresConsent: account => accounts.requiresConsent(account) }
    this.rows = new ConfigRows({
      store, kind: 'destination', max: DESTINATIONS_MAX, limitMessage: 'An account has at most %d destinations; delete some first.', notFound: 'destination_not_found',
    })
  }

  load ([account, , id]: ConfigKey, value: unknown): void {
    this.rows.set(account, id!, this.compile(account, id!, value))
    this.reindex(account)
  }

  loaded (): void {}

  apply ([account, , id]: ConfigKey, value: unknown): void {
    if (value === null) {
      if (!this.rows.has(account, id!)) return
      this.rows.delete(account, id!)
      this.reindex(account)
      this.tell(account, id!, null)
      return
    }
    const compiled = this.compile(account, id!, value)
    this.rows.set(account, id!, compiled)
    this.reindex(account)
    this.tell(account, id!, compiled)
  }

  forget (account: string): void {
    const ids = [...this.rows.of(account)?.keys() ?? []]
    this.rows.forget(account)
    this.indexes.delete(account)
    for (const id of ids) this.tell(account, id, null)
  }

  wantsEvent (account: string, type: string): boolean {
    return this.indexes.get(account)?.wantedEvents.has(type) === true
  }

  wantsChange (account: string, change: 'enter' | 'exit' | 'erase', segment: string): boolean {
    return this.indexes.get(account)?.wantedChanges.has(change + ' ' + segment) === true
  }

  attributeNames (account: string): ReadonlySet<string> {
    return this.indexes.get(account)?.attributeNames ?? NO_NAMES
  }

  /** The delivery faces (webhook-shaped) of every destination. */
  allWebhooks (): CompiledWebhook[] {
    return [...this.rows.all()].map(destination => destination.webhook)
  }

  webhooksOf (account: string): CompiledWebhook[] {
    return [...this.rows.of(account)?.values() ?? []].map(destination => destination.webhook)
  }

  /** The delivery face of `~<id>`. */
  webhook (account: string, key: string): CompiledWebhook {
    return this.destination(account, key.slice(DESTINATION_KEY_PREFIX.length)).webhook
  }

  destination (account: string, id: string): CompiledDestination {
    this.accounts.get(account)
    return this.rows.get(account, id)
  }

  list (account: string, page: PageRequest): Page<CompiledDestination> {
    this.accounts.get(account)
    return this.rows.list(account, page, (_id, destination) => destination)
  }

  /** Validate, compile and save (a PUT, or with `patch` a PATCH onto the saved one). */
  async put (account: string, id: string, body: unknown, patch = false): Promise<CompiledDestination> {
    if (this.writer !== null) {
      let compiled: CompiledDestination | undefined
      await this.writer.change(account, () => {
        compiled = this.prepare(account, id, body, patch)
        this.rows.checkLimit(account, id)
        return [{ row: this.rows.row(account, id), value: mapCredentials(compiled.config, secret => this.store.secrets.seal(secret)) }]
      })
      return compiled!
    }
    const compiled = this.prepare(account, id, body, patch)
    await this.rows.reserve(account, id, async () => {
      await this.rows.save(account, id, mapCredentials(compiled.config, secret => this.store.secrets.seal(secret)))
      this.rows.set(account, id, compiled)
    })
    this.reindex(account)
    this.tell(account, id, compiled)
    return compiled
  }

  async delete (account: string, id: string): Promise<void> {
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        this.destination(account, id)
        return [{ row: this.rows.row(account, id), value: null }]
      })
      return
    }
    this.destination(account, id)
    await this.rows.remove(account, id)
    this.rows.delete(account, id)
    this.reindex(account)
    this.tell(account, id, null)
  }

  private prepare (account: string, id: string, body: unknown, patch: boolean): CompiledDestination {
    this.accounts.get(account)
    const previous = this.rows.find(account, id)
    if (patch && previous === undefined) this.rows.get(account, id) // 404
    const config = validateDestination(body, previous?.config ?? null, { allowPrivate: this.allowPrivate }, patch)
    return compileDestination(id, account, config, this.deps)
  }

  private compile (account: string, id: string, value: unknown): CompiledDestination {
    const config = mapCredentials(value as DestinationConfig, secret => this.store.secrets.open(secret))
    return compileDestination(id, account, config, this.deps)
  }

  private tell (account: string, id: string, destination: CompiledDestination | null): void {
    for (const changed of this.changed.list) changed(account, destinationKey(id), destination === null ? null : destination.webhook)
  }

  private reindex (account: string): void {
    const index: DestinationIndex = { wantedEvents: new Set(), wantedChanges: new Set(), attributeNames: new Set() }
    for (const destination of this.rows.of(account)?.values() ?? []) {
      if (!destination.config.enabled) continue
      for (const event of destination.config.events) index.wantedEvents.add(event)
      for (const segment of destination.config.audiences) {
        index.wantedChanges.add('enter ' + segment)
        index.wantedChanges.add('exit ' + segment)
        index.wantedChanges.add('erase ' + segment)
      }
      const shared = destination.shared
      index.attributeNames.add(shared.emailAttribute)
      index.attributeNames.add(shared.phoneAttribute)
      // Always: the account's requireConsent may be turned on at any time, and rows carry what it needs then.
      index.attributeNames.add(shared.consentAttribute)
    }
    this.indexes.set(account, index)
  }
}
