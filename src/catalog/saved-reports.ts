// Each account's saved reports (docs/reports.md): configuration rows under [account, 'saved-report', id],
// held in memory like every other kind (config-rows.ts). Embedded mode only, as the event log they read:
// in cluster mode the routes answer 501 before reaching it, so it never writes through the replicated
// configuration.

import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'
import type { Page } from '../store/paging.js'
import type { AccountCatalog } from './accounts.js'
import { ConfigRows, type ConfigCatalog, type ConfigKey, type PageRequest } from './config-rows.js'
import { SAVED_REPORTS_MAX, type SavedReport, type SavedReportDefinition } from '../reports/saved-definition.js'

export class SavedReportCatalog implements ConfigCatalog {
  readonly rowKinds = ['saved-report']
  private readonly accounts: AccountCatalog
  private readonly clock: Clock
  private readonly rows: ConfigRows<SavedReport>

  constructor (store: Store, accounts: AccountCatalog, clock: Clock) {
    this.accounts = accounts
    this.clock = clock
    this.rows = new ConfigRows({
      store, kind: 'saved-report', max: SAVED_REPORTS_MAX, limitMessage: 'An account has at most %d saved reports; delete some first.', notFound: 'saved_report_not_found',
    })
  }

  load ([account, , id]: ConfigKey, value: unknown): void { this.rows.set(account, id!, value as SavedReport) }
  loaded (): void {}
  forget (account: string): void {
    this.rows.forget(account)
    this.accountForgotten?.(account)
  }

  /** Told when an account is deleted (the wiring drops its report columns). */
  accountForgotten: ((account: string) => void) | null = null
  apply ([account, , id]: ConfigKey, value: unknown): void {
    if (value === null) this.rows.delete(account, id!)
    else this.rows.set(account, id!, value as SavedReport)
  }

  list (account: string, page: PageRequest): Page<SavedReport> {
    this.accounts.get(account)
    return this.rows.list(account, page, (_id, report) => report)
  }

  get (account: string, id: string): SavedReport {
    this.accounts.get(account)
    return this.rows.get(account, id)
  }

  async create (account: string, definition: SavedReportDefinition): Promise<SavedReport> {
    this.accounts.get(account)
    const now = new Date(this.clock.nowMs()).toISOString()
    const report: SavedReport = { id: 'r-' + randomBytes(6).toString('hex'), ...definition, createdAt: now, updatedAt: now }
    await this.write(account, report)
    return report
  }

  async replace (account: string, id: string, definition: SavedReportDefinition): Promise<SavedReport> {
    const before = this.get(account, id)
    const report: SavedReport = { id, ...definition, createdAt: before.createdAt, updatedAt: new Date(this.clock.nowMs()).toISOString() }
    await this.write(account, report)
    return report
  }

  async delete (account: string, id: string): Promise<void> {
    this.get(account, id)
    await this.rows.remove(account, id)
    this.rows.delete(account, id)
  }

  private async write (account: string, report: SavedReport): Promise<void> {
    await this.rows.reserve(account, report.id, async () => {
      await this.rows.save(account, report.id, report)
      this.rows.set(account, report.id, report)
    })
  }
}
