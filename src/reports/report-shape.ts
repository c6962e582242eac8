// The reports endpoint's answer (GET /admin/accounts/:id/reports), shared by the server that builds it
// and the panel that draws it. Types only: the panel's bundle takes nothing else from the server.

export const GRANULARITIES = ['hour', 'day'] as const
export type Granularity = typeof GRANULARITIES[number]

export interface ReportRow {
  t: string
  events: Record<string, number>
  visitors: number
  campaigns: Record<string, { impressions: number, views: number, clicks: number }>
  segments: Record<string, { enter: number, exit: number }>
  deliveries: { delivered: number, failed: number, dead: number, p50Ms: number | null, p95Ms: number | null, p99Ms: number | null }
}

/** `lagMs`: how late the numbers may be (counted in memory per node, folded into the store this often). */
export interface Report { granularity: Granularity, from: string, to: string, lagMs: number, rows: ReportRow[] }
