// CUPED (Deng, Xu, Kohavi and Walker, WSDM 2013): each visitor's outcome y is adjusted by the same
// measure x over the visitor's behaviour before first exposure, y' = y − θ (x − x̄), with
// θ = cov(y, x) / var(x) over all visitors of all variants together (one θ, so the adjustment
// cannot create a difference the assignment did not). Assignment is independent of x, so the
// adjusted means estimate the same difference with variance multiplied by about 1 − ρ², ρ the
// correlation of x and y.

import type { Sums, Summary } from './summary.js'

/** θ over the pooled visitors of every variant; 0 when x does not vary. */
export function cupedTheta (variants: readonly Sums[]): number {
  let n = 0; let sumX = 0; let sumY = 0; let sumX2 = 0; let sumXY = 0
  for (const v of variants) {
    n += v.n
    sumX += v.sumX
    sumY += v.sumY
    sumX2 += v.sumX2
    sumXY += v.sumXY
  }
  if (n < 2) return 0
  const varianceX = sumX2 - sumX * sumX / n
  const covariance = sumXY - sumX * sumY / n
  return varianceX > 0 ? covariance / varianceX : 0
}

/** Each variant's adjusted summary: mean ȳ − θ (x̄ − x̄_all), variance v_y − 2θ c_xy + θ² v_x. */
export function cupedSummaries (variants: readonly Sums[]): { theta: number, summaries: Summary[] } {
  const theta = cupedTheta(variants)
  let n = 0; let sumX = 0
  for (const v of variants) {
    n += v.n
    sumX += v.sumX
  }
  const meanXAll = n > 0 ? sumX / n : 0
  const summaries = variants.map(v => {
    if (v.n === 0) return { n: 0, mean: 0, variance: 0 }
    const meanY = v.sumY / v.n
    const meanX = v.sumX / v.n
    const denominator = v.n > 1 ? v.n - 1 : 1
    const varianceY = (v.sumY2 - v.n * meanY * meanY) / denominator
    const varianceX = (v.sumX2 - v.n * meanX * meanX) / denominator
    const covariance = (v.sumXY - v.n * meanX * meanY) / denominator
    return {
      n: v.n,
      mean: meanY - theta * (meanX - meanXAll),
      variance: Math.max(0, varianceY - 2 * theta * covariance + theta * theta * varianceX),
    }
  })
  return { theta, summaries }
}
