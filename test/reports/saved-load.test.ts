// The saved reports' columns loaded from the log in turns while events keep arriving (docs/reports.md,
// "How it is computed"): rows logged before the load are read by the walk, later ones come as appends,
// erasures and account deletions during the load apply to both, and the result is the log exactly, once.
// Real LMDB in a temp folder; the turns are driven by hand (one row, three rows) so that every change
// lands at a known point of the walk.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { EventLog } from '../../src/store/event-log.js'
import { NONE, SavedReportIndex, type AccountColumns } from '../../src/reports/saved-index.js'
import { openTempEventLog, type TempEventLog } from '../helpers/event-log.js'

const T0 = Date.parse('2026-11-20T00:00:00Z')

/** The rows the columns hold alive, as "time visitor kind", in order. */
function rowsOf (columns: AccountColumns | undefined): string[] {
  const rows: string[] = []
  if (columns === undefined) return rows
  for (let row = 0; row < columns.n; row++) {
    if (columns.alive[row] === 0) continue
    const profile = columns.profile[row] === NONE ? '' : ` ${columns.profiles.values[columns.profile[row]!]!}`
    rows.push(`${columns.timeMs[row]!} ${columns.visitors.values[columns.visitor[row]!]!} ${columns.kinds.values[columns.kind[row]!]!}${profile}`)
  }
  return rows
}

describe('saved reports: the load in turns', () => {
  let opened: TempEventLog
  let store: Store
  let log: EventLog
  /** What each account's columns must hold, as rowsOf says it. */
  let expected: Map<string, string[]>

  beforeEach(() => {
    opened = openTempEventLog('beacon-saved-load-')
    store = opened.store
    log = opened.log
    expected = new Map()
  })
  afterEach(() => opened.close())

  /** Log an event (committed before answering, so the walk could see it) and note it as expected. */
  const logged = (account: string, timeMs: number, visitor: string, kind: string, profile: string | null = null): void => {
    store.events.transactionSync(() => log.append(account, visitor, profile, { event: kind, platform: 'web' }, timeMs, []))
    const rows = expected.get(account) ?? []
    rows.push(`${timeMs} ${visitor} ${kind}${profile === null ? '' : ` ${profile}`}`)
    expected.set(account, rows)
  }
  const seed = (): void => {
    for (const account of ['a', 'b', 'c']) {
      for (let i = 0; i < 7; i++) logged(account, T0 + i * 1000, `${account}-v${i % 3}`, i % 2 === 0 ? 'pageView' : 'purchase', i === 4 ? `${account}-kim` : null)
    }
  }

  // Turns of 1 reach account c after its deletion (its rows are skipped), turns of 3 before it.
  for (const [turn, read] of [[1, 14], [3, 21]] as const) {
    it(`reads the rows logged before it, adds later ones once, and replays erasures and deletions in order (turns of ${turn})`, () => {
      seed()
      const index = new SavedReportIndex()
      const loading = index.beginLoad(log.lastSeq)
      expect(index.ready).to.equal(false)
      /** A live event: logged (the walk may meet its row) and handed to the index, as the wiring does. */
      const live = (account: string, timeMs: number, visitor: string, kind: string): void => {
        logged(account, timeMs, visitor, kind)
        index.add(account, visitor, null, { event: kind, platform: 'web' }, timeMs, [])
      }
      let turns = 0
      let done = false
      while (!done) {
        turns++
        // Changes at every point of the walk: before an account, inside it, after it.
        live('a', T0 + 100_000 + turns, `a-live${turns}`, 'pageView')
        live('b', T0 + 100_000 + turns, `b-v${turns % 3}`, 'purchase')
        if (turns === 5) {
          // Erase b-v1 (its logged rows and the live ones so far); later events of b-v1 stay.
          index.forget('b', new Set(['b-v1']), new Set())
          expected.set('b', expected.get('b')!.filter(row => !row.includes(' b-v1 ')))
        }
        if (turns === 9) {
          index.removeAccount('c')
          expected.delete('c')
        }
        done = index.loadTurn(store.events, turn)
      }
      expect(index.ready).to.equal(true)
      expect(loading.read).to.equal(read)
      live('c', T0 + 200_000, 'c-after', 'pageView')
      for (const account of ['a', 'b', 'c']) {
        // Within an account the live rows come after the logged ones: compare as sets of rows, then the count.
        expect([...rowsOf(index.of(account))].sort(), account).to.deep.equal([...(expected.get(account) ?? [])].sort())
      }
      expect(index.of('a')!.ordered).to.equal(true)
    })
  }

  it('loads an empty log at once, and a log over the sync path equals the same log over turns', () => {
    const empty = new SavedReportIndex()
    empty.beginLoad(log.lastSeq)
    expect(empty.loadTurn(store.events, 10)).to.equal(true)
    expect(empty.ready).to.equal(true)
    seed()
    const whole = new SavedReportIndex()
    expect(whole.load(store.events)).to.equal(21)
    const turns = new SavedReportIndex()
    turns.beginLoad(log.lastSeq)
    while (!turns.loadTurn(store.events, 2));
    for (const account of ['a', 'b', 'c']) expect(rowsOf(turns.of(account))).to.deep.equal(rowsOf(whole.of(account)))
  })
})
