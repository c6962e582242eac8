// Requests waiting for the first attempt of their sync deliveries: how a request makes its sync
// webhook calls while it is handled. A failed or slow call does not fail the request; the delivery
// goes on as an async retry.

import type { WebhookLookup } from '../webhooks/lookup.js'
import type { Store } from '../store/store.js'
import type { HubWrites } from './hub-writes.js'
import type { DeliveryRecord } from './record.js'
import { recordsOf } from './records-db.js'
import type { RelayListener } from './relay.js'

interface SyncWait {
  account: string
  fromSeq: number
  toSeq: number
  /** Sync delivery ids of the range whose first attempt has not ended yet. */
  pending: Set<string>
  resolve: () => void
}

/** What a wait needs of the relay: how far it went, and to go on at once. */
export interface RelayProgress {
  readonly relayedThrough: number
  relaySoon (): void
}

export interface SyncWaitsOptions {
  store: Store
  registry: WebhookLookup
  writes: HubWrites
  onFailure: (error: unknown) => void
}

export class SyncWaits implements RelayListener {
  private readonly store: Store
  private readonly registry: WebhookLookup
  private readonly writes: HubWrites
  private readonly onFailure: (error: unknown) => void
  private readonly waits = new Set<SyncWait>()

  constructor ({ store, registry, writes, onFailure }: SyncWaitsOptions) {
    this.store = store
    this.registry = registry
    this.writes = writes
    this.onFailure = onFailure
  }

  get waiting (): boolean {
    return this.waits.size > 0
  }

  /**
   * Wait (at most timeoutMs) until the sync deliveries of the account's outbox rows in (fromSeq, toSeq]
   * had their first attempt.
   */
  wait (account: string, fromSeq: number, toSeq: number, timeoutMs: number, relay: RelayProgress): Promise<void> {
    if (toSeq <= fromSeq) return Promise.resolve()
    return new Promise(resolve => {
      let done = false
      const wait: SyncWait = { account, fromSeq, toSeq, pending: new Set(), resolve: () => {} }
      const timer = setTimeout(() => wait.resolve(), timeoutMs)
      wait.resolve = () => {
        done = true
        clearTimeout(timer)
        this.waits.delete(wait)
        resolve()
      }
      // The relay may have passed these rows already: their records not yet attempted count too,
      // read once the outcomes written so far are committed (those still waiting are settling).
      this.writes.committed().then(() => {
        if (done) return
        const settling = this.writes.settlingIds()
        for (const webhook of this.registry.webhooksOf(account)) {
          if (webhook.mode !== 'sync') continue
          for (const record of recordsOf(this.store, account, webhook.id, fromSeq + 1, toSeq + 1)) {
            if (record.status === 'pending' && !settling.has(record.id)) wait.pending.add(record.id)
          }
        }
        this.waits.add(wait)
        if (relay.relayedThrough >= toSeq && wait.pending.size === 0) wait.resolve()
        else relay.relaySoon()
      }, (error: unknown) => {
        this.onFailure(error)
        wait.resolve()
      })
    })
  }

  relayed (created: readonly DeliveryRecord[], through: number): void {
    for (const wait of this.waits) {
      for (const record of created) {
        if (record.account === wait.account && record.seq > wait.fromSeq && record.seq <= wait.toSeq && this.isSync(record)) wait.pending.add(record.id)
      }
      if (through >= wait.toSeq && wait.pending.size === 0) wait.resolve()
    }
  }

  /** The first attempt of a record ended (or a later one: then it is not waited for). */
  attempted (id: string, relayedThrough: number): void {
    for (const wait of this.waits) {
      if (wait.pending.delete(id) && wait.pending.size === 0 && relayedThrough >= wait.toSeq) wait.resolve()
    }
  }

  private isSync (record: DeliveryRecord): boolean {
    for (const webhook of this.registry.webhooksOf(record.account)) if (webhook.id === record.webhookId) return webhook.mode === 'sync'
    return false
  }
}
