// Thompson sampling for conversion arms: each variant's rate has a Beta(1 + conversions,
// 1 + visitors − conversions) posterior (uniform prior); a variant's weight is the posterior
// probability that it is the best, estimated from `draws` joint draws, then bounded below so no
// variant stops being measured: each keeps at least min(5 %, 1 / (2k)) of the traffic of k variants
// (the rest is shared by the probabilities). The source of randomness is passed in, so a
// reweighting is reproducible from its inputs and its seed.

import type { Random } from './random.js'

export const BANDIT_DRAWS = 10_000
export const BANDIT_MIN_SHARE = 0.05

export interface Arm {
  visitors: number
  conversions: number
}

/** The floor of each of k variants' share: min(5 %, 1 / (2k)). */
export function banditMinShare (k: number): number {
  return Math.min(BANDIT_MIN_SHARE, 1 / (2 * k))
}

/** P(arm i has the highest rate) under the Beta posteriors, by Monte Carlo. */
export function probabilityBest (arms: readonly Arm[], random: Random, draws = BANDIT_DRAWS): number[] {
  const wins = new Array<number>(arms.length).fill(0)
  for (let d = 0; d < draws; d++) {
    let best = -1
    let bestValue = -1
    for (let i = 0; i < arms.length; i++) {
      const arm = arms[i]!
      const failures = Math.max(0, arm.visitors - arm.conversions)
      const value = random.beta(1 + arm.conversions, 1 + failures)
      if (value > bestValue) {
        bestValue = value
        best = i
      }
    }
    wins[best]!++
  }
  return wins.map(w => w / draws)
}

/** The weights (summing to 1) Thompson sampling gives the arms, each at least banditMinShare(k). */
export function thompsonWeights (arms: readonly Arm[], random: Random, draws = BANDIT_DRAWS): number[] {
  if (arms.length === 0) return []
  const floor = banditMinShare(arms.length)
  const rest = 1 - floor * arms.length
  return probabilityBest(arms, random, draws).map(p => floor + rest * p)
}
