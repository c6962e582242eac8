// The shape every per-account configuration kind is built on: its items by account and name, held in
// memory (the hot path reads maps, never the disk) and written through to the store's config db under
// [account, kind, name]. It knows keys, limits, paging and "not found"; the kind's catalog adds what
// it compiles and when it writes.

import { ApiError, type ErrorCode } from '../errors.js'
import type { Store } from '../store/store.js'
import { pageOf, type Page } from '../store/paging.js'
import type { ConfigKey, ConfigRow } from '../store/config-writer.js'
import { Reservations } from './reservations.js'

/** Which page of a listing: items whose key sorts after `cursor` ('' = the first page), at most `limit`. */
export interface PageRequest {
  cursor: string
  limit: number
}

export type { ConfigKey } from '../store/config-writer.js'

/** What a catalog of one configuration kind does at start and when an account goes (catalogs.ts calls these). */
export interface ConfigCatalog {
  /** The config row kinds it keeps (the key's second part). */
  readonly rowKinds: readonly string[]
  /** Take one stored row of a known account, at start (in key order). */
  load (key: ConfigKey, value: unknown): void
  /** Every row is loaded. */
  loaded (): void
  /** Drop everything of an account being deleted (its rows go with the account's background removal). */
  forget (account: string): void
  /**
   * Cluster mode: a row of a known account changed in the replicated configuration (value null: deleted);
   * update memory and tell the same listeners as a write through this node does (replicated-config.ts).
   */
  apply (key: ConfigKey, value: unknown): void
}

export interface ConfigRowsOptions {
  store: Store
  /** The key's second part: 'campaign', 'segment', … */
  kind: string
  /** How many one account may hold, and the refusal past it (%d: the limit). */
  max: number
  limitMessage: string
  /** The error of a name the account does not have. */
  notFound: ErrorCode
}

export class ConfigRows<V> {
  readonly kind: string
  private readonly store: Store
  private readonly max: number
  private readonly limitMessage: string
  private readonly notFound: ErrorCode
  private readonly byAccount = new Map<string, Map<string, V>>()
  private readonly reservations = new Reservations()

  constructor ({ store, kind, max, limitMessage, notFound }: ConfigRowsOptions) {
    this.store = store
    this.kind = kind
    this.max = max
    this.limitMessage = limitMessage
    this.notFound = notFound
  }

  /** The row's key in the config db. */
  key (account: string, name: string): string[] { return [account, this.kind, name] }

  /** The row, as a replicated change names it (cluster mode). */
  row (account: string, name: string): ConfigRow { return { db: 'config', key: [account, this.kind, name] } }

  /**
   * Refuse a new name past the kind's limit (cluster mode: called under the account's cluster-wide
   * lock, with every earlier change applied, so the count is the cluster's).
   */
  checkLimit (account: string, name: string): void {
    const items = this.byAccount.get(account)
    if (items === undefined || items.has(name) || items.size < this.max) return
    throw new ApiError('conflict', this.limitMessage.replace('%d', this.max.toLocaleString('en-US')))
  }

  /** The account's items by name (undefined: none ever set). */
  of (account: string): ReadonlyMap<string, V> | undefined { return this.byAccount.get(account) }

  find (account: string, name: string): V | undefined { return this.byAccount.get(account)?.get(name) }

  has (account: string, name: string): boolean { return this.byAccount.get(account)?.has(name) === true }

  /** The item, or the kind's not-found error (the caller has checked the account). */
  get (account: string, name: string): V {
    const found = this.find(account, name)
    if (found === undefined) throw new ApiError(this.notFound)
    return found
  }

  list<T> (account: string, page: PageRequest, view: (name: string, value: V) => T): Page<T> {
    return pageOf(this.byAccount.get(account) ?? [], page.cursor, page.limit, view)
  }

  * all (): IterableIterator<V> {
    for (const items of this.byAccount.values()) yield * items.values()
  }

  set (account: string, name: string, value: V): void { this.itemsOf(account).set(name, value) }

  delete (account: string, name: string): void { this.byAccount.get(account)?.delete(name) }

  forget (account: string): void { this.byAccount.delete(account) }

  /**
   * Create-or-replace `name` under the kind's limit: `write` saves it and then `set`s it; a new name
   * holds its slot until then, so concurrent creations cannot pass the limit.
   */
  reserve (account: string, name: string, write: () => Promise<void>): Promise<void> {
    const items = this.itemsOf(account)
    return this.reservations.reserve(account + ' ' + this.kind, name, items.has(name), items.size, this.max, this.limitMessage, write)
  }

  /** Save the stored form of an item and wait for it per the durability setting. */
  save (account: string, name: string, stored: unknown): Promise<void> {
    return this.store.save(this.store.config, this.key(account, name), stored)
  }

  /** Remove the item's row and wait for it per the durability setting. */
  remove (account: string, name: string): Promise<void> {
    return this.store.durable(this.store.config.remove(this.key(account, name)))
  }

  private itemsOf (account: string): Map<string, V> {
    let items = this.byAccount.get(account)
    if (items === undefined) this.byAccount.set(account, items = new Map())
    return items
  }
}
