// Trigger dimensions (event kind, platform, device) as bit masks, so testing a candidate's
// trigger is an AND on a field of its entry instead of a Set lookup that touches more memory.
// Per CampaignSet, the 29 values most used in triggers get a bit each; every other string
// shares RARE_BIT (entries listing such values keep a Set that is consulted only then), and a
// missing or non-string value gets MISSING_BIT, which only unrestricted entries carry.

export const MISSING_BIT = 1
export const RARE_BIT = 1 << 30
export const ANY_VALUE = 0x7fffffff
const COMMON_VALUES = 29

export type Bits = ReadonlyMap<unknown, number>

export function assignBits (lists: ReadonlyArray<readonly string[] | undefined>): Bits {
  const counts = new Map<string, number>()
  for (const list of lists) {
    if (list !== undefined) for (const v of new Set(list)) counts.set(v, (counts.get(v) ?? 0) + 1)
  }
  const common = [...counts].sort((a, b) => b[1] - a[1]).slice(0, COMMON_VALUES)
  return new Map(common.map(([v], i) => [v, 1 << (i + 1)]))
}

export function bitOf (bits: Bits, value: unknown): number {
  const bit = bits.get(value)
  if (bit !== undefined) return bit
  return typeof value === 'string' ? RARE_BIT : MISSING_BIT
}

export interface Mask {
  mask: number
  // Only for entries that list values without a bit of their own; checked when RARE_BIT hits.
  rare: ReadonlySet<unknown> | null
}

export const ANY_MASK: Mask = { mask: ANY_VALUE, rare: null }

export function maskOf (bits: Bits, list: readonly string[] | null | undefined): Mask {
  if (list === null || list === undefined) return ANY_MASK
  let mask = 0
  let rare = false
  for (const v of list) {
    const bit = bits.get(v)
    if (bit === undefined) rare = true
    else mask |= bit
  }
  return rare ? { mask: mask | RARE_BIT, rare: new Set(list) } : { mask, rare: null }
}
