// The event log's row formats (src/store/event-row.ts): rows of the flat format 1 and records of the
// format written before 2026-11-28 read alike through every read of the log (page, next, range, the
// filters, erasure) and the saved reports' load; a row of an unknown format is refused, never misread.
// Real LMDB in a temp folder.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { EventLog, type EventQuery, type LoggedEvent } from '../../src/store/event-log.js'
import { EVENT_ROW_FIELDS, eventRow, storedEvent, type StoredEvent } from '../../src/store/event-row.js'
import { DIMENSION_FIELDS, SavedReportIndex } from '../../src/reports/saved-index.js'
import { runSavedReport } from '../../src/reports/saved-query.js'
import type { SavedReport } from '../../src/reports/saved-definition.js'
import { openTempEventLog, type TempEventLog } from '../helpers/event-log.js'

const T0 = Date.parse('2026-11-20T00:00:00Z')
const DAY_MS = 86_400_000
const ALL: EventQuery = { fromMs: T0, toMs: T0 + DAY_MS, visitorId: null, profileId: null, kind: null }

/** Events of every shape the log keeps: known and custom fields, a profile, segments, a list, a number. */
const EVENTS: Array<{ visitorId: string, profileId: string | null, event: Record<string, unknown>, segments: string[] }> = [
  { visitorId: 'v1', profileId: null, segments: [], event: { account: 'a', visitorId: 'v1', token: 't-secret', platform: 'web', device: 'mobile', event: 'pageView', path: '/p/1', referrer: null } },
  { visitorId: 'v2', profileId: 'ana@example.com', segments: ['vip', 'buyers'], event: { visitorId: 'v2', profileId: 'ana@example.com', event: 'purchase', platform: 'ios', orderId: 'o-1', orderTotal: 42.5, purchasedItems: ['s-1', 's-2'], plan: 'pro', 7: 'seven', newsletter: true } },
  { visitorId: 'v1', profileId: null, segments: ['vip'], event: { event: 'campaignView', platform: 'web', campaignId: 'c-1', variant: 'b', custom: 3 } },
  { visitorId: 'v3', profileId: 'bo@example.com', segments: [], event: { path: '/cart', event: 'addToCart', platform: 'web', sku: 'SKU-9', price: 10 } },
]

/** The record a build before 2026-11-28 stored for an event (EventLog.append then). */
function recordOf ({ visitorId, profileId, event, segments }: typeof EVENTS[number]): StoredEvent {
  const { token: _token, account: _account, visitorId: _visitor, profileId: _profile, event: kind, ...fields } = event
  const value: StoredEvent = profileId === null ? { visitorId, kind: kind as string, fields } : { visitorId, profileId, kind: kind as string, fields }
  if (segments.length > 0) value.segments = segments.slice()
  return value
}

function report (rest: Partial<SavedReport>): SavedReport {
  return {
    id: 'r-1', name: 'r', metric: { type: 'events' }, range: { from: new Date(T0).toISOString(), to: new Date(T0 + DAY_MS).toISOString() },
    granularity: 'day', createdAt: '', updatedAt: '', ...rest,
  }
}

describe('event log rows: the flat format and the records written before it', () => {
  let opened: TempEventLog
  let store: Store
  let log: EventLog
  beforeEach(() => {
    opened = openTempEventLog('beacon-event-row-')
    store = opened.store
    log = opened.log
  })
  afterEach(() => opened.close())

  /** Account `new` logged by today's append, account `old` holding the same events as records. */
  const writeBoth = (): void => {
    store.events.transactionSync(() => {
      EVENTS.forEach((e, i) => {
        log.append('new', e.visitorId, e.profileId, e.event, T0 + i, e.segments)
        store.events.put(['old', T0 + i, 1000 + i], recordOf(e))
      })
    })
  }
  const withoutIds = (events: LoggedEvent[]): unknown[] => events.map(({ id: _id, ...rest }) => rest)

  it('keeps the kind, the profile, the segments and every field but the token and the columns, in the event\'s order', () => {
    writeBoth()
    const events = log.page('new', ALL, 10, null).events.reverse()
    expect(events.map(e => Object.keys(e.fields))).to.deep.equal([
      ['platform', 'device', 'path', 'referrer'],
      // Integer-like names first, as in any JavaScript object.
      ['7', 'platform', 'orderId', 'orderTotal', 'purchasedItems', 'plan', 'newsletter'],
      ['platform', 'campaignId', 'variant', 'custom'],
      ['path', 'platform', 'sku', 'price'],
    ])
    expect(events[1]).to.deep.include({ visitorId: 'v2', profileId: 'ana@example.com', kind: 'purchase', segments: ['vip', 'buyers'] })
    expect(events[1]!.fields).to.deep.equal({ platform: 'ios', orderId: 'o-1', orderTotal: 42.5, purchasedItems: ['s-1', 's-2'], plan: 'pro', 7: 'seven', newsletter: true })
    expect(events[0]).to.not.have.any.keys('profileId', 'segments')
    expect(JSON.stringify(events)).to.not.include('t-secret')
  })

  it('answers the same events from rows and from records: page, next, range, and each filter', () => {
    writeBoth()
    const queries: EventQuery[] = [
      ALL, { ...ALL, visitorId: 'v1' }, { ...ALL, profileId: 'ana@example.com' }, { ...ALL, kind: 'addToCart' }, { ...ALL, visitorId: 'v3', profileId: 'bo@example.com' },
    ]
    for (const query of queries) {
      const fromRows = log.page('new', query, 10, null).events
      expect(withoutIds(fromRows), JSON.stringify(query)).to.deep.equal(withoutIds(log.page('old', query, 10, null).events))
      expect(withoutIds(log.next('new', query, null, 10).events)).to.deep.equal(withoutIds(log.next('old', query, null, 10).events))
      expect(withoutIds([...log.range('new', query)].flat())).to.deep.equal(withoutIds([...log.range('old', query)].flat()))
      expect(withoutIds([...log.range('new', query)].flat())).to.deep.equal(withoutIds(fromRows.slice().reverse()))
    }
    expect(log.page('new', { ...ALL, visitorId: 'v1' }, 10, null).events).to.have.length(2)
  })

  it('erases by visitor and by profile in rows and records alike', async () => {
    writeBoth()
    expect(await log.forget('new', new Set(['v1']), new Set(['bo@example.com']))).to.equal(3)
    expect(await log.forget('old', new Set(['v1']), new Set(['bo@example.com']))).to.equal(3)
    expect(log.page('new', ALL, 10, null).events.map(e => e.visitorId)).to.deep.equal(['v2'])
    expect(withoutIds(log.page('new', ALL, 10, null).events)).to.deep.equal(withoutIds(log.page('old', ALL, 10, null).events))
  })

  it('loads rows and records into the same saved reports\' columns as the events fed live', () => {
    writeBoth()
    const loaded = new SavedReportIndex()
    loaded.load(store.events)
    const live = new SavedReportIndex()
    EVENTS.forEach((e, i) => live.add('live', e.visitorId, e.profileId, e.event, T0 + i, e.segments))
    const reports: Array<Partial<SavedReport>> = [
      {}, { breakdown: { by: 'platform' } }, { breakdown: { by: 'kind' } }, { breakdown: { by: 'segment' } }, { metric: { type: 'uniqueProfiles' } },
      { breakdown: { by: 'field', field: 'plan' } }, { metric: { type: 'sum', field: 'orderTotal' } }, { breakdown: { by: 'campaign' } },
    ]
    for (const rest of reports) {
      const expected = runSavedReport(report(rest), live.of('live'), T0 + DAY_MS)
      expect(runSavedReport(report(rest), loaded.of('new'), T0 + DAY_MS), JSON.stringify(rest)).to.deep.equal(expected)
      expect(runSavedReport(report(rest), loaded.of('old'), T0 + DAY_MS), JSON.stringify(rest)).to.deep.equal(expected)
    }
  })

  it('stores a typical page view in fewer bytes than the record did', () => {
    writeBoth()
    const rowBytes = store.events.getBinary(['new', T0, 1])!.length
    const recordBytes = store.events.getBinary(['old', T0, 1000])!.length
    expect(rowBytes).to.be.below(recordBytes * 0.85)
  })

  it('refuses a row of a format it does not know instead of misreading it', () => {
    store.events.putSync(['new', T0, 1], [3, 'v1', 'pageView', null, null])
    expect(() => log.page('new', ALL, 10, null)).to.throw(/unknown format: 3/)
  })

  it('names Beacon\'s own fields by their place, the dimension columns first', () => {
    expect(EVENT_ROW_FIELDS.slice(0, DIMENSION_FIELDS.length)).to.deep.equal([...DIMENSION_FIELDS])
    const row = eventRow('v1', null, { event: 'pageView', platform: 'web', referrer: 'r', own: 1 }, ['s'])
    expect(row).to.deep.equal([1, 'v1', 'pageView', null, ['s'], 0, 'web', 5, 'r', 'own', 1])
    expect(storedEvent(row)).to.deep.equal({ visitorId: 'v1', kind: 'pageView', fields: { platform: 'web', referrer: 'r', own: 1 }, segments: ['s'] })
  })
})
