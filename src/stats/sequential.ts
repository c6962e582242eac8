// An always-valid p-value for the difference of two means: the mixture sequential probability ratio
// test (mSPRT) of Johari, Koomen, Pekelis and Walsh ("Peeking at A/B tests", KDD 2017; the test
// Optimizely's stats engine runs), with a normal mixture N(0, τ²) over the true difference δ:
//
//   Λ = sqrt(V / (V + τ²)) · exp(τ² δ̂² / (2 V (V + τ²)))
//
// where δ̂ is the observed difference and V its variance (v_c / n_c + v_t / n_t). Under "no
// difference" Λ is a nonnegative martingale with mean 1, so by Ville's inequality the chance that
// 1 / Λ ever falls to α, at any number of looks at any times, is at most α: p = min(1, 1 / Λ) may be
// read every day. The running minimum over looks (kept by the caller) is the always-valid p-value
// proper; each look's own value is never smaller than it.
//
// τ² is chosen as GrowthBook chooses its confidence sequences' ρ (Howard et al. 2021, eq. 14): the
// boundary is tightest when each arm has `tuningVisitors` visitors:
//   ρ² = (−2 ln α + ln(−2 ln α + 1)) / N*,  τ² = ρ² (v_c + v_t).
// The guarantee holds for any τ²; the choice only moves where the test is most powerful.
// Assumptions: visitors independent, each mean close to normal (its variance estimated).

import type { Summary } from './summary.js'

export const SEQUENTIAL_TUNING_VISITORS = 5_000

export interface SequentialTest {
  /** The mixture likelihood ratio Λ. */
  likelihoodRatio: number
  /** min(1, 1 / Λ). */
  pValue: number
  /** The always-valid 1 − α confidence interval of the difference (the set of δ0 where Λ(δ0) < 1 / α). */
  low: number
  high: number
  mixtureVariance: number
}

export function mixtureVariance (control: Summary, treatment: Summary, alpha: number, tuningVisitors = SEQUENTIAL_TUNING_VISITORS): number {
  const a = -2 * Math.log(alpha)
  return (a + Math.log(a + 1)) / tuningVisitors * (control.variance + treatment.variance)
}

/** Λ for an observed difference with variance V under a N(0, τ²) mixture. */
export function mixtureLikelihoodRatio (difference: number, variance: number, tau2: number): number {
  if (!(variance > 0)) return difference === 0 ? 1 : Infinity
  const total = variance + tau2
  return Math.sqrt(variance / total) * Math.exp(tau2 * difference * difference / (2 * variance * total))
}

export function sequentialTest (control: Summary, treatment: Summary, alpha = 0.05, tuningVisitors = SEQUENTIAL_TUNING_VISITORS): SequentialTest {
  const difference = treatment.mean - control.mean
  const variance = (control.n > 0 ? control.variance / control.n : 0) + (treatment.n > 0 ? treatment.variance / treatment.n : 0)
  const tau2 = mixtureVariance(control, treatment, alpha, tuningVisitors)
  const likelihoodRatio = mixtureLikelihoodRatio(difference, variance, tau2)
  // Λ(δ0) = 1/α solved for |δ̂ − δ0|: the half-width of the confidence sequence at this look.
  const halfWidth = variance > 0 && tau2 > 0
    ? Math.sqrt(2 * variance * (variance + tau2) / tau2 * Math.log(Math.sqrt((variance + tau2) / variance) / alpha))
    : Infinity
  return {
    likelihoodRatio,
    pValue: Math.min(1, 1 / likelihoodRatio),
    low: difference - halfWidth,
    high: difference + halfWidth,
    mixtureVariance: tau2,
  }
}
