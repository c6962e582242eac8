// The lift of a treatment over its control, absolute (difference of means) and relative (ratio of
// means minus one), each with a two-sided interval at the given confidence and a fixed-horizon
// p-value. Conversion rates use the normal (z) interval with unpooled variances; means use Welch's
// t with the Welch–Satterthwaite degrees of freedom. The relative interval is the delta method's:
// Var(m_t / m_c) ≈ v_t / (n_t m_c²) + m_t² v_c / (n_c m_c⁴), with the normal quantile. Intervals
// are symmetric and assume each mean is close to normal: enough visitors.

import { normalQuantile, normalSf, studentTCdf, studentTQuantile } from './distributions.js'
import type { Summary } from './summary.js'

export interface Interval {
  estimate: number
  low: number
  high: number
  standardError: number
}

export interface Lift {
  absolute: Interval
  /** null when the control's mean is 0 (no ratio). */
  relative: Interval | null
  /** Two-sided p-value of "no difference", valid for one look at a sample size fixed in advance. */
  pValue: number
  /** Infinity for the z test. */
  degreesOfFreedom: number
}

export type Distribution = 'normal' | 't'

export function lift (control: Summary, treatment: Summary, distribution: Distribution, confidence = 0.95): Lift {
  const varianceControl = control.n > 0 ? control.variance / control.n : 0
  const varianceTreatment = treatment.n > 0 ? treatment.variance / treatment.n : 0
  const variance = varianceControl + varianceTreatment
  const standardError = Math.sqrt(variance)
  const estimate = treatment.mean - control.mean
  const degreesOfFreedom = distribution === 'normal' ? Infinity : welchDegreesOfFreedom(varianceControl, control.n, varianceTreatment, treatment.n)
  const tail = (1 - confidence) / 2
  const quantile = Number.isFinite(degreesOfFreedom) ? studentTQuantile(1 - tail, degreesOfFreedom) : normalQuantile(1 - tail)
  const absolute = { estimate, low: estimate - quantile * standardError, high: estimate + quantile * standardError, standardError }
  let pValue = 1
  if (standardError > 0) {
    const statistic = Math.abs(estimate) / standardError
    pValue = Number.isFinite(degreesOfFreedom) ? 2 * studentTCdf(-statistic, degreesOfFreedom) : 2 * normalSf(statistic)
  } else if (estimate !== 0) {
    pValue = 0
  }
  return { absolute, relative: relativeLift(control, treatment, confidence), pValue, degreesOfFreedom }
}

/** m_t / m_c − 1 with the delta method's interval (normal quantile). */
export function relativeLift (control: Summary, treatment: Summary, confidence = 0.95): Interval | null {
  if (control.mean === 0 || control.n === 0 || treatment.n === 0) return null
  const mc = control.mean
  const mt = treatment.mean
  const variance = treatment.variance / (treatment.n * mc * mc) + mt * mt * control.variance / (control.n * mc * mc * mc * mc)
  const standardError = Math.sqrt(variance)
  const estimate = mt / mc - 1
  const quantile = normalQuantile(1 - (1 - confidence) / 2)
  return { estimate, low: estimate - quantile * standardError, high: estimate + quantile * standardError, standardError }
}

/** ν = (a + b)² / (a² / (n_a − 1) + b² / (n_b − 1)) with a, b the variances of the two means. */
export function welchDegreesOfFreedom (varianceOfMeanA: number, nA: number, varianceOfMeanB: number, nB: number): number {
  const numerator = (varianceOfMeanA + varianceOfMeanB) ** 2
  const denominator = (nA > 1 ? varianceOfMeanA ** 2 / (nA - 1) : 0) + (nB > 1 ? varianceOfMeanB ** 2 / (nB - 1) : 0)
  return denominator > 0 ? numerator / denominator : Infinity
}
