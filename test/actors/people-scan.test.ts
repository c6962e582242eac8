// PeopleScan (src/jobs/people-scan.ts) over a real LMDB store holding more rows than one batch: the
// walk goes on across batches (a fresh range from the last key, that key not read twice), stops at
// the scan limit, keeps to the account and the id prefix, and the recently active are ordered by
// activity across batches.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { PeopleScan, PEOPLE_SCAN_BATCH } from '../../src/jobs/people-scan.js'
import { EMPTY_SEGMENTS } from '../../src/segments/segment-set.js'
import { emptyVisitor } from '../../actors/visitor.js'
import { manualClock } from '../helpers/clock.js'
import { removeDir, tempDir } from '../helpers/beacon.js'

const ACCOUNT = '11111111-1111-4111-8111-111111111111'
const NEIGHBOUR = '22222222-2222-4222-8222-222222222222'
/** More than two batches. */
const COUNT = PEOPLE_SCAN_BATCH * 2 + 37

const idOf = (i: number): string => `v${String(i).padStart(5, '0')}`

describe('PeopleScan across batches (real LMDB)', () => {
  let dir: string
  let store: Store
  let scan: PeopleScan

  before(async () => {
    dir = tempDir('beacon-people-scan-')
    store = new Store({ path: dir, durability: 'committed' })
    await store.visitors.transaction(() => {
      for (let i = 0; i < COUNT; i++) {
        // Activity in an order unrelated to the ids: (i * 7919) mod COUNT is a permutation.
        store.visitors.put([ACCOUNT, idOf(i)], { ...emptyVisitor(), attributes: { n: i, even: i % 2 === 0 }, activeMs: 1_000_000 + ((i * 7919) % COUNT) })
      }
      store.visitors.put([NEIGHBOUR, idOf(0)], { ...emptyVisitor(), attributes: { n: 0, even: true }, activeMs: 9_999_999 })
    })
    scan = new PeopleScan({ store, clock: manualClock(), segments: () => EMPTY_SEGMENTS })
  })
  after(async () => {
    await store.close()
    removeDir(dir)
  })

  it('examines every row of the account once, across batches, and no other account\'s', async () => {
    const page = await scan.search(ACCOUNT, 'visitor', { idPrefix: '', attribute: 'even', value: 'true' }, null, 1000, 100_000)
    expect(page).to.deep.include({ scanned: COUNT, complete: true, next: null })
    const ids = page.people.map(p => p.id)
    expect(ids.length).to.equal(Math.ceil(COUNT / 2))
    expect(new Set(ids).size).to.equal(ids.length)
    expect(ids).to.deep.equal([...ids].sort())
  })

  it('stops at the scan limit in the middle of a batch and resumes after its cursor', async () => {
    const first = await scan.search(ACCOUNT, 'visitor', { idPrefix: '', attribute: null, value: null }, null, 1000, PEOPLE_SCAN_BATCH + 10)
    expect(first).to.deep.include({ scanned: PEOPLE_SCAN_BATCH + 10, complete: false, next: idOf(PEOPLE_SCAN_BATCH + 9) })
    const rest = await scan.search(ACCOUNT, 'visitor', { idPrefix: '', attribute: null, value: null }, first.next, 1000, 100_000)
    expect(rest).to.deep.include({ scanned: COUNT - PEOPLE_SCAN_BATCH - 10, complete: true })
    expect(rest.people[0]!.id).to.equal(idOf(PEOPLE_SCAN_BATCH + 10))
  })

  it('reads only the ids of a prefix', async () => {
    const page = await scan.search(ACCOUNT, 'visitor', { idPrefix: 'v010', attribute: null, value: null }, null, 1000, 100_000)
    expect(page.people.map(p => p.id)).to.deep.equal(Array.from({ length: 37 }, (_, i) => idOf(1000 + i)))
    expect(page).to.deep.include({ scanned: 37, complete: true })
  })

  it('orders the recently active across batches, and pages after the cursor', async () => {
    const first = await scan.recent(ACCOUNT, null, 5, 100_000)
    expect(first.people.map(p => p.activeMs)).to.deep.equal([0, 1, 2, 3, 4].map(k => 1_000_000 + COUNT - 1 - k))
    const second = await scan.recent(ACCOUNT, { activeMs: first.people[4]!.activeMs, id: first.people[4]!.id }, 5, 100_000)
    expect(second.people.map(p => p.activeMs)).to.deep.equal([5, 6, 7, 8, 9].map(k => 1_000_000 + COUNT - 1 - k))
    expect(second).to.deep.include({ scanned: COUNT, complete: true })
  })

  it('counts a rule\'s matches across batches', async () => {
    const preview = await scan.preview(ACCOUNT, { fact: 'attribute.even', op: 'eq', value: false }, null, 100_000)
    expect(preview).to.deep.include({ matches: Math.floor(COUNT / 2), scanned: COUNT, complete: true, windowsRecorded: true })
    expect(preview.sample.map(p => p.id)).to.deep.equal([1, 3, 5, 7, 9, 11, 13, 15, 17, 19].map(idOf))
  })
})
