import { expect } from 'chai'
import { HLL_REGISTERS, HyperLogLog, hash32 } from '../../src/reports/hll.js'
import { bucketUpperMs, latencyBucket, percentile, LATENCY_BUCKETS } from '../../src/reports/latency.js'

const STANDARD_ERROR = 1.04 / Math.sqrt(HLL_REGISTERS)

function sketchOf (from: number, to: number, prefix = 'visitor-'): HyperLogLog {
  const sketch = new HyperLogLog()
  for (let i = from; i < to; i++) sketch.add(prefix + i)
  return sketch
}

describe('HyperLogLog (unique visitors)', () => {
  it(`estimates within 3 standard errors (${(3 * STANDARD_ERROR * 100).toFixed(1)} %) from 10 to 1,000,000 distinct ids, and the average error stays near one`, () => {
    const errors: number[] = []
    for (const n of [10, 100, 1000, 5000, 20_000, 100_000, 1_000_000]) {
      for (const prefix of ['a-', 'b-', 'c-']) {
        const estimate = sketchOf(0, n, prefix).estimate()
        const error = Math.abs(estimate - n) / n
        expect(error, `${n} ids (${prefix}): ${estimate}`).to.be.at.most(3 * STANDARD_ERROR)
        errors.push(error)
      }
    }
    const mean = errors.reduce((a, b) => a + b, 0) / errors.length
    expect(mean).to.be.at.most(1.5 * STANDARD_ERROR)
  })

  it('counts a repeated id once, and is exact for a handful (linear counting)', () => {
    const sketch = new HyperLogLog()
    for (let i = 0; i < 1000; i++) sketch.add('same')
    expect(sketch.estimate()).to.equal(1)
    expect(sketchOf(0, 7).estimate()).to.equal(7)
    expect(new HyperLogLog().estimate()).to.equal(0)
  })

  it('merges by union: two overlapping sketches give exactly the sketch of all ids', () => {
    const a = sketchOf(0, 60_000)
    const b = sketchOf(40_000, 100_000)
    a.merge(b.registers)
    expect(Buffer.from(a.registers).equals(Buffer.from(sketchOf(0, 100_000).registers))).to.equal(true)
  })

  it('hashes strings to well-spread 32-bit numbers', () => {
    expect(hash32('a')).to.not.equal(hash32('b'))
    const top = new Set<number>()
    for (let i = 0; i < 10_000; i++) top.add(hash32('id-' + i) >>> 24)
    expect(top.size).to.equal(256)
  })
})

describe('latency histogram', () => {
  it('puts a latency in a bucket whose upper bound is within 25 % above it, and reads percentiles from the buckets', () => {
    for (const ms of [2, 10, 37, 250, 1000, 9000]) {
      const upper = bucketUpperMs(latencyBucket(ms))
      expect(upper).to.be.at.least(ms - 0.5).and.at.most(ms * 1.25 + 1)
    }
    const histogram = new Array<number>(LATENCY_BUCKETS).fill(0)
    for (let i = 1; i <= 100; i++) histogram[latencyBucket(i * 10)]!++
    expect(percentile(histogram, 0.5)).to.be.within(500, 625)
    expect(percentile(histogram, 0.99)).to.be.within(990, 1240)
    expect(percentile(new Array<number>(LATENCY_BUCKETS).fill(0), 0.5)).to.equal(null)
    expect(latencyBucket(0)).to.equal(0)
    expect(latencyBucket(10_000_000)).to.equal(LATENCY_BUCKETS - 1)
  })
})
