// An experiment's results from the day buckets of its revision (src/reports/counters.ts keeps, per
// variant, the visitors exposed and the sums of their goals' outcomes and pre-exposure covariates):
// per variant its visitors and each goal's total and rate or mean; per variant against the baseline
// (the control, else the first variant) and per goal the lift, absolute and relative with 95 %
// intervals, the fixed-horizon p-value, the always-valid sequential p-value (the smallest over the
// daily looks since the revision started) and its confidence interval, and the CUPED-adjusted lift;
// the sample-ratio check of the visitors against the weights; the day-by-day lift of the primary goal
// for the chart; warnings. Every number comes from sums, so buckets of several nodes add up first.

import { cupedSummaries } from '../stats/cuped.js'
import { lift, type Interval } from '../stats/lift.js'
import { sequentialTest } from '../stats/sequential.js'
import { sampleRatioCheck, type SampleRatioCheck } from '../stats/srm.js'
import { meanSummary, proportionSummary, type Sums, type Summary } from '../stats/summary.js'
import { DAY_MS, experimentKey, SUMS_PER_GOAL, type StoredBucket } from './counters.js'

/** Fewer visitors than this in a variant, or fewer conversions, and the results carry a warning. */
export const VISITORS_MIN = 100
export const CONVERSIONS_MIN = 10
export const CONFIDENCE = 0.95

export interface ResultsGoal {
  event: string
  metric: 'conversion' | 'revenue' | 'count'
  windowDays: number
}

/** What the results are computed for. */
export interface ExperimentDesign {
  campaignId: string
  revision: number
  variants: ReadonlyArray<{ id: string, control: boolean }>
  /** Normalized, one per variant: the shares assignment aims at (null: unknown, no sample-ratio check). */
  weights: readonly number[] | null
  goals: readonly ResultsGoal[]
  /** The weights move with the data (a bandit): no sample-ratio check against today's. */
  adaptive?: boolean
}

interface GoalTotals { event: string, metric: string, total: number, mean: number }
interface VariantResult { id: string, control: boolean, weight: number | null, visitors: number, goals: GoalTotals[] }
interface LiftResult {
  absolute: Interval
  relative: Interval | null
  pValue: number
  sequential: { pValue: number, low: number, high: number }
  cuped: { absolute: Interval, relative: Interval | null, theta: number }
}
interface Comparison { variant: string, goal: number, event: string, metric: string, lift: LiftResult | null }
interface SeriesPoint { t: string, visitors: number[], lift: Array<{ estimate: number, low: number, high: number } | null> }

export interface ExperimentResults {
  campaignId: string
  revision: number
  baseline: string
  variants: VariantResult[]
  comparisons: Comparison[]
  sampleRatio: SampleRatioCheck | null
  series: SeriesPoint[]
  warnings: Array<{ code: 'sample_ratio_mismatch' | 'too_few_visitors' | 'too_few_conversions', message: string }>
}

/** The variant's sums for one goal (index) out of a bucket row of [n, per goal 5 sums]. */
function goalSums (row: readonly number[] | undefined, goal: number): Sums {
  const at = 1 + SUMS_PER_GOAL * goal
  return {
    n: row?.[0] ?? 0,
    sumY: row?.[at] ?? 0,
    sumY2: row?.[at + 1] ?? 0,
    sumX: row?.[at + 2] ?? 0,
    sumX2: row?.[at + 3] ?? 0,
    sumXY: row?.[at + 4] ?? 0,
  }
}

function summaryOf (sums: Sums, metric: string): Summary {
  return metric === 'conversion' ? proportionSummary(sums.n, sums.sumY) : meanSummary(sums)
}

/** Each variant's row [n, sums…] added over the buckets starting before `untilMs`. */
function totals (design: ExperimentDesign, buckets: ReadonlyArray<[number, StoredBucket]>, untilMs: number): number[][] {
  const keys = design.variants.map(v => experimentKey(design.campaignId, design.revision, v.id))
  const rows = keys.map(() => new Array<number>(1 + SUMS_PER_GOAL * design.goals.length).fill(0))
  for (const [startMs, bucket] of buckets) {
    if (startMs >= untilMs) continue
    for (const [key, ...sums] of bucket.experiments ?? []) {
      const i = keys.indexOf(key)
      if (i === -1) continue
      const row = rows[i]!
      for (let j = 0; j < row.length && j < sums.length; j++) row[j]! += sums[j]!
    }
  }
  return rows
}

function compare (rows: readonly number[][], baseline: number, variant: number, goal: number, metric: string, minimumSequentialP: number): LiftResult | null {
  const control = goalSums(rows[baseline], goal)
  const treatment = goalSums(rows[variant], goal)
  if (control.n < 2 || treatment.n < 2) return null
  const distribution = metric === 'conversion' ? 'normal' : 't'
  const plain = lift(summaryOf(control, metric), summaryOf(treatment, metric), distribution, CONFIDENCE)
  const sequential = sequentialTest(summaryOf(control, metric), summaryOf(treatment, metric), 1 - CONFIDENCE)
  // CUPED: θ over every variant of the experiment, adjusted summaries of these two.
  const all = rows.map(row => goalSums(row, goal))
  const { theta, summaries } = cupedSummaries(all)
  const adjusted = lift(summaries[baseline]!, summaries[variant]!, distribution, CONFIDENCE)
  return {
    absolute: plain.absolute,
    relative: plain.relative,
    pValue: plain.pValue,
    sequential: { pValue: Math.min(minimumSequentialP, sequential.pValue), low: sequential.low, high: sequential.high },
    cuped: { absolute: adjusted.absolute, relative: adjusted.relative, theta },
  }
}

/**
 * The results of the design's revision from its day buckets (any order), as of `nowMs`. The
 * sequential p-value is the smallest of the looks at the end of each day since the first bucket and
 * now: reading it every day does not inflate false positives.
 */
export function experimentResults (design: ExperimentDesign, buckets: ReadonlyMap<number, StoredBucket>, nowMs: number): ExperimentResults {
  const ordered = [...buckets].sort(([a], [b]) => a - b)
  const variants = design.variants
  const controlAt = variants.findIndex(v => v.control)
  const baseline = controlAt === -1 ? 0 : controlAt
  const goals = design.goals

  // Looks at the end of each day: the running minimum of each comparison's sequential p-value, and the
  // primary goal's lift for the chart.
  const minimumP = new Map<string, number>()
  const series: SeriesPoint[] = []
  const firstDay = ordered.length === 0 ? nowMs : ordered[0]![0]
  for (let dayMs = firstDay; dayMs < nowMs; dayMs += DAY_MS) {
    const untilMs = Math.min(dayMs + DAY_MS, nowMs)
    const rows = totals(design, ordered, untilMs)
    for (let v = 0; v < variants.length; v++) {
      if (v === baseline) continue
      for (let g = 0; g < goals.length; g++) {
        const result = compare(rows, baseline, v, g, goals[g]!.metric, 1)
        if (result === null) continue
        const key = `${v}/${g}`
        minimumP.set(key, Math.min(minimumP.get(key) ?? 1, result.sequential.pValue))
      }
    }
    series.push({
      t: new Date(dayMs).toISOString(),
      visitors: rows.map(row => row[0]!),
      lift: variants.map((_, v) => {
        if (v === baseline || goals.length === 0) return null
        const result = compare(rows, baseline, v, 0, goals[0]!.metric, 1)
        return result === null ? null : { estimate: result.absolute.estimate, low: result.absolute.low, high: result.absolute.high }
      }),
    })
  }

  const rows = totals(design, ordered, Infinity)
  const comparisons: Comparison[] = []
  for (let v = 0; v < variants.length; v++) {
    if (v === baseline) continue
    for (let g = 0; g < goals.length; g++) {
      const goal = goals[g]!
      comparisons.push({ variant: variants[v]!.id, goal: g, event: goal.event, metric: goal.metric, lift: compare(rows, baseline, v, g, goal.metric, minimumP.get(`${v}/${g}`) ?? 1) })
    }
  }

  const visitors = rows.map(row => row[0]!)
  const sampleRatio = design.weights === null || design.adaptive === true ? null : sampleRatioCheck(visitors, design.weights)
  const warnings: ExperimentResults['warnings'] = []
  if (sampleRatio?.mismatch === true) {
    warnings.push({ code: 'sample_ratio_mismatch', message: `The visitors per variant do not match the weights (chi-square p = ${sampleRatio.pValue.toExponential(2)} < 0.001): assignment or recording is broken; do not trust the lift.` })
  }
  const fewest = Math.min(...visitors)
  if (fewest < VISITORS_MIN) warnings.push({ code: 'too_few_visitors', message: `A variant has ${fewest} visitors; the intervals assume at least ${VISITORS_MIN} per variant.` })
  if (goals[0]?.metric === 'conversion') {
    const fewestConversions = Math.min(...rows.map(row => goalSums(row, 0).sumY))
    if (fewestConversions < CONVERSIONS_MIN) warnings.push({ code: 'too_few_conversions', message: `A variant has ${fewestConversions} conversions of the primary goal; the intervals assume at least ${CONVERSIONS_MIN}.` })
  }

  return {
    campaignId: design.campaignId,
    revision: design.revision,
    baseline: variants[baseline]?.id ?? '',
    variants: variants.map((variant, v) => ({
      id: variant.id,
      control: variant.control,
      weight: design.weights?.[v] ?? null,
      visitors: visitors[v]!,
      goals: goals.map((goal, g) => {
        const sums = goalSums(rows[v], g)
        return { event: goal.event, metric: goal.metric, total: sums.sumY, mean: sums.n > 0 ? sums.sumY / sums.n : 0 }
      }),
    })),
    comparisons,
    sampleRatio,
    series,
    warnings,
  }
}
