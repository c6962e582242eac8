import { expect } from 'chai'
import { isCapped, recordImpression, type FrequencyCap, type ImpressionHistory } from '../../src/matching/index.js'

const T0_MS = Date.UTC(2025, 0, 1)
const HOUR_MS = 3_600_000
const DAY_MS = 24 * HOUR_MS
const WEEK_MS = 7 * DAY_MS

function showAt (cap: FrequencyCap, history: ImpressionHistory | undefined, times: number[]): ImpressionHistory | undefined {
  for (const t of times) history = recordImpression(history, cap, t)
  return history
}

describe('frequency caps', () => {
  it('never caps a campaign without a cap or without history', () => {
    expect(isCapped(null, { n: 99, t: [T0_MS] }, T0_MS)).to.equal(false)
    expect(isCapped({ max: 1, per: 'day' }, undefined, T0_MS)).to.equal(false)
  })

  it('caps a lifetime cap once n reaches max, forever', () => {
    const cap: FrequencyCap = { max: 2, per: 'lifetime' }
    const h1 = recordImpression(undefined, cap, T0_MS)
    expect(isCapped(cap, h1, T0_MS)).to.equal(false)
    const h2 = recordImpression(h1, cap, T0_MS + 1)
    expect(isCapped(cap, h2, T0_MS + 1)).to.equal(true)
    expect(isCapped(cap, h2, T0_MS + 100 * WEEK_MS)).to.equal(true)
    expect(h2).to.deep.equal({ n: 2, t: [] })
  })

  for (const [per, windowMs] of [['hour', HOUR_MS], ['day', DAY_MS], ['week', WEEK_MS]] as const) {
    it(`slides a ${per} window: an impression stops counting exactly ${windowMs} ms later`, () => {
      const cap: FrequencyCap = { max: 2, per }
      const h = showAt(cap, undefined, [T0_MS, T0_MS + 1000])
      expect(isCapped(cap, h, T0_MS + 1000)).to.equal(true)
      expect(isCapped(cap, h, T0_MS + windowMs - 1)).to.equal(true)
      expect(isCapped(cap, h, T0_MS + windowMs)).to.equal(false)
      expect(isCapped(cap, h, T0_MS + windowMs + 1000)).to.equal(false)
    })
  }

  it('is not capped below max impressions in the window', () => {
    const cap: FrequencyCap = { max: 3, per: 'hour' }
    const h = showAt(cap, undefined, [T0_MS, T0_MS + 60_000])
    expect(isCapped(cap, h, T0_MS + 120_000)).to.equal(false)
  })

  it('prunes timestamps that left the window when recording', () => {
    const cap: FrequencyCap = { max: 3, per: 'hour' }
    const h = showAt(cap, undefined, [T0_MS, T0_MS + 10, T0_MS + HOUR_MS + 5])
    expect(h).to.deep.equal({ n: 3, t: [T0_MS + 10, T0_MS + HOUR_MS + 5] })
  })

  it('keeps no more than max timestamps, the most recent ones', () => {
    const cap: FrequencyCap = { max: 2, per: 'day' }
    const h = showAt(cap, undefined, [T0_MS, T0_MS + 1, T0_MS + 2, T0_MS + 3])
    expect(h).to.deep.equal({ n: 4, t: [T0_MS + 2, T0_MS + 3] })
  })

  it('counts lifetime impressions under a windowed cap too', () => {
    const cap: FrequencyCap = { max: 1, per: 'hour' }
    const h = showAt(cap, undefined, [T0_MS, T0_MS + 2 * HOUR_MS, T0_MS + 4 * HOUR_MS])
    expect(h?.n).to.equal(3)
  })

  it('does not modify the history it is given', () => {
    const cap: FrequencyCap = { max: 2, per: 'hour' }
    const before: ImpressionHistory = { n: 1, t: [T0_MS] }
    const after = recordImpression(before, cap, T0_MS + 5)
    expect(before).to.deep.equal({ n: 1, t: [T0_MS] })
    expect(after).to.deep.equal({ n: 2, t: [T0_MS, T0_MS + 5] })
  })

  it('records only the count when there is no cap', () => {
    expect(recordImpression(undefined, null, T0_MS)).to.deep.equal({ n: 1, t: [] })
  })

  it('starts a window afresh when a lifetime cap becomes windowed', () => {
    const lifetime: FrequencyCap = { max: 1, per: 'lifetime' }
    const daily: FrequencyCap = { max: 1, per: 'day' }
    const h = recordImpression(undefined, lifetime, T0_MS)
    expect(isCapped(daily, h, T0_MS + 1)).to.equal(false)
  })
})
