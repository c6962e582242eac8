// Behaviour over time windows, kept as time-bucketed counters: per window spec, at most
// BUCKETS_PER_WINDOW buckets, each `withinMs / BUCKETS_PER_WINDOW` long. So an entity's history is
// bounded by the configured rules, whatever the traffic, and an event leaves its window at the end of
// its bucket (at most 1/60 of the window late: 7d windows move by the 2.8 h, 1h windows by the minute).
//
// Stored per entity as `windows[specKey] = [bucket, value, bucket, value, …]`, oldest first;
// an all-time spec keeps a single pair [0, total].

import type { Predicate, MatchContext } from '../matching/index.js'

export const BUCKETS_PER_WINDOW = 60
export const WITHIN_MAX_MS = 90 * 86_400_000

export interface WindowSpec {
  /** Stable id of the spec (a hash of its definition): the key of its counters in entity state. */
  key: string
  fact: 'count' | 'sum'
  event: string
  field: string | null
  where: Predicate | null
  /** null: all time. */
  withinMs: number | null
  bucketMs: number
  /**
   * Live events before this time are not counted (0: all are): set while a backfill rebuilds this
   * spec's counters from the event log up to it (src/jobs/segment-backfill.ts), so no event counts twice.
   */
  countsFromMs: number
}

export type Windows = Record<string, number[]>

const UNITS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 }

/** "15m", "24h", "7d" → milliseconds, or null when malformed or over 90 days. */
export function parseWithin (text: string): number | null {
  const match = /^([1-9][0-9]{0,4})([mhd])$/.exec(text)
  if (match === null) return null
  const ms = Number(match[1]) * UNITS[match[2]!]!
  return ms <= WITHIN_MAX_MS ? ms : null
}

function bucketOf (spec: WindowSpec, nowMs: number): number {
  return spec.withinMs === null ? 0 : Math.floor(nowMs / spec.bucketMs)
}

/** Count an event into every spec it matches. Returns whether anything changed. */
export function recordEvent (windows: Windows, specs: readonly WindowSpec[], ctx: MatchContext): boolean {
  let changed = false
  const kind = ctx.event.event
  for (const spec of specs) {
    if (spec.event !== kind || ctx.nowMs < spec.countsFromMs) continue
    if (spec.where !== null && !spec.where(ctx)) continue
    let amount = 1
    if (spec.fact === 'sum') {
      const value = ctx.event[spec.field!]
      if (typeof value !== 'number' || !Number.isFinite(value)) continue
      amount = value
    }
    const pairs = windows[spec.key] ??= []
    add(pairs, bucketOf(spec, ctx.nowMs), amount)
    prune(pairs, spec, ctx.nowMs)
    changed = true
  }
  return changed
}

/**
 * Add to a bucket, keeping buckets oldest first. The common case is the newest bucket; an imported
 * event (its historical time, src/http/import-rows.ts) may fall in an older one, found from the end.
 */
function add (pairs: number[], bucket: number, amount: number): void {
  let at = pairs.length - 2
  while (at >= 0 && pairs[at]! > bucket) at -= 2
  if (at >= 0 && pairs[at] === bucket) pairs[at + 1] = pairs[at + 1]! + amount
  else if (at === pairs.length - 2) pairs.push(bucket, amount)
  else pairs.splice(at + 2, 0, bucket, amount)
}

/**
 * Add a backfill's counters (events before `spec.countsFromMs`, read from the log) to the live ones.
 * Live buckets that end before that time are dropped first, once (`first`): no live event older than it
 * was counted, so they are left over from an earlier rule with this spec.
 */
export function addBackfilled (windows: Windows, spec: WindowSpec, pairs: readonly number[], first: boolean): void {
  const live = windows[spec.key] ??= []
  if (first && spec.withinMs !== null) {
    const from = bucketOf(spec, spec.countsFromMs)
    let drop = 0
    while (drop < live.length && live[drop]! < from) drop += 2
    if (drop > 0) live.splice(0, drop)
  }
  for (let i = 0; i < pairs.length; i += 2) add(live, pairs[i]!, pairs[i + 1]!)
  if (live.length === 0) delete windows[spec.key]
}

/** The spec's value now: the sum of its buckets still inside the window. */
export function windowValue (pairs: readonly number[] | undefined, spec: WindowSpec, nowMs: number): number {
  if (pairs === undefined) return 0
  const oldest = bucketOf(spec, nowMs) - BUCKETS_PER_WINDOW + 1
  let sum = 0
  for (let i = 0; i < pairs.length; i += 2) if (spec.withinMs === null || pairs[i]! >= oldest) sum += pairs[i + 1]!
  return sum
}

function prune (pairs: number[], spec: WindowSpec, nowMs: number): void {
  if (spec.withinMs === null) return
  const oldest = bucketOf(spec, nowMs) - BUCKETS_PER_WINDOW + 1
  let drop = 0
  while (drop < pairs.length && pairs[drop]! < oldest) drop += 2
  if (drop > 0) pairs.splice(0, drop)
}

/** Drop expired buckets and the counters of specs no longer configured. */
export function pruneWindows (windows: Windows, specs: ReadonlyMap<string, WindowSpec>, nowMs: number): void {
  for (const key of Object.keys(windows)) {
    const spec = specs.get(key)
    if (spec === undefined) delete windows[key]
    else {
      prune(windows[key]!, spec, nowMs)
      if (windows[key]!.length === 0) delete windows[key]
    }
  }
}

/** When the oldest counted bucket leaves its window (membership may change then), or 0 for never. */
export function nextExpiryMs (windows: Windows, specs: ReadonlyMap<string, WindowSpec>): number {
  let next = 0
  for (const key in windows) {
    const spec = specs.get(key)
    const pairs = windows[key]!
    if (spec === undefined || spec.withinMs === null || pairs.length === 0) continue
    const leavesMs = (pairs[0]! + BUCKETS_PER_WINDOW) * spec.bucketMs
    if (next === 0 || leavesMs < next) next = leavesMs
  }
  return next
}

/** Sum several entities' counters (a profile over its devices), bucket by bucket. */
export function mergeWindows (all: readonly Windows[]): Windows {
  const out: Windows = {}
  for (const windows of all) {
    for (const key in windows) {
      const merged = new Map<number, number>()
      const existing = out[key]
      if (existing !== undefined) for (let i = 0; i < existing.length; i += 2) merged.set(existing[i]!, existing[i + 1]!)
      const pairs = windows[key]!
      for (let i = 0; i < pairs.length; i += 2) merged.set(pairs[i]!, (merged.get(pairs[i]!) ?? 0) + pairs[i + 1]!)
      out[key] = [...merged].sort((a, b) => a[0] - b[0]).flat()
    }
  }
  return out
}
