// A saved report's result: one pass over the account's columns (saved-index.ts), exact. Numbers per group
// and bucket live in dense arrays; distinct visitors and profiles are counted with a stamp per person and
// group (GroupCells), and a conversion follows each visitor's first `from` event in the range.

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
  /**
   * Whether one event may count in several groups (a breakdown by segment: each segment the visitor was
   * in): the groups' values then add up to more than the metric's value over all events.
   */
  groupsOverlap: boolean
  /** Events of the range that passed the filters. */
  eventsRead: number
}

const DAY_MS = 86_400_000
/** 1970-01-05, a Monday: weeks start on Mondays (UTC). */
const WEEK_ORIGIN_MS = 4 * DAY_MS

/** The start of the bucket holding timeMs (UTC). */
export function savedBucketStart (timeMs: number, granularity: SavedGranularity): number {
  const step = GRANULARITY_MS[granularity]
  const origin = granularity === 'week' ? WEEK_ORIGIN_MS : 0
  return Math.floor((timeMs - origin) / step) * step + origin
}

const NO_GROUPS: readonly number[] = []

/**
 * Reads one dimension of a row as group numbers in its own list of names: one group for a dimension an
 * event has one value of, each of its segments for `segment` (none: the row has no value).
 */
class GroupReader {
  readonly names: (string | null)[] = []
  private readonly byName = new Map<string, number>()
  /** Each group as a list of itself: what `groups` answers for a one-valued dimension. */
  private readonly lists: number[][] = []
  private readonly column: Int32Array | null
  private readonly values: readonly string[]
  private readonly cached: Int32Array
  private readonly sparse: SparseField | null
  /** By segment: each row's combination of segments, each combination's members, and its groups once read. */
  private readonly sets: Int32Array | null = null
  private readonly setMembers: readonly Int32Array[] = []
  private readonly setGroups: Array<readonly number[] | undefined> = []
  private at = 0

  constructor (columns: AccountColumns, by: SavedFilter['by'], field: string | undefined) {
    this.sparse = null
    if (by === 'segment') {
      this.column = null
      this.sets = columns.segmentSet
      this.setMembers = columns.segmentSetMembers
      this.values = columns.segmentNames.values
    } else if (by === 'kind') {
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

  /** The row's groups (empty: it has no value); rows must be asked in ascending order (a custom field is read by a cursor). */
  groups (row: number): readonly number[] {
    const sets = this.sets
    if (sets !== null) {
      const set = sets[row]!
      if (set === NONE) return NO_GROUPS
      return (this.setGroups[set] ??= Array.from(this.setMembers[set]!, id => this.ofValue(id)))
    }
    const g = this.read(row)
    return g === NONE ? NO_GROUPS : this.lists[g]!
  }

  /** The group of rows without a value. */
  none (): readonly number[] { return this.lists[this.named(NULL_GROUP)]! }

  private read (row: number): number {
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

  private named (name: string): number {
    let id = this.byName.get(name)
    if (id === undefined) {
      id = this.names.length
      this.names.push(name)
      this.lists.push([id])
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

  /** Whether one of the row's values is allowed (by segment: one of the segments the visitor was in). */
  passes (row: number): boolean {
    const groups = this.reader.groups(row)
    for (let i = 0; i < groups.length; i++) {
      const group = groups[i]!
      let verdict = this.verdicts[group]
      if (verdict === undefined) verdict = this.verdicts[group] = this.allowed.has(this.reader.names[group]!)
      if (verdict) return true
    }
    return false
  }
}

/**
 * One group's numbers per bucket, and over the range. Distinct people are counted with a stamp per
 * person (the bucket + 1 they were last counted in: rows come in time order, so a bucket's rows are
 * contiguous) while the stamps fit STAMP_BYTES_MAX, else in a set per bucket.
 */
class GroupCells {
  readonly count: Float64Array
  readonly sum: Float64Array
  readonly started: Float64Array
  readonly converted: Float64Array
  readonly stamps: Uint16Array | null
  readonly sets: Array<Set<number> | undefined> | null
  readonly everyone: Set<number> | null
  total = { count: 0, sum: 0, started: 0, converted: 0, distinct: 0 }

  constructor (buckets: number, people: number, stamped: boolean) {
    this.count = new Float64Array(buckets)
    this.sum = new Float64Array(buckets)
    this.started = new Float64Array(buckets)
    this.converted = new Float64Array(buckets)
    this.stamps = people > 0 && stamped ? new Uint16Array(people) : null
    this.sets = people > 0 && !stamped ? [] : null
    this.everyone = people > 0 && !stamped ? new Set() : null
  }

  /** Count a person in bucket b (once per bucket, and once over the range). */
  person (who: number, b: number): void {
    const stamps = this.stamps
    if (stamps !== null) {
      const stamp = stamps[who]!
      if (stamp === b + 1) return
      if (stamp === 0) this.total.distinct++
      stamps[who] = b + 1
      this.count[b]!++
      return
    }
    const set = (this.sets![b] ??= new Set())
    if (set.has(who)) return
    set.add(who)
    this.count[b]!++
    if (!this.everyone!.has(who)) {
      this.everyone!.add(who)
      this.total.distinct++
    }
  }
}

/** Memory the per-person stamps of one report may take (2 bytes per person per group). */
const STAMP_BYTES_MAX = 256 * 1024 * 1024

/** The report over the account's columns as of nowMs (columns undefined: the account has no event). */
export function runSavedReport (report: SavedReport, columns: AccountColumns | undefined, nowMs: number): SavedResult {
  const { fromMs, toMs } = rangeOf(report, nowMs)
  const granularity = report.granularity
  const step = GRANULARITY_MS[granularity]
  const firstBucketMs = savedBucketStart(fromMs, granularity)
  const buckets = Math.max(1, Math.ceil((toMs - firstBucketMs) / step))
  const metric = report.metric
  const groups: GroupCells[] = []
  let eventsRead = 0
  let groupNames: (string | null)[] = [null]

  if (columns !== undefined && columns.n > 0) {
    const group = report.breakdown === undefined ? null : new GroupReader(columns, report.breakdown.by, report.breakdown.field)
    const filters = (report.filters ?? []).map(filter => new FilterCheck(columns, filter))
    const value = metric.type === 'sum' || metric.type === 'mean' ? new NumberReader(columns, metric.field) : null
    const distinct = metric.type === 'uniqueVisitors' ? columns.visitor : metric.type === 'uniqueProfiles' ? columns.profile : null
    const people = distinct === null ? 0 : (metric.type === 'uniqueVisitors' ? columns.visitors.size : columns.profiles.size)
    let stampBytes = 0
    // The last group's cells, kept at hand: most rows of a run share their group (all of them without a breakdown).
    let lastGroup = -1
    let lastCells: GroupCells | null = null
    const cellsOf = (g: number): GroupCells => {
      if (g === lastGroup) return lastCells!
      lastGroup = g
      let cells = groups[g]
      if (cells === undefined) {
        const stamped = columns.ordered && stampBytes + 2 * people <= STAMP_BYTES_MAX
        if (stamped) stampBytes += 2 * people
        cells = groups[g] = new GroupCells(buckets, people, stamped)
      }
      return (lastCells = cells)
    }
    const fromKind = metric.type === 'conversion' ? columns.kinds.find(metric.from) : NONE
    const toKind = metric.type === 'conversion' ? columns.kinds.find(metric.to) : NONE
    const windowMs = metric.type === 'conversion' ? metric.windowHours * 3_600_000 : 0
    const startedAt = metric.type === 'conversion' ? new Float64Array(columns.visitors.size).fill(Number.NaN) : null
    const startGroups: Array<readonly number[]> | null = metric.type === 'conversion' ? new Array(columns.visitors.size) : null
    const startBucket = metric.type === 'conversion' ? new Int32Array(columns.visitors.size) : null
    const converted = metric.type === 'conversion' ? new Uint8Array(columns.visitors.size) : null
    const { timeMs, alive, kind, visitor } = columns
    const filterCount = filters.length
    const noBreakdown: readonly number[] = [0]

    for (let row = 0; row < columns.n; row++) {
      if (alive[row] === 0) continue
      const t = timeMs[row]!
      if (t < fromMs || t >= toMs) continue
      let f = 0
      while (f < filterCount && filters[f]!.passes(row)) f++
      if (f < filterCount) continue
      // The row's groups: one, but one per segment the visitor was in by segment.
      let gs = noBreakdown
      if (group !== null) {
        gs = group.groups(row)
        if (gs.length === 0) gs = group.none()
      }
      const b = Math.floor((t - firstBucketMs) / step)
      eventsRead++
      if (startedAt !== null) {
        const k = kind[row]!
        const v = visitor[row]!
        if (k === fromKind && Number.isNaN(startedAt[v]!)) {
          startedAt[v] = t
          startGroups![v] = gs
          startBucket![v] = b
          for (let i = 0; i < gs.length; i++) {
            const cells = cellsOf(gs[i]!)
            cells.started[b]!++
            cells.total.started++
          }
        } else if (k === toKind && converted![v] === 0 && t >= startedAt[v]! && t - startedAt[v]! <= windowMs) {
          converted![v] = 1
          const started = startGroups![v]!
          for (let i = 0; i < started.length; i++) {
            const cells = cellsOf(started[i]!)
            cells.converted[startBucket![v]!]!++
            cells.total.converted++
          }
        }
        continue
      }
      if (distinct !== null) {
        const who = distinct[row]!
        if (who !== NONE) for (let i = 0; i < gs.length; i++) cellsOf(gs[i]!).person(who, b)
        continue
      }
      const x = value === null ? 0 : value.read(row)
      if (Number.isNaN(x)) continue
      for (let i = 0; i < gs.length; i++) {
        const cells = cellsOf(gs[i]!)
        if (value !== null) {
          cells.sum[b]! += x
          cells.total.sum += x
        }
        cells.count[b]!++
        cells.total.count++
      }
    }
    if (group !== null) groupNames = group.names.map(name => name === NULL_GROUP ? null : name)
  }

  const valueAt = (cells: GroupCells | undefined, b: number): number => {
    if (cells === undefined) return 0
    if (b < 0) return valueOf(metric.type, cells.total.count, cells.total.sum, cells.total.started, cells.total.converted, cells.total.distinct)
    return valueOf(metric.type, cells.count[b]!, cells.sum[b]!, cells.started[b]!, cells.converted[b]!, cells.count[b]!)
  }
  const conversion = metric.type === 'conversion'
  const ranked: Array<{ g: number, value: number }> = []
  groups.forEach((cells, g) => ranked.push({ g, value: valueAt(cells, -1) }))
  ranked.sort((a, b) => b.value - a.value || (conversion ? groups[b.g]!.total.started - groups[a.g]!.total.started : 0) || String(groupNames[a.g]).localeCompare(String(groupNames[b.g])))
  const kept = report.breakdown === undefined ? [{ g: 0, value: valueAt(groups[0], -1) }] : ranked.slice(0, GROUPS_MAX)
  const rows: SavedResultRow[] = []
  for (let b = 0; b < buckets; b++) {
    const bucket = new Date(firstBucketMs + b * step).toISOString()
    for (const { g } of kept) {
      const cells = groups[g]
      const row: SavedResultRow = { bucket, group: groupNames[g] ?? null, value: valueAt(cells, b) }
      if (conversion) {
        row.started = cells?.started[b] ?? 0
        row.converted = cells?.converted[b] ?? 0
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
    totals: kept.map(({ g, value }) => {
      const total: SavedResultTotal = { group: groupNames[g] ?? null, value }
      if (conversion) {
        total.started = groups[g]?.total.started ?? 0
        total.converted = groups[g]?.total.converted ?? 0
      }
      return total
    }),
    groupsOmitted: report.breakdown === undefined ? 0 : Math.max(0, ranked.length - GROUPS_MAX),
    groupsOverlap: report.breakdown?.by === 'segment',
    eventsRead,
  }
}

/** A cell's value under the metric (for distinct metrics, `distinct` holds the people counted). */
function valueOf (metric: SavedReport['metric']['type'], count: number, sum: number, started: number, converted: number, distinct: number): number {
  switch (metric) {
    case 'events': return count
    case 'uniqueVisitors': case 'uniqueProfiles': return distinct
    case 'sum': return sum
    case 'mean': return count === 0 ? 0 : sum / count
    case 'conversion': return started === 0 ? 0 : converted / started
  }
}

/** The name of the group of rows without the dimension's value (answered as null). */
const NULL_GROUP = '\u0000none'

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
