// Each account's saved reports (docs/reports.md): configuration rows under [account, 'saved-report', id],
// held in memory like every other kind (config-rows.ts); in cluster mode written through the replicated
// configuration, as every other kind, so every node holds them.
// A report with a delivery also has its schedule compiled here (a cron pattern, as a schedule webhook's)
// and its runs' row under [account, 'report-run', id] (the latest run's time and how it ended, shown as
// `lastDelivery`), written by the schedules (src/delivery/schedules.ts) through ReportDeliveries: in
// cluster mode by the one node that claimed the run, replicated.

import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'
import type { ConfigWriter } from '../store/config-writer.js'
import type { Page } from '../store/paging.js'
import type { AccountCatalog } from './accounts.js'
import { ConfigRows, type ConfigCatalog, type ConfigKey, type PageRequest } from './config-rows.js'
import { deliveryCron, SAVED_REPORTS_MAX, type SavedReport, type SavedReportDefinition } from '../reports/saved-definition.js'
import type { LastDelivery, ReportRun, ScheduledReport } from '../delivery/scheduled-reports.js'
import { parseCron } from '../webhooks/schedule.js'

/** A saved report as answered: with how its latest delivery run ended, when it has had one. */
export type SavedReportAnswer = SavedReport & { lastDelivery?: LastDelivery }

export class SavedReportCatalog implements ConfigCatalog {
  readonly rowKinds = ['saved-report', 'report-run']
  private readonly accounts: AccountCatalog
  private readonly clock: Clock
  private readonly rows: ConfigRows<SavedReport>
  private readonly runs: ConfigRows<ReportRun>
  /** The reports with a delivery, by account and id, their schedule compiled. */
  private readonly deliveries = new Map<string, ScheduledReport>()
  /** Cluster mode: the replicated configuration every change goes through (Catalogs.replicate). */
  writer: ConfigWriter | null = null

  constructor (store: Store, accounts: AccountCatalog, clock: Clock) {
    this.accounts = accounts
    this.clock = clock
    this.rows = new ConfigRows({
      store, kind: 'saved-report', max: SAVED_REPORTS_MAX, limitMessage: 'An account has at most %d saved reports; delete some first.', notFound: 'saved_report_not_found',
    })
    this.runs = new ConfigRows({ store, kind: 'report-run', max: SAVED_REPORTS_MAX, limitMessage: '', notFound: 'saved_report_not_found' })
  }

  load (key: ConfigKey, value: unknown): void { this.apply(key, value) }
  loaded (): void {}
  forget (account: string): void {
    this.rows.forget(account)
    this.runs.forget(account)
    for (const [key, report] of this.deliveries) if (report.account === account) this.deliveries.delete(key)
    this.accountForgotten?.(account)
  }

  /** Told when an account is deleted (the wiring drops its report columns). */
  accountForgotten: ((account: string) => void) | null = null
  apply ([account, kind, id]: ConfigKey, value: unknown): void {
    if (kind === 'report-run') {
      if (value === null) this.runs.delete(account, id!)
      else this.runs.set(account, id!, value as ReportRun)
    } else if (value === null) {
      this.unset(account, id!)
    } else {
      this.set(account, value as SavedReport)
    }
  }

  list (account: string, page: PageRequest): Page<SavedReportAnswer> {
    this.accounts.get(account)
    return this.rows.list(account, page, (id, report) => this.answer(account, id, report))
  }

  get (account: string, id: string): SavedReportAnswer {
    this.accounts.get(account)
    return this.answer(account, id, this.rows.get(account, id))
  }

  /** The account's report, or undefined (a report deleted since the schedules listed it). */
  find (account: string, id: string): SavedReport | undefined { return this.rows.find(account, id) }

  /** Every report with a delivery. */
  scheduled (): Iterable<ScheduledReport> {
    const reports: ScheduledReport[] = []
    for (const report of this.deliveries.values()) reports.push({ ...report, lastRunMs: this.runs.find(report.account, report.id)?.lastRunMs ?? null })
    return reports
  }

  /**
   * Keep a run of a report still saved (embedded: the write issued before this returns, so schedules.ts
   * writes the run's delivery in the same turn; cluster mode: a replicated change, after the delivery).
   */
  ran (account: string, id: string, run: ReportRun): Promise<void> {
    if (!this.rows.has(account, id)) return Promise.resolve()
    if (this.writer !== null) return this.writer.change(account, () => this.rows.has(account, id) ? [{ row: this.runs.row(account, id), value: run }] : [])
    return this.runs.save(account, id, run).then(() => { this.runs.set(account, id, run) })
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
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        this.get(account, id)
        return [{ row: this.rows.row(account, id), value: null }, { row: this.runs.row(account, id), value: null }]
      })
      return
    }
    await Promise.all([this.rows.remove(account, id), this.runs.remove(account, id)])
    this.unset(account, id)
  }

  private async write (account: string, report: SavedReport): Promise<void> {
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        this.accounts.get(account)
        this.rows.checkLimit(account, report.id)
        return [{ row: this.rows.row(account, report.id), value: report }]
      })
      return
    }
    await this.rows.reserve(account, report.id, async () => {
      await this.rows.save(account, report.id, report)
      this.set(account, report)
    })
  }

  private set (account: string, report: SavedReport): void {
    this.rows.set(account, report.id, report)
    const key = `${account}\n${report.id}`
    if (report.delivery === undefined) {
      this.deliveries.delete(key)
      return
    }
    // The pattern is made from a validated delivery: it always parses.
    const pattern = deliveryCron(report.delivery)
    const cron = parseCron(pattern)
    if (typeof cron === 'string') throw new Error(cron)
    this.deliveries.set(key, { account, id: report.id, webhookId: report.delivery.webhook, schedule: { kind: 'cron', cron, source: pattern }, lastRunMs: null, savedMs: Date.parse(report.updatedAt) })
  }

  private unset (account: string, id: string): void {
    this.rows.delete(account, id)
    this.runs.delete(account, id)
    this.deliveries.delete(`${account}\n${id}`)
  }

  private answer (account: string, id: string, report: SavedReport): SavedReportAnswer {
    const run = this.runs.find(account, id)
    return run === undefined ? report : { ...report, lastDelivery: run.lastDelivery }
  }
}
