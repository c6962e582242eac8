// A saved report's result: one pass over the account's columns (saved-index.ts), exact. Distinct
// visitors and profiles are counted in sets of integers, with a per-visitor stamp so a visitor's run
// of events in one cell costs one set insertion; a conversion follows each visitor's first `from`
// event in the range.

import { ApiError } from '../errors.js'
import { DIMENSION_FIELDS, NONE, type AccountColumns, type DimensionField, type SparseField } from './saved-index.js'
import { GRANULARITY_MS, GROUPS_MAX, rangeOf, type SavedFilter, type SavedGranularity, type SavedReport } from './saved-definition.js'

export interface SavedResultRow {
  bucket: string
  group: string | null
  value: number
  /** Conversion: visitors who did `from` in the bucket, and those of them who did `to` within the window. */
  started?: number
  converted?: number
}

export interface SavedResultTotal {
  group: string | null
  value: number
  started?: number
  converted?: number
}

export interface SavedResult {
  id: string
  name: string
  from: string
  to: string
  granularity: SavedGranularity
  metric: SavedReport['metric']
  breakdown: string | null
  rows: SavedResultRow[]
  /** Per group over the whole range (distinct counts are distinct over the range, not sums of buckets). */
  totals: SavedResultTotal[]
  /** Groups beyond the GROUPS_MAX largest, left out. */
  groupsOmitted: number
  /** Events of the range that passed the filters. */
  eventsRead: number
}

const DAY_MS = 86_400_000
/** 1970-01-05, a Monday: weeks start on Mondays (UTC). */
const WEEK_ORIGIN_MS = 4 * DAY_MS
const GROUP_BITS = 2 ** 21

/** The start of the bucket holding timeMs (UTC). */
export function savedBucketStart (timeMs: number, granularity: SavedGranularity): number {
  const step = GRANULARITY_MS[granularity]
  const origin = granularity === 'week' ? WEEK_ORIGIN_MS : 0
  return Math.floor((timeMs - origin) / step) * step + origin
}

/** Reads one dimension of a row as a group number in its own list of names (NONE: the row has none). */
class GroupReader {
  readonly names: (string | null)[] = []
  private readonly byName = new Map<string, number>()
  private readonly column: Int32Array | null
  private readonly values: readonly string[]
  private readonly cached: Int32Array
  private readonly sparse: SparseField | null
  private at = 0

  constructor (columns: AccountColumns, by: SavedFilter['by'], field: string | undefined) {
    this.sparse = null
    if (by === 'kind') {
      this.column = columns.kind
      this.values = columns.kinds.values
    } else {
      const dimension = dimensionOf(by, field)
      if (dimension !== null) {
        const d = DIMENSION_FIELDS.indexOf(dimension)
        this.column = columns.dimensions[d]!
        this.values = columns.dimensionValues[d]!.values
      } else {
        this.column = null
        this.sparse = columns.fields.get(field!) ?? null
        this.values = this.sparse?.dictionary.values ?? []
        if (this.sparse?.overflowed === true) {
          throw new ApiError('invalid_field', `The field "${field!}" has more than 10,000 distinct values: it cannot be a breakdown or a filter (it can be summed).`, '/field')
        }
      }
    }
    this.cached = new Int32Array(this.values.length).fill(-2)
  }

  /** The row's group; rows must be asked in ascending order (a custom field is read by a cursor). */
  read (row: number): number {
    if (this.column !== null) return this.ofValue(this.column[row]!)
    const sparse = this.sparse
    if (sparse === null) return NONE
    while (this.at < sparse.n && sparse.rows[this.at]! < row) this.at++
    if (this.at >= sparse.n || sparse.rows[this.at] !== row) return NONE
    const id = sparse.strings[this.at]!
    return id !== NONE ? this.ofValue(id) : this.named(String(sparse.numbers[this.at]))
  }

  private ofValue (id: number): number {
    if (id === NONE) return NONE
    const known = this.cached[id]!
    if (known !== -2) return known
    return (this.cached[id] = this.named(this.values[id]!))
  }

  named (name: string): number {
    let id = this.byName.get(name)
    if (id === undefined) {
      id = this.names.length
      this.names.push(name)
      this.byName.set(name, id)
    }
    return id
  }
}

/** Reads a numeric field of a row (NaN: absent or not a number). */
class NumberReader {
  private readonly sparse: SparseField | null
  private at = 0
  constructor (columns: AccountColumns, field: string) { this.sparse = columns.fields.get(field) ?? null }
  read (row: number): number {
    const sparse = this.sparse
    if (sparse === null) return Number.NaN
    while (this.at < sparse.n && sparse.rows[this.at]! < row) this.at++
    return this.at < sparse.n && sparse.rows[this.at] === row ? sparse.numbers[this.at]! : Number.NaN
  }
}

class FilterCheck {
  private readonly reader: GroupReader
  private readonly allowed: ReadonlySet<string>
  private readonly verdicts: (boolean | undefined)[] = []
  constructor (columns: AccountColumns, filter: SavedFilter) {
    this.reader = new GroupReader(columns, filter.by, filter.field)
    this.allowed = new Set(filter.values)
  }

  passes (row: number): boolean {
    const group = this.reader.read(row)
    if (group === NONE) return false
    let verdict = this.verdicts[group]
    if (verdict === undefined) verdict = this.verdicts[group] = this.allowed.has(this.reader.names[group]!)
    return verdict
  }
}

interface Cell { count: number, sum: number, started: number, converted: number, members: Set<number> | null }

const newCell = (): Cell => ({ count: 0, sum: 0, started: 0, converted: 0, members: null })

/** The report over the account's columns as of nowMs (columns undefined: the account has no event). */
export function runSavedReport (report: SavedReport, columns: AccountColumns | undefined, nowMs: number): SavedResult {
  const { fromMs, toMs } = rangeOf(report, nowMs)
  const granularity = report.granularity
  const step = GRANULARITY_MS[granularity]
  const firstBucketMs = savedBucketStart(fromMs, granularity)
  const buckets = Math.max(1, Math.ceil((toMs - firstBucketMs) / step))
  const metric = report.metric
  const cells = new Map<number, Cell>()
  const totals = new Map<number, Cell>()
  let eventsRead = 0
  let groupNames: (string | null)[] = [null]

  if (columns !== undefined && columns.n > 0) {
    const group = report.breakdown === undefined ? null : new GroupReader(columns, report.breakdown.by, report.breakdown.field)
    const filters = (report.filters ?? []).map(filter => new FilterCheck(columns, filter))
    const value = metric.type === 'sum' || metric.type === 'mean' ? new NumberReader(columns, metric.field) : null
    const distinct = metric.type === 'uniqueVisitors' ? columns.visitor : metric.type === 'uniqueProfiles' ? columns.profile : null
    const people = distinct === null ? 0 : (metric.type === 'uniqueVisitors' ? columns.visitors.size : columns.profiles.size)
    // The cell (and group) each visitor or profile was last counted in: repeats skip the set.
    const lastCell = distinct === null ? null : new Float64Array(people).fill(-1)
    const lastGroup = distinct === null ? null : new Int32Array(people).fill(-1)
    const fromKind = metric.type === 'conversion' ? columns.kinds.find(metric.from) : NONE
    const toKind = metric.type === 'conversion' ? columns.kinds.find(metric.to) : NONE
    const windowMs = metric.type === 'conversion' ? metric.windowHours * 3_600_000 : 0
    const startedAt = metric.type === 'conversion' ? new Float64Array(columns.visitors.size).fill(Number.NaN) : null
    const startCell = metric.type === 'conversion' ? new Float64Array(columns.visitors.size) : null
    const converted = metric.type === 'conversion' ? new Uint8Array(columns.visitors.size) : null
    const { timeMs, alive, kind } = columns
    const noGroup = group === null ? 0 : NONE

    rows: for (let row = 0; row < columns.n; row++) {
      if (alive[row] === 0) continue
      const t = timeMs[row]!
      if (t < fromMs || t >= toMs) continue
      for (const filter of filters) if (!filter.passes(row)) continue rows
      let g = group === null ? 0 : group.read(row)
      if (g === NONE) g = noGroup === 0 ? 0 : nullGroup(group!)
      const b = Math.floor((t - firstBucketMs) / step)
      const key = b * GROUP_BITS + g
      eventsRead++
      if (startedAt !== null) {
        const k = kind[row]!
        const v = columns.visitor[row]!
        if (k === fromKind && Number.isNaN(startedAt[v]!)) {
          startedAt[v] = t
          startCell![v] = key
          cellOf(cells, key).started++
          cellOf(totals, g).started++
        } else if (k === toKind && converted![v] === 0 && t >= startedAt[v]! && t - startedAt[v]! <= windowMs) {
          converted![v] = 1
          const started = startCell![v]!
          cellOf(cells, started).converted++
          cellOf(totals, started % GROUP_BITS).converted++
        }
        continue
      }
      if (distinct !== null) {
        const who = distinct[row]!
        if (who === NONE) continue
        if (lastCell![who] !== key) {
          lastCell![who] = key
          const cell = cellOf(cells, key)
          ;(cell.members ??= new Set()).add(who)
        }
        if (lastGroup![who] !== g) {
          lastGroup![who] = g
          const total = cellOf(totals, g)
          ;(total.members ??= new Set()).add(who)
        }
        continue
      }
      const cell = cellOf(cells, key)
      const total = cellOf(totals, g)
      if (value !== null) {
        const x = value.read(row)
        if (Number.isNaN(x)) continue
        cell.sum += x
        total.sum += x
      }
      cell.count++
      total.count++
    }
    if (group !== null) groupNames = group.names.map(name => name === NULL_GROUP ? null : name)
  }

  const valueOf = (cell: Cell | undefined): number => {
    if (cell === undefined) return 0
    switch (metric.type) {
      case 'events': return cell.count
      case 'uniqueVisitors': case 'uniqueProfiles': return cell.members?.size ?? 0
      case 'sum': return cell.sum
      case 'mean': return cell.count === 0 ? 0 : cell.sum / cell.count
      case 'conversion': return cell.started === 0 ? 0 : cell.converted / cell.started
    }
  }
  const conversion = metric.type === 'conversion'
  const ranked = [...totals.entries()]
    .map(([g, cell]) => ({ g, cell, value: valueOf(cell) }))
    .sort((a, b) => b.value - a.value || (conversion ? b.cell.started - a.cell.started : 0) || String(groupNames[a.g]).localeCompare(String(groupNames[b.g])))
  const kept = report.breakdown === undefined ? [{ g: 0, cell: totals.get(0), value: valueOf(totals.get(0)) }] : ranked.slice(0, GROUPS_MAX)
  const rows: SavedResultRow[] = []
  for (let b = 0; b < buckets; b++) {
    const bucket = new Date(firstBucketMs + b * step).toISOString()
    for (const { g } of kept) {
      const cell = cells.get(b * GROUP_BITS + g)
      const row: SavedResultRow = { bucket, group: groupNames[g] ?? null, value: valueOf(cell) }
      if (conversion) {
        row.started = cell?.started ?? 0
        row.converted = cell?.converted ?? 0
      }
      rows.push(row)
    }
  }
  return {
    id: report.id,
    name: report.name,
    from: new Date(fromMs).toISOString(),
    to: new Date(toMs).toISOString(),
    granularity,
    metric,
    breakdown: report.breakdown === undefined ? null : report.breakdown.by === 'field' ? `field:${report.breakdown.field!}` : report.breakdown.by,
    rows,
    totals: kept.map(({ g, cell, value }) => {
      const total: SavedResultTotal = { group: groupNames[g] ?? null, value }
      if (conversion) {
        total.started = cell?.started ?? 0
        total.converted = cell?.converted ?? 0
      }
      return total
    }),
    groupsOmitted: report.breakdown === undefined ? 0 : Math.max(0, ranked.length - GROUPS_MAX),
    eventsRead,
  }
}

/** The group of rows without the breakdown's value: shown as null. */
function nullGroup (reader: GroupReader): number {
  return reader.named(NULL_GROUP)
}

/** The name of the group of rows without the dimension's value (answered as null). */
const NULL_GROUP = '\u0000none'

function cellOf (cells: Map<number, Cell>, key: number): Cell {
  let cell = cells.get(key)
  if (cell === undefined) cells.set(key, cell = newCell())
  return cell
}

/** The column of a breakdown or filter that every event has, or null for a custom field. */
function dimensionOf (by: SavedFilter['by'], field: string | undefined): DimensionField | null {
  switch (by) {
    case 'campaign': return 'campaignId'
    case 'variant': return 'variant'
    case 'platform': return 'platform'
    case 'device': return 'device'
    case 'path': return 'path'
    case 'field': return (DIMENSION_FIELDS as readonly string[]).includes(field!) ? field as DimensionField : null
    default: return null
  }
}
