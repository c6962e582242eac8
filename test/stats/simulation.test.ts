// The statistics' guarantees, checked by simulation with a seeded generator (the same numbers every
// run). Bounds are the nominal value plus three standard errors of the simulation.

import { expect } from 'chai'
import { thompsonWeights, banditMinShare } from '../../src/stats/bandit.js'
import { cupedSummaries } from '../../src/stats/cuped.js'
import { lift } from '../../src/stats/lift.js'
import { sampleSizePerVariant } from '../../src/stats/power.js'
import { seededRandom, type Random } from '../../src/stats/random.js'
import { sequentialTest } from '../../src/stats/sequential.js'
import { sampleRatioCheck } from '../../src/stats/srm.js'
import { addVisitor, emptySums, meanSummary, proportionSummary } from '../../src/stats/summary.js'

const ALPHA = 0.05

function threeStandardErrors (p: number, trials: number): number {
  return 3 * Math.sqrt(p * (1 - p) / trials)
}

// One A/A experiment with `looks` looks at `visitorsPerLook` new visitors per arm each time; true
// if any look's test (sequential or fixed-horizon) is significant.
function aaRejects (random: Random, looks: number, visitorsPerLook: number, rate: number, sequential: boolean): boolean {
  let nc = 0; let cc = 0; let nt = 0; let ct = 0
  for (let look = 0; look < looks; look++) {
    nc += visitorsPerLook
    nt += visitorsPerLook
    cc += random.binomial(visitorsPerLook, rate)
    ct += random.binomial(visitorsPerLook, rate)
    const control = proportionSummary(nc, cc)
    const treatment = proportionSummary(nt, ct)
    const p = sequential ? sequentialTest(control, treatment, ALPHA).pValue : lift(control, treatment, 'normal').pValue
    if (p <= ALPHA) return true
  }
  return false
}

describe('statistics by simulation', () => {
  describe('A/A: 1,000 experiments looked at 20 times each', () => {
    const EXPERIMENTS = 1_000
    const LOOKS = 20

    it('the sequential p-value declares at most 5 % of them significant', () => {
      const random = seededRandom(29)
      let rejected = 0
      for (let e = 0; e < EXPERIMENTS; e++) if (aaRejects(random, LOOKS, 500, 0.1, true)) rejected++
      const share = rejected / EXPERIMENTS
      expect(share, `${rejected} of ${EXPERIMENTS}`).to.be.at.most(ALPHA + threeStandardErrors(ALPHA, EXPERIMENTS))
    })

    it('the fixed-horizon p-value read at every look would declare far more (the simulation can fail)', () => {
      const random = seededRandom(29)
      let rejected = 0
      for (let e = 0; e < EXPERIMENTS; e++) if (aaRejects(random, LOOKS, 500, 0.1, false)) rejected++
      expect(rejected / EXPERIMENTS, `${rejected} of ${EXPERIMENTS}`).to.be.above(0.15)
    })
  })

  describe('power: a 10 % lift on a 5 % base', () => {
    const n = sampleSizePerVariant(0.05, 0.1)
    const TRIALS = 1_000
    // The share of experiments with n visitors per arm whose fixed-horizon test finds the lift.
    function power (random: Random, visitors: number): number {
      let found = 0
      for (let i = 0; i < TRIALS; i++) {
        const control = proportionSummary(visitors, random.binomial(visitors, 0.05))
        const treatment = proportionSummary(visitors, random.binomial(visitors, 0.055))
        const result = lift(control, treatment, 'normal')
        if (result.pValue <= ALPHA && result.absolute.estimate > 0) found++
      }
      return found / TRIALS
    }

    it('is detected with 80 % power at the sample size the formula predicts, within ±20 % of it', () => {
      const random = seededRandom(7)
      expect(n).to.be.within(31_000, 31_500)
      const atN = power(random, n)
      expect(atN, 'power at n').to.be.within(0.8 - threeStandardErrors(0.8, TRIALS), 0.8 + threeStandardErrors(0.8, TRIALS))
      // The empirical sample size for 80 % lies inside [0.8 n, 1.2 n]: below it power is short of 80 %, above it past.
      expect(power(random, Math.round(0.8 * n)), 'power at 0.8 n').to.be.below(0.8)
      expect(power(random, Math.round(1.2 * n)), 'power at 1.2 n').to.be.above(0.8)
    })
  })

  describe('CUPED', () => {
    it('narrows the interval by √(1 − ρ²) when the pre-period correlates 0.5 with the outcome', () => {
      const random = seededRandom(11)
      const rho = 0.5
      const arms = [emptySums(), emptySums()]
      for (let arm = 0; arm < 2; arm++) {
        for (let i = 0; i < 20_000; i++) {
          const x = random.normal()
          const y = 10 + (arm === 1 ? 0.05 : 0) + rho * x + Math.sqrt(1 - rho * rho) * random.normal()
          addVisitor(arms[arm]!, y, x)
        }
      }
      const plain = lift(meanSummary(arms[0]!), meanSummary(arms[1]!), 't')
      const { theta, summaries } = cupedSummaries(arms)
      const adjusted = lift(summaries[0]!, summaries[1]!, 't')
      expect(theta).to.be.closeTo(rho, 0.02)
      const ratio = (adjusted.absolute.high - adjusted.absolute.low) / (plain.absolute.high - plain.absolute.low)
      expect(ratio).to.be.closeTo(Math.sqrt(1 - rho * rho), 0.01)
    })

    it('keeps its 95 % interval covering the true difference 95 % of the time', () => {
      const random = seededRandom(12)
      const TRIALS = 500
      let covered = 0
      for (let t = 0; t < TRIALS; t++) {
        const arms = [emptySums(), emptySums()]
        for (let arm = 0; arm < 2; arm++) {
          for (let i = 0; i < 500; i++) {
            const x = random.normal() * 2 + 3
            addVisitor(arms[arm]!, (arm === 1 ? 0.3 : 0) + 0.8 * x + random.normal(), x)
          }
        }
        const { summaries } = cupedSummaries(arms)
        const { absolute } = lift(summaries[0]!, summaries[1]!, 't')
        if (absolute.low <= 0.3 && absolute.high >= 0.3) covered++
      }
      expect(covered / TRIALS).to.be.at.least(0.95 - threeStandardErrors(0.95, TRIALS))
    })
  })

  describe('sample ratio mismatch', () => {
    it('flags a 45/55 split of 10,000 and not a 50/50 one', () => {
      expect(sampleRatioCheck([4_500, 5_500], [50, 50]).mismatch).to.equal(true)
      expect(sampleRatioCheck([5_000, 5_000], [50, 50]).mismatch).to.equal(false)
    })

    it('raises false alarms on correct assignment at about its threshold', () => {
      const random = seededRandom(3)
      let flagged = 0
      for (let i = 0; i < 2_000; i++) {
        const first = random.binomial(10_000, 0.5)
        if (sampleRatioCheck([first, 10_000 - first], [1, 1]).mismatch) flagged++
      }
      expect(flagged).to.be.at.most(8)
    })
  })

  describe('Thompson sampling', () => {
    it('sends most traffic to the best of three arms with known rates, never less than the floor to the others', () => {
      const random = seededRandom(5)
      const rates = [0.02, 0.04, 0.06]
      const arms = rates.map(() => ({ visitors: 0, conversions: 0 }))
      let weights = [1 / 3, 1 / 3, 1 / 3]
      let conversions = 0
      // Batches of 1,000 visitors split by the current weights; weights recomputed after each.
      while (conversions < 1_000) {
        for (let i = 0; i < rates.length; i++) {
          const visitors = Math.round(1_000 * weights[i]!)
          const converted = random.binomial(visitors, rates[i]!)
          arms[i]!.visitors += visitors
          arms[i]!.conversions += converted
          conversions += converted
        }
        weights = thompsonWeights(arms, random, 2_000)
      }
      const floor = banditMinShare(3)
      expect(weights.reduce((a, b) => a + b)).to.be.closeTo(1, 1e-9)
      for (const w of weights) expect(w).to.be.at.least(floor - 1e-12)
      expect(weights[2]).to.be.above(0.8)
      const total = arms.reduce((sum, a) => sum + a.visitors, 0)
      expect(arms[2]!.visitors / total, 'share of all traffic so far').to.be.above(0.5)
    })

    it('splits evenly between identical arms with no data', () => {
      const weights = thompsonWeights([{ visitors: 0, conversions: 0 }, { visitors: 0, conversions: 0 }], seededRandom(1), 10_000)
      expect(weights[0]).to.be.closeTo(0.5, 0.03)
    })
  })
})
