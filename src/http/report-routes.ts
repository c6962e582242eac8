// Reports (viewer and up): per hour or day over a range, as JSON or CSV. Embedded mode: the numbers
// are what was folded into the store, so they may be up to `lagMs` late. Cluster mode: every live
// node's counts, folded or not (src/reports/cluster-reports.ts): `lagMs` 0.

import Type from 'typebox'
import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Catalogs } from '../catalog/catalogs.js'
import type { Store } from '../store/store.js'
import { RANGE_MAX_DAYS, readReport, reportCsv } from '../reports/report.js'
import { GRANULARITIES, type Granularity, type ReportRow } from '../reports/report-shape.js'
import { DAY_MS } from '../reports/counters.js'
import { accountParam } from './access.js'
import { json, type RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'

/** Reports across the nodes of a cluster. */
export interface ClusterReportRows {
  rows: (account: string, fromMs: number, toMs: number, granularity: Granularity) => Promise<ReportRow[]>
}

export interface ReportDeps {
  catalogs: Catalogs
  store: Store
  clock: Clock
  foldMs: number
  /** Cluster mode: every live node's counts (src/reports/cluster-reports.ts); null or absent: this node's store. */
  clusterReports?: ClusterReportRows | null
}

export function reportRoutes ({ catalogs, store, clock, foldMs, clusterReports = null }: ReportDeps): RouteDefinition[] {
  return [{
    method: 'get', pattern: '/admin/accounts/:account/reports', body: false, role: 'viewer',
    doc: {
      summary: 'Report per hour or day',
      description: `One row per bucket of [from, to), empty ones included; hour ranges up to ${RANGE_MAX_DAYS.hour} days, day ranges up to ${RANGE_MAX_DAYS.day}. ` +
        'Buckets are UTC and by arrival time. Impressions: campaigns /campaigns/query answered; views and clicks: events of the kinds campaignView and campaignClick with their campaignId. ' +
        '`format=csv` answers text/csv in long format: `t,kind,key,value`. ' +
        'In cluster mode the counts of every live node, folded or not (`lagMs` 0), merged (unique visitors by their sketches); a node that does not answer within 5 s makes it a 503 `unavailable` (Retry-After: 1).',
      tag: 'Reports',
      query: [
        { name: 'from', description: 'ISO-8601 start (default: to minus one day for hour, 30 days for day).', schema: Type.String() },
        { name: 'to', description: 'ISO-8601 end, exclusive (default: now).', schema: Type.String() },
        { name: 'granularity', description: 'hour or day (default day).', schema: Type.Union([Type.Literal('hour'), Type.Literal('day')]) },
        { name: 'format', description: 'json (default) or csv.', schema: Type.Union([Type.Literal('json'), Type.Literal('csv')]) },
      ],
      ok: json(200, 'The rows (or CSV with format=csv).', R.Report), errors: ['account_not_found', 'invalid_field', 'unavailable'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      const query = new URLSearchParams(request.query)
      const granularity = (query.get('granularity') ?? 'day') as Granularity
      if (!GRANULARITIES.includes(granularity)) throw new ApiError('invalid_field', 'granularity must be hour or day.', '/granularity')
      const toMs = time(query.get('to'), clock.nowMs(), 'to')
      const fromMs = time(query.get('from'), toMs - (granularity === 'hour' ? DAY_MS : 30 * DAY_MS), 'from')
      if (fromMs >= toMs) throw new ApiError('invalid_field', 'from must be before to.', '/from')
      if (toMs - fromMs > RANGE_MAX_DAYS[granularity] * DAY_MS) {
        throw new ApiError('invalid_field', `A ${granularity} report covers at most ${RANGE_MAX_DAYS[granularity]} days.`, '/to')
      }
      const format = query.get('format') ?? 'json'
      if (format !== 'json' && format !== 'csv') throw new ApiError('invalid_field', 'format must be json or csv.', '/format')
      const rows = clusterReports === null ? readReport(store, account, fromMs, toMs, granularity) : await clusterReports.rows(account, fromMs, toMs, granularity)
      if (format === 'csv') {
        return {
          status: 200, body: reportCsv(rows), contentType: 'text/csv; charset=utf-8',
          headers: { 'Content-Disposition': `attachment; filename="beacon-report-${granularity}.csv"` },
        }
      }
      return { status: 200, body: { granularity, from: new Date(fromMs).toISOString(), to: new Date(toMs).toISOString(), lagMs: clusterReports === null ? foldMs : 0, rows } }
    },
  }]
}

function time (raw: string | null, fallback: number, name: string): number {
  if (raw === null || raw === '') return fallback
  const ms = Date.parse(raw)
  if (Number.isNaN(ms) || !/^\d{4}-\d{2}-\d{2}/.test(raw)) throw new ApiError('invalid_field', `${name} must be an ISO-8601 time.`, `/${name}`)
  return ms
}
