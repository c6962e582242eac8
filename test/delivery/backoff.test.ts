import { expect } from 'chai'
import { BACKOFF, retryDelayMs } from '../../src/delivery/backoff.js'
import { parseRetryAfterMs } from '../../src/webhooks/index.js'

describe('retry backoff', () => {
  it('follows the documented schedule: 1 s × 4^(n-1), capped at 1 h, with equal jitter (half fixed, half random)', () => {
    // [attempt that failed, lowest delay, highest delay] — the table in docs/webhooks.md (Retry schedule).
    const table: [number, number, number][] = [
      [1, 500, 1000], [2, 2000, 4000], [3, 8000, 16_000], [4, 32_000, 64_000],
      [5, 128_000, 256_000], [6, 512_000, 1_024_000], [7, 1_800_000, 3_600_000], [8, 1_800_000, 3_600_000], [49, 1_800_000, 3_600_000],
    ]
    for (const [attempt, low, high] of table) {
      expect(retryDelayMs(attempt, 0), `attempt ${attempt} low`).to.equal(low)
      expect(retryDelayMs(attempt, 1), `attempt ${attempt} high`).to.equal(high)
      expect(retryDelayMs(attempt, 0.5)).to.be.within(low, high)
    }
    expect(BACKOFF).to.deep.equal({ baseMs: 1000, factor: 4, capMs: 3_600_000 })
  })

  it('keeps the default 8 attempts going for 41 to 83 minutes in total', () => {
    let low = 0
    let high = 0
    for (let attempt = 1; attempt < 8; attempt++) {
      low += retryDelayMs(attempt, 0)
      high += retryDelayMs(attempt, 1)
    }
    expect(low / 60_000).to.be.within(41, 42)
    expect(high / 60_000).to.be.within(82, 83)
  })

  it('treats a nonsense jitter value as 0 rather than producing NaN', () => {
    expect(retryDelayMs(1, Number.NaN)).to.equal(500)
    expect(retryDelayMs(0, 2)).to.equal(1000)
  })

  it('reads Retry-After as seconds or an HTTP date, capped at an hour', () => {
    const now = Date.UTC(2025, 0, 1)
    expect(parseRetryAfterMs('7', now)).to.equal(7000)
    expect(parseRetryAfterMs(['0'], now)).to.equal(0)
    expect(parseRetryAfterMs(new Date(now + 90_000).toUTCString(), now)).to.equal(90_000)
    expect(parseRetryAfterMs(new Date(now - 90_000).toUTCString(), now)).to.equal(0)
    expect(parseRetryAfterMs('86400', now)).to.equal(3_600_000)
    expect(parseRetryAfterMs('-5', now)).to.equal(undefined)
    expect(parseRetryAfterMs('later', now)).to.equal(undefined)
    expect(parseRetryAfterMs(undefined, now)).to.equal(undefined)
  })
})
