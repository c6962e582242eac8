// src/stats/ against values computed independently with scipy (test/fixtures/stats-reference.py wrote
// test/fixtures/stats-reference.json; its "source" names the versions).

import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { chiSquareSf, normalCdf, normalQuantile, studentTCdf, studentTQuantile } from '../../src/stats/distributions.js'
import { lift } from '../../src/stats/lift.js'
import { sampleSizePerVariant } from '../../src/stats/power.js'
import { sequentialTest } from '../../src/stats/sequential.js'
import { sampleRatioCheck } from '../../src/stats/srm.js'
import { proportionSummary } from '../../src/stats/summary.js'

interface Reference {
  source: string
  normalCdf: Array<[number, number]>
  normalQuantile: Array<[number, number]>
  studentTCdf: Array<[number, number, number]>
  studentTQuantile: Array<[number, number, number]>
  chiSquareSf: Array<[number, number, number]>
  proportions: Array<{ control: [number, number], treatment: [number, number], absolute: number[], pValue: number, relative: number[] }>
  welch: Array<{ control: [number, number, number], treatment: [number, number, number], df: number, absolute: number[], pValue: number }>
  srm: Array<{ counts: number[], weights: number[], chiSquare: number, pValue: number }>
  sequential: Array<{ control: [number, number], treatment: [number, number], likelihoodRatio: number, pValue: number }>
  sampleSize: { baseRate: number, relativeLift: number, n: number }
}

const REF = JSON.parse(readFileSync(new URL('../fixtures/stats-reference.json', import.meta.url), 'utf8')) as Reference

function close (actual: number, expected: number, what: string, relative = 1e-9): void {
  const tolerance = Math.max(Math.abs(expected) * relative, 1e-14)
  expect(Math.abs(actual - expected), `${what}: ${actual} vs scipy ${expected}`).to.be.at.most(tolerance)
}

describe('statistics against scipy', () => {
  it('normal cdf and quantile', () => {
    for (const [z, p] of REF.normalCdf) close(normalCdf(z), p, `Φ(${z})`)
    for (const [p, z] of REF.normalQuantile) close(normalQuantile(p), z, `Φ⁻¹(${p})`)
  })

  it("Student's t cdf and quantile, fractional degrees of freedom included", () => {
    for (const [t, df, p] of REF.studentTCdf) close(studentTCdf(t, df), p, `T_${df}(${t})`)
    for (const [p, df, t] of REF.studentTQuantile) close(studentTQuantile(p, df), t, `T_${df}⁻¹(${p})`)
  })

  it('chi-square survival function', () => {
    for (const [x, k, p] of REF.chiSquareSf) close(chiSquareSf(x, k), p, `χ²_${k} sf(${x})`)
  })

  it('two proportions: absolute and relative intervals, p-value', () => {
    for (const c of REF.proportions) {
      const result = lift(proportionSummary(...c.control), proportionSummary(...c.treatment), 'normal')
      close(result.absolute.estimate, c.absolute[0]!, 'difference')
      close(result.absolute.low, c.absolute[1]!, 'difference low')
      close(result.absolute.high, c.absolute[2]!, 'difference high')
      close(result.pValue, c.pValue, 'p-value')
      close(result.relative!.estimate, c.relative[0]!, 'relative')
      close(result.relative!.low, c.relative[1]!, 'relative low')
      close(result.relative!.high, c.relative[2]!, 'relative high')
    }
  })

  it("Welch's t: degrees of freedom, interval and p-value (scipy's ttest_ind_from_stats)", () => {
    for (const c of REF.welch) {
      const [mc, sc, nc] = c.control
      const [mt, st, nt] = c.treatment
      const result = lift({ n: nc, mean: mc, variance: sc * sc }, { n: nt, mean: mt, variance: st * st }, 't')
      close(result.degreesOfFreedom, c.df, 'df')
      close(result.absolute.low, c.absolute[1]!, 'low')
      close(result.absolute.high, c.absolute[2]!, 'high')
      close(result.pValue, c.pValue, 'p-value', 1e-8)
    }
  })

  it("sample ratio mismatch: scipy's chisquare, flagged below 0.001", () => {
    for (const c of REF.srm) {
      const result = sampleRatioCheck(c.counts, c.weights)
      close(result.chiSquare, c.chiSquare, 'chi-square')
      close(result.pValue, c.pValue, 'p-value', 1e-8)
      expect(result.mismatch).to.equal(c.pValue < 0.001)
    }
  })

  it('mSPRT likelihood ratio and p-value by the closed form', () => {
    for (const c of REF.sequential) {
      const result = sequentialTest(proportionSummary(...c.control), proportionSummary(...c.treatment))
      close(result.likelihoodRatio, c.likelihoodRatio, 'Λ')
      close(result.pValue, c.pValue, 'p-value')
    }
  })

  it('fixed-horizon sample size for a 10 % lift on a 5 % base', () => {
    expect(sampleSizePerVariant(REF.sampleSize.baseRate, REF.sampleSize.relativeLift)).to.equal(REF.sampleSize.n)
  })
})
