// Reports (viewer and up): per hour or day over a range, as JSON or CSV. The numbers are what the
// nodes folded into the store, so they may be up to `lagMs` late.

import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Registry } from '../store/registry.js'
import type { Store } from '../store/store.js'
import { GRANULARITIES, RANGE_DAYS_MAX, readReport, reportCsv, type Granularity } from '../reports/report.js'
import { DAY_MS } from '../reports/counters.js'
import { accountParam } from './access.js'
import type { Route } from './server.js'

export function reportRoutes ({ registry, store, clock, foldMs }: { registry: Registry, store: Store, clock: Clock, foldMs: number }): Route[] {
  return [{
    method: 'get', pattern: '/admin/accounts/:account/reports', body: false, role: 'viewer',
    handler (request) {
      const account = accountParam(request, registry)
      const query = new URLSearchParams(request.query)
      const granularity = (query.get('granularity') ?? 'day') as Granularity
      if (!GRANULARITIES.includes(granularity)) throw new ApiError('invalid_field', 'granularity must be hour or day.', '/granularity')
      const toMs = time(query.get('to'), clock.nowMs(), 'to')
      const fromMs = time(query.get('from'), toMs - (granularity === 'hour' ? DAY_MS : 30 * DAY_MS), 'from')
      if (fromMs >= toMs) throw new ApiError('invalid_field', 'from must be before to.', '/from')
      if (toMs - fromMs > RANGE_DAYS_MAX[granularity] * DAY_MS) {
        throw new ApiError('invalid_field', `A ${granularity} report covers at most ${RANGE_DAYS_MAX[granularity]} days.`, '/to')
      }
      const format = query.get('format') ?? 'json'
      if (format !== 'json' && format !== 'csv') throw new ApiError('invalid_field', 'format must be json or csv.', '/format')
      const rows = readReport(store, account, fromMs, toMs, granularity)
      if (format === 'csv') {
        return {
          status: 200, body: reportCsv(rows), contentType: 'text/csv; charset=utf-8',
          headers: { 'Content-Disposition': `attachment; filename="beacon-report-${granularity}.csv"` },
        }
      }
      return { status: 200, body: { granularity, from: new Date(fromMs).toISOString(), to: new Date(toMs).toISOString(), lagMs: foldMs, rows } }
    },
  }]
}

function time (raw: string | null, fallback: number, name: string): number {
  if (raw === null || raw === '') return fallback
  const ms = Date.parse(raw)
  if (Number.isNaN(ms) || !/^\d{4}-\d{2}-\d{2}/.test(raw)) throw new ApiError('invalid_field', `${name} must be an ISO-8601 time.`, `/${name}`)
  return ms
}
