// Saved reports over the admin API (docs/reports.md): create, list, read, replace and delete an
// account's report definitions (viewers read, editors and owners change), compute one's result as JSON
// or CSV, and preview an unsaved definition (what the panel's builder draws before saving). Results are
// computed from the in-memory columns of the retained event log (src/reports/saved-index.ts; in cluster
// mode every node's hold the cluster's stream: saved-stream-feed.ts); without a log
// (BEACON_EVENT_RETENTION_DAYS=0) every route answers 501 event_log_not_kept, as GET …/events does.
// While the columns load after a start, results and previews answer 503 reports_loading with
// Retry-After; definitions can still be changed.
// A report with a `delivery` names one of the account's webhooks: refused (409 report_webhook_unusable)
// unless it exists, is enabled and sends a body; the schedules send its result (src/delivery/schedules.ts).

import Type from 'typebox'
import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Catalogs } from '../catalog/catalogs.js'
import { validator } from '../validator.js'
import { checkDefinition, SavedReportBody, type SavedReport, type SavedReportDefinition } from '../reports/saved-definition.js'
import type { SavedResult } from '../reports/saved-query.js'
import type { SavedResults } from '../reports/saved-results.js'
import { csvField } from '../reports/report.js'
import { pageRequest } from './admin-routes.js'
import { accountParam } from './access.js'
import { json, type RouteDefinition, type RouteDoc } from './route.js'
import type { Handler, Route, RouteRole } from './server.js'

const validateBody = validator(SavedReportBody)

const LastDelivery = Type.Object({
  at: Type.String({ description: 'The run\'s time.' }),
  status: Type.Union([Type.Literal('queued'), Type.Literal('failed')], { description: 'queued: the result is a delivery of the webhook (its attempts are in the webhook\'s deliveries); failed: it could not be sent.' }),
  deliveryId: Type.Optional(Type.String()),
  error: Type.Optional(Type.String()),
}, { description: 'How the latest scheduled delivery run ended.' })
const SavedReportAnswer = Type.Object({
  id: Type.String(), ...SavedReportBody.properties, createdAt: Type.String(), updatedAt: Type.String(), lastDelivery: Type.Optional(LastDelivery),
}, { description: 'A saved report.' })
const SavedReportList = Type.Object({ savedReports: Type.Array(SavedReportAnswer), next: Type.Union([Type.String(), Type.Null()]) })
const ResultRow = Type.Object({
  bucket: Type.String(), group: Type.Union([Type.String(), Type.Null()]), value: Type.Number(),
  started: Type.Optional(Type.Integer()), converted: Type.Optional(Type.Integer()),
})
const SavedResultAnswer = Type.Object({
  id: Type.String(), name: Type.String(), from: Type.String(), to: Type.String(), granularity: Type.String(),
  metric: Type.Object({}, { additionalProperties: true }), breakdown: Type.Union([Type.String(), Type.Null()]),
  rows: Type.Array(ResultRow),
  totals: Type.Array(Type.Object({ group: Type.Union([Type.String(), Type.Null()]), value: Type.Number(), started: Type.Optional(Type.Integer()), converted: Type.Optional(Type.Integer()) })),
  groupsOmitted: Type.Integer(), eventsRead: Type.Integer(),
  groupsOverlap: Type.Boolean({ description: 'True for a breakdown by segment: an event counts in each segment the visitor was in, so the groups add up to more than the whole.' }),
}, { description: 'A saved report\'s result: one row per bucket (and group), then the totals over the range.' })
const Deleted = Type.Object({ id: Type.String(), deleted: Type.Boolean() })

const EXAMPLE: SavedReportDefinition = {
  name: 'Buyers by platform', metric: { type: 'uniqueVisitors' }, breakdown: { by: 'platform' },
  filters: [{ by: 'kind', values: ['purchase'] }], range: { lastDays: 7 }, granularity: 'day',
}

export interface SavedReportRouteDeps {
  catalogs: Catalogs
  clock: Clock
  /** Results over the columns of the retained log; null: no log is kept (retention 0): 501. */
  results: SavedResults | null
}

export function savedReportRoutes ({ catalogs, clock, results }: SavedReportRouteDeps): RouteDefinition[] {
  const base = '/admin/accounts/:account/saved-reports'
  const route = (method: Route['method'], pattern: string, role: RouteRole, doc: RouteDoc, handler: Handler, audit = true): RouteDefinition => ({
    method, pattern, body: method === 'post' || method === 'put', role, doc, handler, ...(audit ? {} : { audit: false }),
  })
  const kept = (): SavedResults => {
    if (results === null) throw new ApiError('event_log_not_kept')
    return results
  }
  const definition = (body: unknown): SavedReportDefinition => {
    const def = validateBody(body)
    checkDefinition(def, clock.nowMs())
    return def
  }
  /** A definition to save: its delivery's webhook must be able to take the result. */
  const saved = (account: string, body: unknown): SavedReportDefinition => {
    const def = definition(body)
    const id = def.delivery?.webhook
    if (id === undefined) return def
    const webhook = Array.from(catalogs.webhooks.webhooksOf(account)).find(w => w.id === id)
    if (webhook === undefined) throw new ApiError('report_webhook_unusable', `The account has no webhook ${id}.`, '/delivery/webhook')
    if (!webhook.enabled) throw new ApiError('report_webhook_unusable', `The webhook ${id} is disabled.`, '/delivery/webhook')
    if (!webhook.hasBody) throw new ApiError('report_webhook_unusable', `The webhook ${id} uses ${webhook.method.toUpperCase()}, which sends no body: a report's result goes to a POST or PUT webhook.`, '/delivery/webhook')
    return def
  }
  const result = (account: string, report: SavedReport): SavedResult => kept().of(account, report)
  const errors = ['account_not_found', 'saved_report_not_found', 'event_log_not_kept'] as const

  return [
    route('get', base, 'viewer', {
      summary: 'List saved reports', tag: 'Reports',
      query: [
        { name: 'cursor', description: 'The `next` of the previous page (omitted: the first page).', schema: Type.String({ maxLength: 300 }) },
        { name: 'limit', description: 'Page size (default 50, at most 500).', schema: Type.Integer({ minimum: 1, maximum: 500 }) },
      ],
      ok: json(200, 'The account\'s saved reports, in id order.', SavedReportList), errors: ['invalid_field', 'account_not_found', 'event_log_not_kept'],
    }, request => {
      const account = accountParam(request, catalogs)
      kept()
      const { items, next } = catalogs.savedReports.list(account, pageRequest(request))
      return { status: 200, body: { savedReports: items, next } }
    }),
    route('post', base, 'editor', {
      summary: 'Save a report',
      description: 'A metric (events, uniqueVisitors, uniqueProfiles, sum or mean of a numeric field, conversion from one event type to another within a window), an optional breakdown, filters, a range and a granularity (docs/reports.md).',
      tag: 'Reports',
      body: { schema: SavedReportBody, example: EXAMPLE as unknown as Record<string, unknown> },
      ok: json(201, 'The saved report, with its id.', SavedReportAnswer), errors: ['invalid_field', 'account_not_found', 'conflict', 'report_webhook_unusable', 'event_log_not_kept'],
    }, async request => {
      const account = accountParam(request, catalogs)
      kept()
      return { status: 201, body: await catalogs.savedReports.create(account, saved(account, request.body)) }
    }),
    route('post', `${base}-preview`, 'viewer', {
      summary: 'Compute an unsaved report',
      description: 'The result a report of this definition would answer, without saving it (the panel\'s builder). Changes nothing.',
      tag: 'Reports',
      body: { schema: SavedReportBody, example: EXAMPLE as unknown as Record<string, unknown> },
      ok: json(200, 'The result.', SavedResultAnswer), errors: ['invalid_field', 'account_not_found', 'event_log_not_kept', 'reports_loading'],
    }, request => {
      const account = accountParam(request, catalogs)
      kept()
      const def = definition(request.body)
      return { status: 200, body: result(account, { id: '', ...def, createdAt: '', updatedAt: '' }) }
    }, false),
    route('get', `${base}/:id`, 'viewer', {
      summary: 'Read a saved report', tag: 'Reports',
      ok: json(200, 'The saved report.', SavedReportAnswer), errors: [...errors],
    }, request => {
      const account = accountParam(request, catalogs)
      kept()
      return { status: 200, body: catalogs.savedReports.get(account, request.params[1] ?? '') }
    }),
    route('put', `${base}/:id`, 'editor', {
      summary: 'Replace a saved report', tag: 'Reports',
      body: { schema: SavedReportBody, example: EXAMPLE as unknown as Record<string, unknown> },
      ok: json(200, 'The saved report.', SavedReportAnswer), errors: ['invalid_field', 'report_webhook_unusable', ...errors],
    }, async request => {
      const account = accountParam(request, catalogs)
      kept()
      const id = request.params[1] ?? ''
      catalogs.savedReports.get(account, id)
      return { status: 200, body: await catalogs.savedReports.replace(account, id, saved(account, request.body)) }
    }),
    route('del', `${base}/:id`, 'editor', {
      summary: 'Delete a saved report', tag: 'Reports',
      ok: json(200, 'Deleted.', Deleted), errors: [...errors],
    }, async request => {
      const account = accountParam(request, catalogs)
      kept()
      const id = request.params[1] ?? ''
      await catalogs.savedReports.delete(account, id)
      return { status: 200, body: { id, deleted: true } }
    }),
    route('get', `${base}/:id/result`, 'viewer', {
      summary: 'A saved report\'s result',
      description: 'Computed now from the retained event log, exactly (distinct visitors and profiles are exact). `format=csv` answers text/csv: `bucket,group,value` (and `started,converted` for a conversion), one line per row.',
      tag: 'Reports',
      query: [{ name: 'format', description: 'json (default) or csv.', schema: Type.Union([Type.Literal('json'), Type.Literal('csv')]) }],
      ok: json(200, 'The result (or CSV with format=csv).', SavedResultAnswer), errors: ['invalid_field', ...errors, 'reports_loading'],
    }, request => {
      const account = accountParam(request, catalogs)
      kept()
      const format = new URLSearchParams(request.query).get('format') ?? 'json'
      if (format !== 'json' && format !== 'csv') throw new ApiError('invalid_field', 'format must be json or csv.', '/format')
      const answer = result(account, catalogs.savedReports.get(account, request.params[1] ?? ''))
      if (format === 'json') return { status: 200, body: answer }
      return {
        status: 200, body: savedReportCsv(answer), contentType: 'text/csv; charset=utf-8',
        headers: { 'Content-Disposition': `attachment; filename="beacon-${answer.id}.csv"` },
      }
    }),
  ]
}

/** The result as CSV: a header, then one line per row (RFC 4180, formulas defused). */
export function savedReportCsv (result: SavedResult): string {
  const conversion = result.metric.type === 'conversion'
  const lines = [conversion ? 'bucket,group,value,started,converted' : 'bucket,group,value']
  for (const row of result.rows) {
    const line = `${row.bucket},${csvField(row.group ?? '')},${row.value}`
    lines.push(conversion ? `${line},${row.started ?? 0},${row.converted ?? 0}` : line)
  }
  return lines.join('\r\n') + '\r\n'
}
