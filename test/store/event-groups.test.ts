// The event log's groups (src/store/event-log.ts, format 2 of event-row.ts): the events of one account
// and millisecond appended in one event turn after its first are put as one row, in the same LMDB
// transaction as the turn's other writes; every read walks their events one by one, with ids that follow
// the key's seq, pages and resumes inside a group, and erasure empties an event's place (its bytes go,
// the other events keep their ids). Real LMDB in a temp folder.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { EventLog, type EventQuery, type LoggedEvent } from '../../src/store/event-log.js'
import { eventCount, isEventGroup } from '../../src/store/event-row.js'
import { SavedReportIndex } from '../../src/reports/saved-index.js'
import { runSavedReport } from '../../src/reports/saved-query.js'
import { openTempEventLog, type TempEventLog } from '../helpers/event-log.js'

const T0 = Date.parse('2026-11-20T00:00:00Z')
const DAY_MS = 86_400_000
const ALL: EventQuery = { fromMs: T0, toMs: T0 + DAY_MS, visitorId: null, profileId: null, kind: null }

describe('event log groups: the events of one turn in one row', () => {
  let opened: TempEventLog
  let store: Store
  let log: EventLog
  beforeEach(() => {
    opened = openTempEventLog('beacon-event-groups-')
    store = opened.store
    log = opened.log
  })
  afterEach(() => opened.close())

  /** Appends in one event turn, as a batch's events are, with a state write beside them; resolves once that write committed. */
  function turn (events: Array<{ account?: string, visitorId: string, path: string, timeMs?: number, profileId?: string }>): Promise<void> {
    for (const e of events) log.append(e.account ?? 'a', e.visitorId, e.profileId ?? null, { event: 'pageView', platform: 'web', path: e.path }, e.timeMs ?? T0, [])
    return store.durable(store.visitors.put(['a', 'state'], { n: events.length }))
  }

  const rows = (): Array<{ key: unknown, value: unknown }> => [...store.events.getRange({})].map(({ key, value }) => ({ key, value }))
  const paths = (events: LoggedEvent[]): string[] => events.map(e => e.fields.path as string)

  it('puts the first event of a turn at once and the rest as one group, committed with the turn\'s state write', async () => {
    await turn(Array.from({ length: 5 }, (_, i) => ({ visitorId: `v${i}`, path: `/${i}` })))
    const stored = rows()
    expect(stored).to.have.length(2)
    expect(stored[0]!.key).to.deep.equal(['a', T0, 1])
    expect(isEventGroup(stored[0]!.value)).to.equal(false)
    expect(stored[1]!.key).to.deep.equal(['a', T0, 2])
    expect(isEventGroup(stored[1]!.value)).to.equal(true)
    expect(eventCount(stored[1]!.value)).to.equal(4)
    expect(log.count()).to.equal(5)
    const page = log.page('a', ALL, 10, null).events
    expect(page.map(e => e.id)).to.deep.equal(['1-5', '1-4', '1-3', '1-2', '1-1'].map(id => `${T0}-${id.slice(2)}`))
    expect(paths(page)).to.deep.equal(['/4', '/3', '/2', '/1', '/0'])
    expect(log.lastSeq).to.equal(5)
  })

  it('starts a group of its own for another account or another millisecond in the same turn', async () => {
    await turn([
      { visitorId: 'v1', path: '/a0' }, { account: 'b', visitorId: 'v2', path: '/b0' }, { visitorId: 'v1', path: '/a1' },
      { visitorId: 'v3', path: '/a2', timeMs: T0 + 1 }, { account: 'b', visitorId: 'v2', path: '/b1' }, { visitorId: 'v1', path: '/a3' },
    ])
    expect(paths([...log.range('a', ALL)].flat())).to.deep.equal(['/a0', '/a1', '/a3', '/a2'])
    expect(paths([...log.range('b', ALL)].flat())).to.deep.equal(['/b0', '/b1'])
    expect(log.count()).to.equal(6)
  })

  it('pages newest first and resumes inside groups, through every read, with no event twice or missed', async () => {
    await turn(Array.from({ length: 7 }, (_, i) => ({ visitorId: `v${i % 2}`, path: `/t0-${i}` })))
    await turn(Array.from({ length: 5 }, (_, i) => ({ visitorId: `v${i % 2}`, path: `/t0b-${i}` })))
    await turn(Array.from({ length: 6 }, (_, i) => ({ visitorId: `v${i % 2}`, path: `/t1-${i}`, timeMs: T0 + 1 })))
    const all = [...log.range('a', ALL)].flat()
    expect(all).to.have.length(18)
    expect(new Set(all.map(e => e.id)).size).to.equal(18)
    for (const query of [ALL, { ...ALL, visitorId: 'v1' }]) {
      const expected = [...log.range('a', query)].flat()
      for (const limit of [1, 2, 3, 5]) {
        const paged: LoggedEvent[] = []
        let cursor: string | null = null
        do {
          const page = log.page('a', query, limit, cursor)
          paged.push(...page.events)
          cursor = page.next
        } while (cursor !== null)
        expect(paged.map(e => e.id), `page ${limit}`).to.deep.equal(expected.map(e => e.id).reverse())
        const walked: LoggedEvent[] = []
        let after: [number, number] | null = null
        for (;;) {
          const { events, last } = log.next('a', query, after, limit)
          walked.push(...events)
          if (last === null) break
          after = last
        }
        expect(walked.map(e => e.id), `next ${limit}`).to.deep.equal(expected.map(e => e.id))
      }
    }
  })

  it('erases events out of a group: their bytes go, the others keep their ids, an emptied group goes', async () => {
    await turn([
      { visitorId: 'keep-1', path: '/0' }, { visitorId: 'gone', path: '/1' }, { visitorId: 'keep-2', path: '/2' },
      { visitorId: 'gone', path: '/3', profileId: 'ana@example.com' }, { visitorId: 'keep-3', path: '/4' },
    ])
    await turn([{ visitorId: 'x', path: '/5', timeMs: T0 + 1 }, { visitorId: 'gone', path: '/6', timeMs: T0 + 1 }, { visitorId: 'gone', path: '/7', timeMs: T0 + 1 }])
    const before = new Map([...log.range('a', ALL)].flat().map(e => [e.fields.path as string, e.id]))
    expect(await log.forget('a', new Set(['gone']), new Set())).to.equal(4)
    const after = [...log.range('a', ALL)].flat()
    expect(paths(after)).to.deep.equal(['/0', '/2', '/4', '/5'])
    for (const e of after) expect(e.id).to.equal(before.get(e.fields.path as string))
    for (const { value } of rows()) expect(JSON.stringify(value)).to.not.include('gone')
    // The second turn's group held only erased events: removed, not kept empty.
    expect(rows()).to.have.length(3)
    expect(log.count()).to.equal(4)
    expect(await log.removeAccount('a')).to.equal(4)
    expect(rows()).to.deep.equal([])
  })

  it('loads groups into the saved reports\' columns as the events fed live', async () => {
    const events = Array.from({ length: 6 }, (_, i) => ({ visitorId: `v${i % 3}`, path: `/${i}` }))
    await turn(events)
    const loaded = new SavedReportIndex()
    expect(loaded.load(store.events)).to.equal(6)
    const live = new SavedReportIndex()
    for (const e of events) live.add('a', e.visitorId, null, { event: 'pageView', platform: 'web', path: e.path }, T0, [])
    const report = { id: 'r', name: 'r', metric: { type: 'uniqueVisitors' as const }, breakdown: { by: 'path' as const }, range: { from: new Date(T0).toISOString(), to: new Date(T0 + DAY_MS).toISOString() }, granularity: 'day' as const, createdAt: '', updatedAt: '' }
    expect(runSavedReport(report, loaded.of('a'), T0 + DAY_MS)).to.deep.equal(runSavedReport(report, live.of('a'), T0 + DAY_MS))
  })

  it('writes a row of its own for each event appended in a synchronous transaction (no turn to wait for)', () => {
    store.events.transactionSync(() => {
      for (let i = 0; i < 3; i++) log.append('a', 'v', null, { event: 'pageView', path: `/${i}` }, T0, [])
    })
    expect(rows()).to.have.length(3)
    expect(log.count()).to.equal(3)
  })
})
