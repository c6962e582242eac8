// What the schedules (schedules.ts) read of saved reports with a delivery (docs/reports.md, "Delivery
// to a webhook"): declared here, in the delivery layer, and implemented above it
// (src/catalog/report-deliveries.ts), as the webhook lookup is. A server that keeps no event log has no
// saved reports: its schedules get NO_REPORTS.

import type { Schedule } from '../webhooks/schedule.js'

/** How a report's latest run ended, shown on the report as `lastDelivery`. */
export interface LastDelivery {
  /** The run's time (ISO 8601). */
  at: string
  /** queued: the result went into the webhook's delivery queue (its attempts are the webhook's deliveries); failed: it could not. */
  status: 'queued' | 'failed'
  /** queued: the delivery's id (the webhook-id header the receiver gets). */
  deliveryId?: string
  /** failed: why (the webhook was deleted or disabled since the report was saved). */
  error?: string
}

/** What is kept of a report's runs: the time of the latest (a restart goes on from it) and how it ended. */
export interface ReportRun {
  lastRunMs: number
  lastDelivery: LastDelivery
}

export interface ScheduledReport {
  account: string
  id: string
  webhookId: string
  schedule: Schedule
  /** The latest run made, or null before the first. */
  lastRunMs: number | null
  /** When the report was last saved: its first run is the first due time after it. */
  savedMs: number
}

export interface ScheduledReports {
  /** Every saved report with a delivery. */
  scheduled (): Iterable<ScheduledReport>
  /** The report's result now, as JSON text (GET …/result's body), or null when it cannot be computed yet (the log is loading). */
  resultJson (account: string, id: string): string | null
  /**
   * Keep the run: its write is issued before this returns (so it commits in the transaction of the
   * delivery record written in the same turn) and the promise resolves once it is durable.
   */
  ran (account: string, id: string, run: ReportRun): Promise<void>
}

/** Cluster mode, or no retained event log: no saved report has a delivery. */
export const NO_REPORTS: ScheduledReports = {
  scheduled: () => [],
  resultJson: () => null,
  ran: async () => {},
}
