// What the schedules read and write of saved reports with a delivery (src/delivery/scheduled-reports.ts):
// the catalog's reports and their runs, and each one's result as GET …/result computes it.

import type { ReportRun, ScheduledReport, ScheduledReports } from '../delivery/scheduled-reports.js'
import type { SavedResults } from '../reports/saved-results.js'
import type { SavedReportCatalog } from './saved-reports.js'

export class ReportDeliveries implements ScheduledReports {
  private readonly catalog: SavedReportCatalog
  private readonly results: SavedResults

  constructor (catalog: SavedReportCatalog, results: SavedResults) {
    this.catalog = catalog
    this.results = results
  }

  scheduled (): Iterable<ScheduledReport> { return this.catalog.scheduled() }

  resultJson (account: string, id: string): string | null {
    const report = this.catalog.find(account, id)
    if (report === undefined || !this.results.ready) return null
    return JSON.stringify(this.results.of(account, report))
  }

  ran (account: string, id: string, run: ReportRun): Promise<void> { return this.catalog.ran(account, id, run) }
}
