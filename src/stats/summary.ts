// What the statistics read of a variant: sums over its visitors, so that the counters of several
// nodes (or days) add up exactly before any statistic is computed. `y` is the outcome after first
// exposure (0 or 1 for a conversion, the amount for revenue, the number for a count); `x` is the same
// measure over the visitor's behaviour before first exposure, the covariate CUPED uses.

export interface Sums {
  n: number
  sumY: number
  sumY2: number
  sumX: number
  sumX2: number
  sumXY: number
}

/** The mean, per-visitor variance and size the comparisons use. */
export interface Summary {
  n: number
  mean: number
  variance: number
}

export function emptySums (): Sums {
  return { n: 0, sumY: 0, sumY2: 0, sumX: 0, sumX2: 0, sumXY: 0 }
}

/** Adds b into a (a is modified). */
export function addSums (a: Sums, b: Sums): Sums {
  a.n += b.n
  a.sumY += b.sumY
  a.sumY2 += b.sumY2
  a.sumX += b.sumX
  a.sumX2 += b.sumX2
  a.sumXY += b.sumXY
  return a
}

/** Adds one visitor's outcome y and pre-exposure covariate x (a is modified). */
export function addVisitor (a: Sums, y: number, x: number): Sums {
  a.n++
  a.sumY += y
  a.sumY2 += y * y
  a.sumX += x
  a.sumX2 += x * x
  a.sumXY += x * y
  return a
}

/**
 * A proportion's summary: the variance is p(1 − p), the Bernoulli variance the two-proportion z
 * interval uses (Wald, unpooled).
 */
export function proportionSummary (n: number, conversions: number): Summary {
  const mean = n > 0 ? conversions / n : 0
  return { n, mean, variance: mean * (1 - mean) }
}

/** A mean's summary: the unbiased sample variance (n − 1), as Welch's test uses. */
export function meanSummary (sums: Sums): Summary {
  const { n, sumY, sumY2 } = sums
  const mean = n > 0 ? sumY / n : 0
  const variance = n > 1 ? Math.max(0, (sumY2 - n * mean * mean) / (n - 1)) : 0
  return { n, mean, variance }
}
