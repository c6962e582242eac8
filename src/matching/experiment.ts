// Experiments: a campaign's variants compiled for assignment on the hot path. A visitor's bucket is
// a 32-bit hash of the campaign id, the experiment's salt and the visitor id (FNV-1a over the
// characters, then murmur3's finalizer so nearby ids spread); the account is not hashed because
// campaign ids are per account already and a set is compiled per account. Buckets below
// trafficBound are in the experiment, split by the variants' cumulative weights scaled to it, so
// raising trafficPercent keeps every visitor already in where they were. Computing a bucket reads
// the id's characters and allocates nothing; the result needs no store: a restart or another node
// computes the same variant. Variant i owns the buckets from its cumulative weight's start onward, for
// trafficPercent of its share (as GrowthBook lays out its ranges): raising the traffic lengthens every
// range where it ends, so every visitor already in stays in the same variant.

import { frozenJsonCopy } from './deep-freeze.js'
import { parseIsoMs } from './iso-time.js'
import type { CampaignDef, Experiment, ExperimentVariant } from './types.js'

const FNV_OFFSET = 0x811c9dc5
const FNV_PRIME = 0x01000193
const BUCKETS = 4_294_967_296

/** FNV-1a over the UTF-16 code units of `text`, continuing from `state`. */
export function hashString (state: number, text: string): number {
  let h = state
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, FNV_PRIME)
  }
  return h >>> 0
}

/** murmur3's 32-bit finalizer: every input bit moves every output bit. */
function mix (h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** The hash state for one experiment (or holdout): parts joined by a separator no id contains. */
export function seedOf (...parts: string[]): number {
  let h = FNV_OFFSET
  for (const part of parts) h = hashString(hashString(h, part), '\u0000')
  return h
}

/** The visitor's bucket in [0, 2³²) for this seed. */
export function bucketOf (seed: number, visitorId: string): number {
  return mix(hashString(seed, visitorId))
}

/** The visitor's variant, or null when the visitor is outside the experiment's traffic. */
export function assignVariant (experiment: Experiment, visitorId: string): ExperimentVariant | null {
  const bucket = bucketOf(experiment.seed, visitorId)
  const starts = experiment.starts
  const ends = experiment.ends
  for (let i = 0; i < starts.length; i++) if (bucket >= starts[i]! && bucket < ends[i]!) return experiment.variants[i]!
  return null
}

/** The variant of this id in the experiment, or null when it has none (a revision removed it). */
export function variantById (experiment: Experiment, id: string): ExperimentVariant | null {
  const variants = experiment.variants
  for (let i = 0; i < variants.length; i++) if (variants[i]!.id === id) return variants[i]!
  return null
}

/** Whether the visitor is in the account's global holdout of `percent` (0–50) per cent. */
export function inHoldout (seed: number, percent: number, visitorId: string): boolean {
  return percent > 0 && bucketOf(seed, visitorId) < percent / 100 * BUCKETS
}

/**
 * The campaign's experiment, or null without variants. `weights` (normalized, one per variant)
 * replaces the configured ones: the bandit's latest.
 */
export function compileExperiment (id: string, def: CampaignDef, content: unknown, weights: readonly number[] | null = null): Experiment | null {
  const variants = def.variants
  if (variants === undefined || variants.length === 0) return null
  const total = variants.reduce((sum, v) => sum + v.weight, 0)
  const shares = weights !== null && weights.length === variants.length ? weights : variants.map(v => v.weight / total)
  const traffic = (def.trafficPercent ?? 100) / 100
  const starts: number[] = []
  const ends: number[] = []
  let cumulative = 0
  for (let i = 0; i < shares.length; i++) {
    const start = Math.round(cumulative * BUCKETS)
    cumulative += shares[i]!
    // The last range ends at 2³² exactly when the traffic is whole (rounding must not leave a gap).
    const end = traffic === 1 && i === shares.length - 1 ? BUCKETS : Math.round(start + traffic * shares[i]! * BUCKETS)
    starts.push(start)
    ends.push(traffic === 1 && i < shares.length - 1 ? Math.round(cumulative * BUCKETS) : end)
  }
  return Object.freeze({
    campaignId: id,
    revision: def.revision ?? 1,
    sinceMs: def.revisionSince === undefined ? 0 : parseIsoMs(def.revisionSince) ?? 0,
    seed: seedOf(id, def.salt ?? ''),
    starts: Object.freeze(starts),
    ends: Object.freeze(ends),
    variants: Object.freeze(variants.map((v, index) => Object.freeze({
      id: v.id,
      index,
      control: v.control === true,
      content: v.content === undefined ? content : frozenJsonCopy(v.content),
    }))),
    goals: Object.freeze((def.goals ?? []).map(g => Object.freeze({ ...g }))),
    allocation: def.allocation ?? 'fixed',
    weights: Object.freeze([...shares]),
  })
}
