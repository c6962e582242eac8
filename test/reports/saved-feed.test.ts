// The saved reports' columns fed after the appending event turn (src/reports/saved-index.ts, addRow):
// an appended event reaches the columns on the next setImmediate without anything reading them, and
// every read or change of the index in the same turn (a report, an erasure, an account's removal, the
// load) sees it first, in the order appended, so results stay exact. Real LMDB in a temp folder.

import { expect } from 'chai'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { Store } from '../../src/store/store.js'
import { EventLog } from '../../src/store/event-log.js'
import { SavedReportIndex } from '../../src/reports/saved-index.js'
import { runSavedReport } from '../../src/reports/saved-query.js'
import type { SavedReport } from '../../src/reports/saved-definition.js'
import { openTempEventLog, type TempEventLog } from '../helpers/event-log.js'

const T0 = Date.parse('2026-11-20T00:00:00Z')
const DAY_MS = 86_400_000
const REPORT: SavedReport = {
  id: 'r-1', name: 'r', metric: { type: 'events' }, breakdown: { by: 'kind' },
  range: { from: new Date(T0).toISOString(), to: new Date(T0 + DAY_MS).toISOString() }, granularity: 'day', createdAt: '', updatedAt: '',
}

describe('saved reports: columns fed after the appending turn', () => {
  let opened: TempEventLog
  let store: Store
  let log: EventLog
  let index: SavedReportIndex
  beforeEach(() => {
    opened = openTempEventLog('beacon-saved-feed-')
    store = opened.store
    log = opened.log
    index = new SavedReportIndex()
    index.load(store.events)
  })
  afterEach(() => opened.close())

  /** As the wiring does (src/app.ts): the log's row, then the columns fed from it. */
  const append = (account: string, visitorId: string, profileId: string | null, kind: string, timeMs: number): void => {
    index.addRow(account, timeMs, log.appendRow(account, visitorId, profileId, { event: kind, platform: 'web' }, timeMs, []))
  }
  const totals = (account: string): Record<string, number> =>
    Object.fromEntries(runSavedReport(REPORT, index.of(account), T0 + DAY_MS).totals.map(t => [String(t.group), t.value]))

  it('adds the events of a turn once the turn is over, with nothing reading the index', async () => {
    append('a', 'v1', null, 'pageView', T0)
    const columns = index.of('a')!
    append('a', 'v2', null, 'purchase', T0 + 1)
    append('a', 'v1', null, 'pageView', T0 + 2)
    expect(columns.n, 'not in the appending turn').to.equal(1)
    await nextTurn()
    expect(columns.n).to.equal(3)
    expect([...columns.timeMs.subarray(0, 3)]).to.deep.equal([T0, T0 + 1, T0 + 2])
    expect(columns.ordered).to.equal(true)
  })

  it('answers a report read in the appending turn with its events', () => {
    append('a', 'v1', null, 'pageView', T0)
    append('a', 'v2', null, 'purchase', T0 + 1)
    expect(totals('a')).to.deep.equal({ pageView: 1, purchase: 1 })
    expect(index.accountIds()).to.deep.equal(['a'])
  })

  it('erases events appended in the same turn as the erasure', () => {
    append('a', 'v1', null, 'pageView', T0)
    append('a', 'v2', 'ana@example.com', 'purchase', T0 + 1)
    append('a', 'v3', null, 'purchase', T0 + 2)
    index.forget('a', new Set(['v1']), new Set(['ana@example.com']))
    expect(totals('a')).to.deep.equal({ purchase: 1 })
  })

  it('keeps no column of an account removed in the turn its events were appended', async () => {
    append('gone', 'v1', null, 'pageView', T0)
    index.removeAccount('gone')
    await nextTurn()
    expect(index.of('gone')).to.equal(undefined)
    expect(index.accountIds()).to.deep.equal([])
  })

  it('queues what is appended during a load for the accounts the load has not finished, once each', () => {
    store.events.transactionSync(() => {
      log.append('a', 'v1', null, { event: 'pageView' }, T0, [])
      log.append('b', 'v1', null, { event: 'pageView' }, T0, [])
    })
    const loading = new SavedReportIndex()
    loading.beginLoad(log.lastSeq)
    const add = (account: string, kind: string, timeMs: number): void => {
      loading.addRow(account, timeMs, log.appendRow(account, 'v2', null, { event: kind }, timeMs, []))
    }
    add('a', 'purchase', T0 + 1)
    add('b', 'purchase', T0 + 1)
    // One row a turn: `a` is finished by the turn that reads `b`'s first row.
    expect(loading.loadTurn(store.events, 1)).to.equal(false)
    add('a', 'signup', T0 + 2)
    while (!loading.loadTurn(store.events, 1));
    index = loading
    expect(totals('a')).to.deep.equal({ pageView: 1, purchase: 1, signup: 1 })
    expect(totals('b')).to.deep.equal({ pageView: 1, purchase: 1 })
  })
})
