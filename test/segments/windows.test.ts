import { expect } from 'chai'
import { addBackfilled, BUCKETS_PER_WINDOW, mergeWindows, nextExpiryMs, parseWithin, pruneWindows, recordEvent, windowValue, type WindowSpec, type Windows } from '../../src/segments/windows.js'
import type { MatchContext } from '../../src/matching/index.js'

const HOUR_MS = 3_600_000
const spec = (fields: Partial<WindowSpec> = {}): WindowSpec => ({
  key: 'k', fact: 'count', event: 'view', field: null, where: null, withinMs: HOUR_MS, bucketMs: HOUR_MS / BUCKETS_PER_WINDOW, countsFromMs: 0, ...fields,
})
const ctx = (event: Record<string, unknown>, nowMs: number): MatchContext => ({
  event, attributes: {}, segments: new Set(), nowMs,
  visitor: { pageViews: 0, productViews: 0, purchases: 0, totalSpent: 0, firstSeenMs: 0, lastSeenMs: 0, viewedSkus: [], purchasedSkus: [], viewedCategories: [] },
})

describe('window counters', () => {
  it('parses within as minutes, hours or days up to 90 days', () => {
    expect(parseWithin('15m')).to.equal(900_000)
    expect(parseWithin('24h')).to.equal(86_400_000)
    expect(parseWithin('90d')).to.equal(90 * 86_400_000)
    for (const bad of ['91d', '0d', '1w', '7', 'd', '1.5h', '-1h']) expect(parseWithin(bad), bad).to.equal(null)
  })

  it('counts matching events inside the window and forgets them once it passed', () => {
    const windows: Windows = {}
    const s = spec()
    recordEvent(windows, [s], ctx({ event: 'view' }, 0))
    recordEvent(windows, [s], ctx({ event: 'view' }, 30 * 60_000))
    recordEvent(windows, [s], ctx({ event: 'other' }, 30 * 60_000))
    expect(windowValue(windows.k, s, 30 * 60_000)).to.equal(2)
    expect(windowValue(windows.k, s, HOUR_MS - 1)).to.equal(2)
    expect(windowValue(windows.k, s, HOUR_MS + 60_000)).to.equal(1)
    expect(windowValue(windows.k, s, 2 * HOUR_MS)).to.equal(0)
  })

  it('keeps at most one pair per bucket, and at most a window of buckets', () => {
    const windows: Windows = {}
    const s = spec()
    for (let minute = 0; minute < 600; minute++) {
      recordEvent(windows, [s], ctx({ event: 'view' }, minute * 60_000))
      recordEvent(windows, [s], ctx({ event: 'view' }, minute * 60_000 + 1))
    }
    expect(windows.k!.length).to.equal(2 * BUCKETS_PER_WINDOW)
    expect(windowValue(windows.k, s, 599 * 60_000)).to.equal(2 * BUCKETS_PER_WINDOW)
  })

  it('sums a numeric field, skipping events without a number there', () => {
    const windows: Windows = {}
    const s = spec({ fact: 'sum', event: 'purchase', field: 'total', withinMs: null, bucketMs: 0 })
    recordEvent(windows, [s], ctx({ event: 'purchase', total: 10.5 }, 0))
    recordEvent(windows, [s], ctx({ event: 'purchase', total: 'ten' }, 1))
    recordEvent(windows, [s], ctx({ event: 'purchase', total: 4.5 }, 10 * 86_400_000))
    expect(windowValue(windows.k, s, 400 * 86_400_000)).to.equal(15)
  })

  it('filters with where', () => {
    const windows: Windows = {}
    const s = spec({ where: c => c.event.path === '/a' })
    recordEvent(windows, [s], ctx({ event: 'view', path: '/a' }, 0))
    recordEvent(windows, [s], ctx({ event: 'view', path: '/b' }, 0))
    expect(windowValue(windows.k, s, 0)).to.equal(1)
  })

  it('tells when the oldest bucket leaves its window, and prunes it then', () => {
    const windows: Windows = {}
    const s = spec()
    const specs = new Map([[s.key, s]])
    recordEvent(windows, [s], ctx({ event: 'view' }, 90_000))
    expect(nextExpiryMs(windows, specs)).to.equal(HOUR_MS + 60_000)
    pruneWindows(windows, specs, HOUR_MS + 60_000)
    expect(windows).to.deep.equal({})
    expect(nextExpiryMs(windows, specs)).to.equal(0)
  })

  it('drops the counters of specs no longer configured', () => {
    const windows: Windows = { gone: [1, 1], k: [0, 1] }
    pruneWindows(windows, new Map([['k', spec({ withinMs: null, bucketMs: 0 })]]), 5)
    expect(Object.keys(windows)).to.deep.equal(['k'])
  })

  it('skips events before countsFromMs (a backfill counts those), and adds a backfill\'s buckets to the live ones', () => {
    const bucketMs = HOUR_MS / BUCKETS_PER_WINDOW
    const held = spec({ countsFromMs: 100 * bucketMs })
    const windows: Windows = { k: [90, 4] } // left over from an earlier rule with this spec
    expect(recordEvent(windows, [held], ctx({ event: 'view' }, 100 * bucketMs - 1))).to.equal(false)
    recordEvent(windows, [held], ctx({ event: 'view' }, 100 * bucketMs))
    expect(windows.k).to.deep.equal([90, 4, 100, 1])
    // The first step drops the stale bucket before the cut, then adds (a shared bucket sums).
    addBackfilled(windows, held, [95, 2, 99, 1, 100, 1], true)
    expect(windows.k).to.deep.equal([95, 2, 99, 1, 100, 2])
    addBackfilled(windows, held, [97, 3], false)
    expect(windows.k).to.deep.equal([95, 2, 97, 3, 99, 1, 100, 2])
    expect(windowValue(windows.k, held, 100 * bucketMs)).to.equal(8)
  })

  it('merges several entities bucket by bucket', () => {
    expect(mergeWindows([{ k: [1, 2, 3, 1] }, { k: [1, 1, 2, 5], j: [7, 7] }])).to.deep.equal({ k: [1, 3, 2, 5, 3, 1], j: [7, 7] })
  })
})
