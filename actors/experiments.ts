// What a visitor keeps of the experiments it was exposed to, and what it tells the counters: its
// first exposure to each (with its behaviour before it, the covariate CUPED uses) and each change of
// a goal's outcome inside the goal's window after that exposure. Counting is by deltas, so the
// counters hold sums over visitors (n, Σy, Σy², Σx, Σx², Σxy per goal) that add up exactly across
// nodes and days (src/stats/summary.ts reads them).
//
// The account's global holdout is kept the same way under HOLDOUT_KEY, with the two groups
// "holdout" and "personalized" and fixed purchase goals, so its comparison is computed like any
// experiment's.

import type { Experiment, GoalDef } from '../src/matching/index.js'

/** One experiment of one visitor: revision, variant, first exposure, covariate and outcome per goal. */
export interface Exposure {
  r: number
  v: string
  t: number
  x: number[]
  y: number[]
}

export interface ExperimentCounter {
  /** A visitor's first exposure in this revision: one more visitor, with its covariate per goal. */
  exposed (account: string, campaignId: string, revision: number, variant: string, goals: number, x: readonly number[], nowMs: number): void
  /** Goal `goal`'s outcome of a visitor with covariate x moved from y0 to y1. */
  outcome (account: string, campaignId: string, revision: number, variant: string, goals: number, goal: number, x: number, y0: number, y1: number, nowMs: number): void
}

export const HOLDOUT_KEY = '$holdout'
export const HOLDOUT_GOALS: readonly GoalDef[] = Object.freeze([
  Object.freeze({ event: 'purchase', metric: 'conversion', windowDays: 30 } as const),
  Object.freeze({ event: 'purchase', metric: 'revenue', windowDays: 30 } as const),
])

const DAY_MS = 86_400_000

interface Behaviour {
  counts: Record<string, number>
  purchases: number
  totalSpent: number
}

interface GoalEvent {
  event: string
  orderTotal?: number
  [field: string]: unknown
}

/** The event's amount for a revenue goal: orderTotal, else a numeric `value`, else 0. */
function amountOf (event: GoalEvent): number {
  if (typeof event.orderTotal === 'number') return event.orderTotal
  return typeof event.value === 'number' && Number.isFinite(event.value) ? event.value : 0
}

/**
 * The visitor's behaviour before exposure, per goal: for conversion and count goals the number of
 * the goal's events seen before (the current event left out), for revenue the amount spent before.
 */
export function covariates (goals: readonly GoalDef[], behaviour: Behaviour, current: GoalEvent): number[] {
  const x: number[] = []
  for (const goal of goals) {
    const same = current.event === goal.event
    if (goal.metric === 'revenue') x.push(goal.event === 'purchase' ? behaviour.totalSpent - (same ? amountOf(current) : 0) : 0)
    else x.push(Math.max(0, (Object.hasOwn(behaviour.counts, goal.event) ? behaviour.counts[goal.event]! : 0) - (same ? 1 : 0)))
  }
  return x
}

/** A new exposure record, told to the counter. */
export function expose (counter: ExperimentCounter | null, account: string, key: string, revision: number, variant: string, goals: readonly GoalDef[], behaviour: Behaviour, event: GoalEvent, nowMs: number): Exposure {
  const x = covariates(goals, behaviour, event)
  const exposure: Exposure = { r: revision, v: variant, t: nowMs, x, y: x.map(() => 0) }
  if (counter !== null) counter.exposed(account, key, revision, variant, goals.length, x, nowMs)
  return exposure
}

/** Count the event toward the goals of one exposure (inside each goal's window). */
export function countGoals (counter: ExperimentCounter | null, account: string, key: string, exposure: Exposure, goals: readonly GoalDef[], event: GoalEvent, nowMs: number): void {
  for (let g = 0; g < goals.length && g < exposure.y.length; g++) {
    const goal = goals[g]!
    if (goal.event !== event.event || nowMs < exposure.t || nowMs - exposure.t >= goal.windowDays * DAY_MS) continue
    const y0 = exposure.y[g]!
    const y1 = goal.metric === 'conversion' ? 1 : goal.metric === 'count' ? y0 + 1 : y0 + amountOf(event)
    if (y1 === y0) continue
    exposure.y[g] = y1
    if (counter !== null) counter.outcome(account, key, exposure.r, exposure.v, goals.length, g, exposure.x[g] ?? 0, y0, y1, nowMs)
  }
}

/**
 * Count an event toward every experiment the visitor was exposed to. `experimentOf` gives the
 * current compiled experiment of a campaign (an exposure of an older revision counts no more: its
 * results are closed).
 */
export function countAllGoals (counter: ExperimentCounter | null, account: string, exposures: Record<string, Exposure>, experimentOf: (id: string) => Experiment | undefined, event: GoalEvent, nowMs: number): void {
  for (const key in exposures) {
    const exposure = exposures[key]!
    if (key === HOLDOUT_KEY) {
      countGoals(counter, account, key, exposure, HOLDOUT_GOALS, event, nowMs)
      continue
    }
    const experiment = experimentOf(key)
    if (experiment !== undefined && experiment.revision === exposure.r) countGoals(counter, account, key, exposure, experiment.goals, event, nowMs)
  }
}
