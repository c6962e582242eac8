// The saved reports' columns follow the log's retention (docs/reports.md, "How it is computed"): rows
// the log trimmed are dropped by a pass every trim period whether or not a report is read, and the
// dictionaries (every visitor, profile and path the account had) are cut to what the rows kept refer to
// once half as many rows were dropped as remain, results unchanged. Real LMDB in a temp folder.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { EventLog } from '../../src/store/event-log.js'
import { SavedReportIndex } from '../../src/reports/saved-index.js'
import { compactSavedReports, oldestLogged, SavedResults } from '../../src/reports/saved-results.js'
import { runSavedReport } from '../../src/reports/saved-query.js'
import type { SavedReport } from '../../src/reports/saved-definition.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { until } from '../helpers/until.js'

const T0 = Date.parse('2026-11-20T00:00:00Z')
const MINUTE_MS = 60_000
const DAY_MS = 86_400_000

function report (rest: Partial<SavedReport>): SavedReport {
  return {
    id: 'r-1', name: 'by path', metric: { type: 'uniqueVisitors' }, breakdown: { by: 'path' },
    range: { from: new Date(T0).toISOString(), to: new Date(T0 + DAY_MS).toISOString() }, granularity: 'hour',
    createdAt: '', updatedAt: '', ...rest,
  }
}

/** Minute m's events: 50 visitors of their own (a churning site), each on one of 20 paths of that minute, a tenth of them signed in. */
function minuteOf (m: number): Array<{ visitorId: string, profileId: string | null, path: string, timeMs: number }> {
  return Array.from({ length: 50 }, (_, i) => ({
    visitorId: `v-${m}-${i}`, profileId: i % 10 === 0 ? `p-${m}-${i}` : null, path: `/m${m}/p${i % 20}`, timeMs: T0 + m * MINUTE_MS + i,
  }))
}

describe('saved reports: columns that follow the log\'s retention', () => {
  let dir: string
  let store: Store
  beforeEach(() => {
    dir = tempDir('beacon-saved-compaction-')
    store = new Store({ path: dir, durability: 'committed' })
  })
  afterEach(async () => {
    await store.close()
    removeDir(dir)
  })

  /** An index loaded from the (empty) log, then given account a's events of minutes [from, to). */
  const indexOf = (from: number, to: number): SavedReportIndex => {
    const index = new SavedReportIndex()
    index.beginLoad(0)
    while (!index.loadTurn(store.events, 1));
    for (let m = from; m < to; m++) for (const e of minuteOf(m)) index.add('a', e.visitorId, e.profileId, { event: 'pageView', path: e.path }, e.timeMs, [])
    return index
  }

  it('cuts the visitor, profile and path dictionaries to the rows kept once half as many were dropped, with the same results as columns of those rows alone', () => {
    const index = indexOf(0, 60)
    const columns = index.of('a')!
    expect([columns.visitors.size, columns.profiles.size, columns.dimensionValues[2]!.size]).to.deep.equal([3000, 300, 1200])

    // 15 minutes of 60 dropped: fewer than half of the 45 kept, the dictionaries stay as they were.
    columns.compact(T0 + 15 * MINUTE_MS)
    expect(columns.n).to.equal(45 * 50)
    expect(columns.visitors.size).to.equal(3000)
    // 15 more: 30 dropped since, 30 kept, the dictionaries keep only what the rows refer to.
    columns.compact(T0 + 30 * MINUTE_MS)
    expect(columns.n).to.equal(30 * 50)
    expect([columns.visitors.size, columns.profiles.size, columns.dimensionValues[2]!.size]).to.deep.equal([1500, 150, 600])

    const fresh = indexOf(30, 60)
    for (const rest of [{}, { metric: { type: 'uniqueProfiles' as const } }, { breakdown: undefined, filters: [{ by: 'path' as const, values: ['/m40/p3', '/m59/p19', '/m10/p1'] }] }]) {
      expect(runSavedReport(report(rest), columns, T0 + DAY_MS)).to.deep.equal(runSavedReport(report(rest), fresh.of('a'), T0 + DAY_MS))
    }
    // A visitor seen again after the cut gets a number of its own, and is counted once.
    index.add('a', 'v-59-0', null, { event: 'pageView', path: '/m59/p0' }, T0 + 61 * MINUTE_MS, [])
    index.add('a', 'v-new', null, { event: 'pageView', path: '/new' }, T0 + 61 * MINUTE_MS + 1, [])
    // Appended events are added when the index is next read (`of`), not in the appending turn.
    expect(columns.n).to.equal(30 * 50)
    const totals = runSavedReport(report({ breakdown: undefined }), index.of('a')!, T0 + DAY_MS).totals
    expect(totals).to.deep.equal([{ group: null, value: 1501 }])
  })

  it('gives back the arrays\' capacity once most rows are gone', () => {
    const columns = indexOf(0, 200).of('a')!
    expect(columns.timeMs.length).to.be.at.least(10_000)
    columns.compact(T0 + 190 * MINUTE_MS)
    expect(columns.n).to.equal(500)
    expect(columns.timeMs.length).to.be.at.most(4 * 1024)
    expect(runSavedReport(report({ breakdown: undefined }), columns, T0 + DAY_MS).totals).to.deep.equal([{ group: null, value: 500 }])
  })

  it('drops in the background what the log trimmed, without a report being read', async () => {
    let nowMs = T0 + 10 * MINUTE_MS
    const clock = { nowMs: () => nowMs }
    const retentionMs = 5 * MINUTE_MS
    const log = new EventLog(store, { retentionMs, sizeMaxBytes: 0 })
    const index = new SavedReportIndex()
    index.beginLoad(log.lastSeq)
    while (!index.loadTurn(store.events, 1));
    await store.events.transaction(() => {
      for (let m = 0; m < 10; m++) {
        for (const e of minuteOf(m)) {
          log.append('a', e.visitorId, e.profileId, { event: 'pageView', path: e.path }, e.timeMs, [])
          index.add('a', e.visitorId, e.profileId, { event: 'pageView', path: e.path }, e.timeMs, [])
        }
      }
    })
    const results = new SavedResults({ index, oldestKeptMs: oldestLogged(store), clock, retentionMs })
    const stop = compactSavedReports(results, 20, error => { throw error })
    try {
      expect(index.of('a')!.n).to.equal(500)
      await log.trimAll(nowMs)
      await until('the columns cut to the log\'s 5 minutes', () => index.of('a')!.n === 250, 5_000, 10)
      expect(index.of('a')!.visitors.size).to.equal(250)
      nowMs += 3 * MINUTE_MS
      await log.trimAll(nowMs)
      await until('and to its 2 minutes left', () => index.of('a')!.n === 100, 5_000, 10)
    } finally {
      stop()
    }
  })
})
