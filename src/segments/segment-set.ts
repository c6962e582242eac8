// An account's segments compiled together: the computed ones (with a rule) with their tests, the
// window specs their rules read (shared between rules), and the manual ones by name. Immutable;
// the segment catalog swaps in a new set when a segment changes, with a new version number.

import type { WindowSpec } from './windows.js'
import { compileRule, type SegmentContext, type SegmentDef, type SegmentTest } from './rules.js'

export interface ComputedSegment {
  name: string
  test: SegmentTest
}

export interface SegmentSet {
  /** Changes whenever the account's segments change: entities evaluated under another version are re-evaluated. */
  readonly version: number
  readonly computed: readonly ComputedSegment[]
  readonly computedNames: ReadonlySet<string>
  readonly specs: readonly WindowSpec[]
  readonly specsByKey: ReadonlyMap<string, WindowSpec>
  /**
   * Segments whose backfill runs, and those reading a window one rebuilds: their enters and exits write
   * no audience event (src/jobs/segment-backfill.ts).
   */
  readonly backfilling: ReadonlySet<string>
}

/** A running backfill as the compiled set sees it: its windows count live events from `fromMs` on. */
export interface BackfillHold {
  /** The backfill's id (its segment's windows' too). */
  id: string
  fromMs: number
  specKeys: readonly string[]
}

export const EMPTY_SEGMENTS: SegmentSet = {
  version: 0, computed: [], computedNames: new Set(), specs: [], specsByKey: new Map(), backfilling: new Set(),
}

const NO_HOLDS: ReadonlyMap<string, BackfillHold> = new Map()
const NO_WINDOWS: ReadonlyMap<string, string> = new Map()

/**
 * `holds`: the account's running backfills, by segment name; `windows`: the backfilled segments' own
 * windows (their last backfill's id), by segment name (the others read the account's shared ones).
 */
export function compileSegments (defs: ReadonlyMap<string, SegmentDef>, version: number, holds: ReadonlyMap<string, BackfillHold> = NO_HOLDS, windows: ReadonlyMap<string, string> = NO_WINDOWS): SegmentSet {
  const specsByKey = new Map<string, WindowSpec>()
  const computed: ComputedSegment[] = []
  const used = new Map<string, Set<string>>()
  for (const [name, def] of [...defs].sort((a, b) => a[0] < b[0] ? -1 : 1)) {
    if (def.rule === undefined) continue
    const keys = new Set<string>()
    computed.push({ name, test: compileRule(def.rule, specsByKey, keys, windows.get(name)) })
    used.set(name, keys)
  }
  const backfilling = new Set(holds.keys())
  for (const hold of holds.values()) {
    for (const key of hold.specKeys) {
      const spec = specsByKey.get(key)
      if (spec !== undefined) spec.countsFromMs = Math.max(spec.countsFromMs, hold.fromMs)
      // Another segment reading a window being rebuilt is quiet until it is.
      for (const [name, keys] of used) if (keys.has(key)) backfilling.add(name)
    }
  }
  return {
    version,
    computed,
    backfilling,
    computedNames: new Set(computed.map(c => c.name)),
    specs: [...specsByKey.values()],
    specsByKey,
  }
}

/**
 * The computed segments the context qualifies for, in name order. Rules see the `segment` fact as it
 * was before this evaluation (manual segments and the previous computed ones), so the order of
 * evaluation never changes the result.
 */
export function evaluateSegments (set: SegmentSet, ctx: SegmentContext): string[] {
  const members: string[] = []
  for (const segment of set.computed) if (segment.test(ctx)) members.push(segment.name)
  return members
}

/** What changed between two sorted membership lists. */
export function membershipChanges (before: readonly string[], after: readonly string[]): { entered: string[], exited: string[] } {
  const was = new Set(before)
  const is = new Set(after)
  return { entered: after.filter(name => !was.has(name)), exited: before.filter(name => !is.has(name)) }
}
