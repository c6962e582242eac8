// The fixed-horizon sample size per variant for comparing two conversion rates with a two-sided
// z test: n = (z_{1−α/2} + z_{power})² (p₁(1 − p₁) + p₂(1 − p₂)) / (p₂ − p₁)².

import { normalQuantile } from './distributions.js'

export function sampleSizePerVariant (baseRate: number, relativeLift: number, alpha = 0.05, power = 0.8): number {
  const p1 = baseRate
  const p2 = baseRate * (1 + relativeLift)
  const z = normalQuantile(1 - alpha / 2) + normalQuantile(power)
  return Math.ceil(z * z * (p1 * (1 - p1) + p2 * (1 - p2)) / ((p2 - p1) * (p2 - p1)))
}
