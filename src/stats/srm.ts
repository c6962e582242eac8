// The sample-ratio-mismatch check: Pearson's chi-square test of the visitors each variant got against
// the shares its weights promised. A mismatch means the assignment or the recording is broken (a
// variant that crashes before its exposure is recorded, a bot filtered on one side), and then no lift
// it shows can be trusted. Flagged at p < 0.001, as GrowthBook and Optimizely do: checked at every
// look, a stricter threshold keeps false alarms rare.

import { chiSquareSf } from './distributions.js'

export const SRM_THRESHOLD = 0.001

export interface SampleRatioCheck {
  chiSquare: number
  degreesOfFreedom: number
  pValue: number
  mismatch: boolean
}

/** counts[i] visitors seen in variant i, expected in proportion to weights[i] (> 0). */
export function sampleRatioCheck (counts: readonly number[], weights: readonly number[]): SampleRatioCheck {
  let total = 0
  let weightTotal = 0
  for (let i = 0; i < counts.length; i++) {
    total += counts[i]!
    weightTotal += weights[i]!
  }
  if (counts.length < 2 || total === 0 || !(weightTotal > 0)) return { chiSquare: 0, degreesOfFreedom: Math.max(0, counts.length - 1), pValue: 1, mismatch: false }
  let chiSquare = 0
  for (let i = 0; i < counts.length; i++) {
    const expected = total * weights[i]! / weightTotal
    const gap = counts[i]! - expected
    chiSquare += gap * gap / expected
  }
  const degreesOfFreedom = counts.length - 1
  const pValue = chiSquareSf(chiSquare, degreesOfFreedom)
  return { chiSquare, degreesOfFreedom, pValue, mismatch: pValue < SRM_THRESHOLD }
}
