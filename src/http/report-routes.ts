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
import { DAY_MS, type ReportCounters, type StoredBucket } from '../reports/counters.js'
import { bucketStart, localBuckets } from '../reports/report.js'
import { experimentResults, type ExperimentDesign } from '../reports/experiment-results.js'
import { HOLDOUT_GOALS, HOLDOUT_KEY } from '../../actors/experiments.js'
import { accountParam } from './access.js'
import { json, type RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'

/** Reports across the nodes of a cluster. */
export interface ClusterReportRows {
  rows: (account: string, fromMs: number, toMs: number, granularity: Granularity) => Promise<ReportRow[]>
  buckets: (account: string, fromMs: number, toMs: number, granularity: Granularity) => Promise<Map<number, StoredBucket>>
}

export interface ReportDeps {
  catalogs: Catalogs
  store: Store
  clock: Clock
  foldMs: number
  /** Cluster mode: every live node's counts (src/reports/cluster-reports.ts); null or absent: this node's store. */
  clusterReports?: ClusterReportRows | null
  /** This node's counters: embedded mode's results read what is not folded yet too. */
  counters: Pick<ReportCounters, 'settled' | 'pending'>
}

export function reportRoutes ({ catalogs, store, clock, foldMs, clusterReports = null, counters }: ReportDeps): RouteDefinition[] {
  const dayBuckets = (account: string, fromMs: number, toMs: number): Promise<Map<number, StoredBucket>> =>
    clusterReports === null ? localBuckets(counters, store, account, fromMs, toMs, 'day') : clusterReports.buckets(account, fromMs, toMs, 'day')

  async function results (account: string, id: string, query: URLSearchParams): Promise<Record<string, unknown>> {
    const def = catalogs.campaigns.get(account, id)
    if (def.variants === undefined || def.revision === undefined) throw new ApiError('invalid_field', 'The campaign runs no experiment: give it variants first (docs/experiments.md).', '/variants')
    const nowMs = clock.nowMs()
    const raw = query.get('revision')
    const revision = raw === null || raw === '' ? def.revision : Number(raw)
    if (!Number.isInteger(revision) || revision < 1 || revision > def.revision) throw new ApiError('invalid_field', `revision must be a whole number from 1 to ${def.revision}.`, '/revision')
    const current = revision === def.revision
    const sinceMs = current && def.revisionSince !== undefined ? Date.parse(def.revisionSince) : nowMs - RANGE_MAX_DAYS.day * DAY_MS
    const fromMs = Math.max(bucketStart(sinceMs, 'day'), bucketStart(nowMs, 'day') - (RANGE_MAX_DAYS.day - 1) * DAY_MS)
    const buckets = await dayBuckets(account, fromMs, nowMs + 1)
    const compiled = catalogs.campaigns.compiledSet(account)?.experiment(id)
    const design: ExperimentDesign = current
      ? {
          campaignId: id, revision, goals: def.goals ?? [], adaptive: def.allocation === 'bandit',
          variants: def.variants.map(v => ({ id: v.id, control: v.control === true })),
          weights: compiled?.revision === revision ? compiled.weights : def.variants.map(v => v.weight / def.variants!.reduce((sum, w) => sum + w.weight, 0)),
        }
      : { campaignId: id, revision, goals: def.goals ?? [], variants: variantsSeen(buckets, id, revision, def.variants), weights: null }
    const holdout = holdoutDesign(account)
    return {
      ...experimentResults(design, buckets, nowMs),
      revisionSince: current ? def.revisionSince ?? null : null,
      revisions: Array.from({ length: def.revision }, (_, i) => i + 1),
      allocation: def.allocation ?? 'fixed',
      holdout: holdout === null ? null : experimentResults(holdout, buckets, nowMs),
    }
  }

  function holdoutDesign (account: string): ExperimentDesign | null {
    const rule = catalogs.accounts.holdoutOf(account)
    if (rule === null) return null
    const share = rule.percent / 100
    return {
      campaignId: HOLDOUT_KEY, revision: 1, goals: HOLDOUT_GOALS,
      variants: [{ id: 'holdout', control: true }, { id: 'personalized', control: false }],
      weights: [share, 1 - share],
    }
  }

  return [{
    method: 'get', pattern: '/admin/accounts/:account/campaigns/:id/results', body: false, role: 'viewer',
    doc: {
      summary: 'An experiment\'s results',
      description: 'Per variant: visitors exposed and each goal\'s total and rate or mean; against the control (or the first variant): absolute and relative lift with 95 % intervals, ' +
        'the fixed-horizon and the always-valid sequential p-value, CUPED-adjusted lift; a sample-ratio check; the daily lift of the primary goal; the account\'s holdout comparison. ' +
        'Exact: every live node\'s counts, folded or not. docs/experiments.md explains each number.',
      tag: 'Campaigns',
      query: [{ name: 'revision', description: 'An earlier revision of the experiment (default: the current one).', schema: Type.String() }],
      ok: json(200, 'The results.', R.ExperimentResults), errors: ['account_not_found', 'campaign_not_found', 'invalid_field', 'unavailable'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      return { status: 200, body: await results(account, request.params[1] ?? '', new URLSearchParams(request.query)) }
    },
  }, {
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

/** An earlier revision's variants: those its buckets counted, in the order of today's definition, then by id. */
function variantsSeen (buckets: ReadonlyMap<number, StoredBucket>, id: string, revision: number, current: ReadonlyArray<{ id: string, control?: boolean }>): Array<{ id: string, control: boolean }> {
  const prefix = `${id}\u0000${revision}\u0000`
  const seen = new Set<string>()
  for (const bucket of buckets.values()) {
    for (const [key] of bucket.experiments ?? []) if (key.startsWith(prefix)) seen.add(key.slice(prefix.length))
  }
  const order = (v: string): number => { const i = current.findIndex(c => c.id === v); return i === -1 ? current.length : i }
  return [...seen].sort((a, b) => order(a) - order(b) || (a < b ? -1 : 1)).map(v => ({ id: v, control: current.find(c => c.id === v)?.control === true }))
}
