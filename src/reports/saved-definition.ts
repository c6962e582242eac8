// What a saved report is (docs/reports.md): a metric, an optional breakdown, filters, a time range and a
// granularity. The schema is the API's validator; `checkDefinition` adds what a schema cannot say.

import Type, { type Static } from 'typebox'
import { ApiError } from '../errors.js'
import { NAME_PATTERN } from '../patterns.js'

/**
 * What a breakdown or a filter can read: a column every event has, the segments the visitor was in at
 * the event (`segment`: several per event), or a custom field (`field`).
 */
export const DIMENSIONS = ['kind', 'campaign', 'variant', 'segment', 'platform', 'device', 'path', 'field'] as const
export type Dimension = typeof DIMENSIONS[number]
export const SAVED_GRANULARITIES = ['hour', 'day', 'week'] as const
export type SavedGranularity = typeof SAVED_GRANULARITIES[number]

/** Saved reports one account may hold. */
export const SAVED_REPORTS_MAX = 200
/** Filters per report, and values per filter. */
export const FILTERS_MAX = 10
export const FILTER_VALUES_MAX = 50
/** The longest range a report reads (the log keeps 30 days by default). */
export const RANGE_DAYS_MAX = 400
/** Buckets a result holds at most (e.g. 31 days of hours). */
export const BUCKETS_MAX = 800
/** Groups of a breakdown shown (the largest by the metric's total); the rest are counted in `groupsOmitted`. */
export const GROUPS_MAX = 50
/** A conversion's window, in hours. */
export const CONVERSION_WINDOW_HOURS_MAX = 24 * 90

const Kind = Type.String({ pattern: NAME_PATTERN, description: 'An event type (pageView, purchase, a custom type).' })
const FieldName = Type.String({ pattern: NAME_PATTERN, description: 'A field events carry (orderTotal, a custom field).' })

export const Metric = Type.Union([
  Type.Object({ type: Type.Literal('events') }, { additionalProperties: false }),
  Type.Object({ type: Type.Literal('uniqueVisitors') }, { additionalProperties: false }),
  Type.Object({ type: Type.Literal('uniqueProfiles') }, { additionalProperties: false }),
  Type.Object({ type: Type.Literal('sum'), field: FieldName }, { additionalProperties: false }),
  Type.Object({ type: Type.Literal('mean'), field: FieldName }, { additionalProperties: false }),
  Type.Object({
    type: Type.Literal('conversion'), from: Kind, to: Kind,
    windowHours: Type.Integer({ minimum: 1, maximum: CONVERSION_WINDOW_HOURS_MAX, description: 'How long after its first `from` event a visitor\'s `to` event still converts.' }),
  }, { additionalProperties: false }),
], { description: 'What is counted.' })

const DimensionSchema = Type.Union([
  Type.Literal('kind'), Type.Literal('campaign'), Type.Literal('variant'), Type.Literal('segment'), Type.Literal('platform'), Type.Literal('device'), Type.Literal('path'), Type.Literal('field'),
])

export const Breakdown = Type.Object({
  by: DimensionSchema,
  field: Type.Optional(FieldName),
}, { additionalProperties: false, description: 'One row per value of this dimension (by `field`: name the field).' })

export const Filter = Type.Object({
  by: DimensionSchema,
  field: Type.Optional(FieldName),
  values: Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { minItems: 1, maxItems: FILTER_VALUES_MAX, description: 'Events whose value is one of these.' }),
}, { additionalProperties: false })

export const Range = Type.Union([
  Type.Object({ lastDays: Type.Integer({ minimum: 1, maximum: RANGE_DAYS_MAX, description: 'The last N days up to now.' }) }, { additionalProperties: false }),
  Type.Object({ from: Type.String({ format: 'date-time' }), to: Type.String({ format: 'date-time' }) }, { additionalProperties: false }),
])

export const WEEKDAYS = ['sunday', 'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday'] as const

export const Delivery = Type.Object({
  webhook: Type.String({ pattern: NAME_PATTERN, description: 'The id of one of the account\'s webhooks (POST or PUT, enabled): its url, headers, signing, retries and dead letters carry the result.' }),
  every: Type.Union([Type.Literal('day'), Type.Literal('week')], { description: 'How often the result is sent.' }),
  at: Type.Optional(Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$', description: 'The time of day, HH:MM in UTC (default 00:00).' })),
  weekday: Type.Optional(Type.Union(WEEKDAYS.map(day => Type.Literal(day)), { description: 'every week: the day (default monday).' })),
}, { additionalProperties: false, description: 'Send the result (as GET …/result answers it) to a webhook on a schedule.' })

export const SavedReportBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  metric: Metric,
  breakdown: Type.Optional(Breakdown),
  filters: Type.Optional(Type.Array(Filter, { maxItems: FILTERS_MAX })),
  range: Range,
  granularity: Type.Union([Type.Literal('hour'), Type.Literal('day'), Type.Literal('week')]),
  delivery: Type.Optional(Delivery),
}, { additionalProperties: false })

export type SavedReportDefinition = Static<typeof SavedReportBody>
export type SavedMetric = Static<typeof Metric>
export type SavedFilter = Static<typeof Filter>
export type SavedBreakdown = Static<typeof Breakdown>
export type SavedDelivery = Static<typeof Delivery>

/** A saved report as stored and answered. */
export interface SavedReport extends SavedReportDefinition {
  id: string
  createdAt: string
  updatedAt: string
}

/** The cron pattern (UTC) of a delivery's runs: src/webhooks/schedule.ts parses it, as a schedule webhook's. */
export function deliveryCron (delivery: SavedDelivery): string {
  const [hour, minute] = (delivery.at ?? '00:00').split(':').map(Number)
  const weekday = delivery.every === 'week' ? String(WEEKDAYS.indexOf(delivery.weekday ?? 'monday')) : '*'
  return `${minute} ${hour} * * ${weekday}`
}

const DAY_MS = 86_400_000
export const GRANULARITY_MS: Record<SavedGranularity, number> = { hour: 3_600_000, day: DAY_MS, week: 7 * DAY_MS }

/** What the schema cannot say: `field` given exactly when `by` is field; a range within bounds. */
export function checkDefinition (def: SavedReportDefinition, nowMs: number): void {
  checkDimension(def.breakdown, '/breakdown')
  def.filters?.forEach((filter, i) => checkDimension(filter, `/filters/${i}`))
  const { fromMs, toMs } = rangeOf(def, nowMs)
  if (def.delivery?.weekday !== undefined && def.delivery.every !== 'week') throw new ApiError('invalid_field', 'weekday goes only with every "week".', '/delivery/weekday')
  if (def.metric.type === 'conversion' && def.metric.from === def.metric.to) throw new ApiError('invalid_field', 'A conversion goes from one event type to another: from and to must differ.', '/metric/to')
  if (Math.ceil((toMs - fromMs) / GRANULARITY_MS[def.granularity]) > BUCKETS_MAX) {
    throw new ApiError('invalid_field', `The range holds more than ${BUCKETS_MAX} ${def.granularity}s: choose a coarser granularity or a shorter range.`, '/granularity')
  }
}

function checkDimension (d: { by: Dimension, field?: string } | undefined, at: string): void {
  if (d === undefined) return
  if (d.by === 'field' && d.field === undefined) throw new ApiError('invalid_field', 'by "field" needs the field\'s name in `field`.', `${at}/field`)
  if (d.by !== 'field' && d.field !== undefined) throw new ApiError('invalid_field', '`field` goes only with by "field".', `${at}/field`)
}

/** The report's time range [fromMs, toMs) as of nowMs. */
export function rangeOf (def: SavedReportDefinition, nowMs: number): { fromMs: number, toMs: number } {
  const range = def.range
  if ('lastDays' in range) return { fromMs: nowMs - range.lastDays * DAY_MS, toMs: nowMs }
  const fromMs = Date.parse(range.from)
  const toMs = Date.parse(range.to)
  if (Number.isNaN(fromMs)) throw new ApiError('invalid_field', 'from must be an ISO-8601 time.', '/range/from')
  if (Number.isNaN(toMs)) throw new ApiError('invalid_field', 'to must be an ISO-8601 time.', '/range/to')
  if (fromMs >= toMs) throw new ApiError('invalid_field', 'from must be before to.', '/range/from')
  if (toMs - fromMs > RANGE_DAYS_MAX * DAY_MS) throw new ApiError('invalid_field', `A range spans at most ${RANGE_DAYS_MAX} days.`, '/range/to')
  return { fromMs, toMs }
}
