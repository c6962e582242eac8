// Saved reports by segment over the log's rows (docs/reports.md, "Breakdowns and filters"): each row
// keeps the segments its visitor was in, read back by the load at start; rows logged before segments
// were kept (no `segments` in the value) form the group null; an event counts in each of its segments,
// queued appends and compaction keep each row's segments. Real LMDB in a temp folder.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { EventLog } from '../../src/store/event-log.js'
import { SavedReportIndex } from '../../src/reports/saved-index.js'
import { runSavedReport } from '../../src/reports/saved-query.js'
import type { SavedReport } from '../../src/reports/saved-definition.js'
import { openTempEventLog, type TempEventLog } from '../helpers/event-log.js'

const T0 = Date.parse('2026-11-20T00:00:00Z')
const DAY_MS = 86_400_000

function report (rest: Partial<SavedReport>): SavedReport {
  return {
    id: 'r-1', name: 'by segment', metric: { type: 'events' }, breakdown: { by: 'segment' },
    range: { from: new Date(T0).toISOString(), to: new Date(T0 + DAY_MS).toISOString() }, granularity: 'day',
    createdAt: '', updatedAt: '', ...rest,
  }
}

describe('saved reports: segments of the log\'s rows', () => {
  let opened: TempEventLog
  let store: Store
  let log: EventLog
  beforeEach(() => {
    opened = openTempEventLog('beacon-saved-segments-')
    store = opened.store
    log = opened.log
  })
  afterEach(() => opened.close())

  const totalsOf = (index: SavedReportIndex, rest: Partial<SavedReport> = {}): Record<string, number> =>
    Object.fromEntries(runSavedReport(report(rest), index.of('a'), T0 + DAY_MS).totals.map(t => [String(t.group), t.value]))

  it('loads each row\'s segments (an old row without them is in null), and keeps them through queued appends and compaction', () => {
    store.events.transactionSync(() => {
      // As a version before segments were kept wrote it.
      store.events.put(['a', T0, 1], { visitorId: 'old', kind: 'pageView', fields: {} })
      log.append('a', 'v1', null, { event: 'pageView' }, T0 + 1, ['vip', 'buyers'])
      log.append('a', 'v2', null, { event: 'purchase' }, T0 + 2, ['buyers'])
      log.append('a', 'v1', null, { event: 'purchase' }, T0 + 3, [])
    })
    const index = new SavedReportIndex()
    index.beginLoad(log.lastSeq)
    // Appended during the load: queued, replayed after the logged rows with their segments.
    index.add('a', 'v3', null, { event: 'pageView' }, T0 + 4, ['vip'])
    while (!index.loadTurn(store.events, 1));
    expect(totalsOf(index)).to.deep.equal({ buyers: 2, vip: 2, null: 2 })
    expect(runSavedReport(report({}), index.of('a'), T0 + DAY_MS)).to.deep.include({ eventsRead: 5, groupsOverlap: true })
    expect(totalsOf(index, { metric: { type: 'uniqueVisitors' } })).to.deep.equal({ vip: 2, buyers: 2, null: 2 })
    expect(totalsOf(index, { breakdown: { by: 'kind' }, filters: [{ by: 'segment', values: ['buyers'] }] })).to.deep.equal({ pageView: 1, purchase: 1 })
    // v2 erased: its row dropped at compaction, every other row keeps its own segments.
    index.forget('a', new Set(['v2']), new Set())
    index.of('a')!.compact(T0)
    expect(index.of('a')!.n).to.equal(4)
    expect(totalsOf(index)).to.deep.equal({ vip: 2, buyers: 1, null: 2 })
    // The old row goes with retention: the compacted rows move, each with its segments.
    index.of('a')!.compact(T0 + 1)
    expect(totalsOf(index)).to.deep.equal({ vip: 2, buyers: 1, null: 1 })
  })

  it('answers the stored segments on the log\'s page, and none for a visitor in no segment', () => {
    store.events.transactionSync(() => {
      log.append('a', 'v1', null, { event: 'pageView', path: '/' }, T0, ['vip'])
      log.append('a', 'v1', null, { event: 'pageView', path: '/x' }, T0 + 1, [])
    })
    const page = log.page('a', { fromMs: T0, toMs: T0 + DAY_MS, visitorId: null, profileId: null, kind: null }, 10, null)
    expect(page.events.map(e => [e.fields.path, e.segments])).to.deep.equal([['/x', undefined], ['/', ['vip']]])
  })
})
