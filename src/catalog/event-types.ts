// Event types: the built-in ones and each account's own, with the fields each requires. The public
// API checks every event against them.

import { ApiError } from '../errors.js'
import type { Store } from '../store/store.js'
import { EVENT_TYPES_MAX } from '../store/limits.js'
import type { Page } from '../store/paging.js'
import type { AccountCatalog } from './accounts.js'
import { ConfigRows, type ConfigCatalog, type ConfigKey, type PageRequest } from './config-rows.js'
import type { ConfigWriter } from '../store/config-writer.js'

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
  // The browser SDK's consent call: its purposes become the visitor's `consent` attribute (destinations read it).
  ['consent', { name: 'consent', required: ['purposes'] }],
])

export class EventTypeCatalog implements ConfigCatalog {
  readonly rowKinds = ['event-type']
  private readonly accounts: AccountCatalog
  private readonly rows: ConfigRows<EventType>
  /** Cluster mode: changes go through the replicated configuration (Catalogs.replicate); null: embedded. */
  writer: ConfigWriter | null = null

  constructor (store: Store, accounts: AccountCatalog) {
    this.accounts = accounts
    this.rows = new ConfigRows({
      store, kind: 'event-type', max: EVENT_TYPES_MAX, limitMessage: 'An account has at most %d custom event types; delete some first.', notFound: 'event_type_not_found',
    })
  }

  load ([account]: ConfigKey, value: unknown): void { this.rows.set(account, (value as EventType).name, value as EventType) }
  loaded (): void {}
  forget (account: string): void { this.rows.forget(account) }

  apply ([account, , name]: ConfigKey, value: unknown): void {
    if (value === null) this.rows.delete(account, name!)
    else this.rows.set(account, name!, value as EventType)
  }

  get (account: string, name: string): EventType | undefined {
    return BUILT_IN_EVENTS.get(name) ?? this.rows.find(account, name)
  }

  /** Built-in event types on the first page, then the account's in name order. */
  list (account: string, page: PageRequest): Page<EventType> {
    this.accounts.get(account)
    const custom = this.rows.list(account, page, valueOf)
    return page.cursor === '' ? { items: [...BUILT_IN_EVENTS.values(), ...custom.items], next: custom.next } : custom
  }

  async put (account: string, type: EventType): Promise<EventType> {
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        this.accounts.get(account)
        if (BUILT_IN_EVENTS.has(type.name)) throw new ApiError('conflict', `"${type.name}" is a built-in event type and cannot be changed.`, '/name')
        this.rows.checkLimit(account, type.name)
        return [{ row: this.rows.row(account, type.name), value: type }]
      })
      return type
    }
    this.accounts.get(account)
    if (BUILT_IN_EVENTS.has(type.name)) throw new ApiError('conflict', `"${type.name}" is a built-in event type and cannot be changed.`, '/name')
    await this.rows.reserve(account, type.name, async () => {
      await this.rows.save(account, type.name, type)
      this.rows.set(account, type.name, type)
    })
    return type
  }

  async delete (account: string, name: string): Promise<void> {
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        this.accounts.get(account)
        if (BUILT_IN_EVENTS.has(name)) throw new ApiError('conflict', `"${name}" is a built-in event type and cannot be deleted.`)
        this.rows.get(account, name)
        return [{ row: this.rows.row(account, name), value: null }]
      })
      return
    }
    this.accounts.get(account)
    if (BUILT_IN_EVENTS.has(name)) throw new ApiError('conflict', `"${name}" is a built-in event type and cannot be deleted.`)
    this.rows.get(account, name)
    await this.rows.remove(account, name)
    this.rows.delete(account, name)
  }
}

function valueOf<V> (_key: string, value: V): V { return value }
