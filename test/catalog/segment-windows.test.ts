// Which windows a segment reads (src/catalog/segments.ts), on a real store: the account's shared ones,
// or after a backfill its own, keyed by the backfill's id (rebuilt from the log whoever else counts the
// same); a backfill's row of an earlier release (no `windows`) leaves the segment on the shared ones, as
// it was, and the windows survive a restart and a later save without a backfill.

import { expect } from 'chai'
import { Catalogs } from '../../src/catalog/catalogs.js'
import { systemClock } from '../../src/clock.js'
import { Listeners } from '../../src/listeners.js'
import { Store } from '../../src/store/store.js'
import { compileRule } from '../../src/segments/rules.js'
import type { WindowSpec } from '../../src/segments/windows.js'
import { removeDir, tempDir } from '../helpers/beacon.js'

const RULE = { fact: 'count', event: 'purchase', within: '30d', op: 'gte', value: 2 }

describe('SegmentCatalog: the windows a segment reads', () => {
  let dir: string
  let store: Store
  let catalogs: Catalogs
  let account: string
  const open = (): Catalogs => new Catalogs({ store, clock: systemClock, segmentsChanged: new Listeners(), webhookChanged: new Listeners(), allowPrivateWebhooks: true })
  beforeEach(async () => {
    dir = tempDir()
    store = new Store({ path: dir, durability: 'committed' })
    catalogs = open()
    account = (await catalogs.accounts.create('windows')).account.account
  })
  afterEach(async () => {
    await store.close()
    removeDir(dir)
  })

  const keysOf = (windows: string): string[] => {
    const specs = new Map<string, WindowSpec>()
    compileRule(RULE, specs, null, windows)
    return [...specs.keys()]
  }
  const readKeys = (): string[] => [...catalogs.segments.compiledSet(account).specsByKey.keys()].sort()
  const backfill = (id: string): Parameters<Catalogs['segments']['put']>[3] => ({
    id, aheadMs: 0, row: hold => ({ id: hold.id, account, segment: 'buyers', state: 'running', fromMs: hold.fromMs, specKeys: [...hold.specKeys] }),
  })

  it('reads the shared windows, then its own once backfilled: through a restart, a release and a save without a backfill', async () => {
    await catalogs.segments.put(account, 'buyers', { rule: RULE })
    await catalogs.segments.put(account, 'others', { rule: RULE })
    expect(readKeys()).to.deep.equal(keysOf(''))
    const row = (await catalogs.segments.put(account, 'buyers', { rule: RULE }, backfill('b-1')))!
    expect(row).to.deep.include({ windows: 'b-1', specKeys: keysOf('b-1') })
    // Its own beside the others' shared ones, counting live from the cut while it runs.
    expect(readKeys()).to.deep.equal([...keysOf(''), ...keysOf('b-1')].sort())
    expect(catalogs.segments.compiledSet(account).specsByKey.get(keysOf('b-1')[0]!)!.countsFromMs).to.equal(row.fromMs)
    await catalogs.segments.saveBackfill({ ...row, state: 'done' })
    catalogs.segments.release(account, 'buyers')
    expect(catalogs.segments.compiledSet(account).specsByKey.get(keysOf('b-1')[0]!)!.countsFromMs).to.equal(0)
    // A restart loads the row: the same windows; a save without a backfill keeps them.
    catalogs = open()
    expect(readKeys()).to.deep.equal([...keysOf(''), ...keysOf('b-1')].sort())
    await catalogs.segments.put(account, 'buyers', { description: 'kept', rule: RULE })
    expect(readKeys()).to.deep.equal([...keysOf(''), ...keysOf('b-1')].sort())
  })

  it('leaves a segment backfilled by an earlier release on the shared windows', async () => {
    await catalogs.segments.put(account, 'buyers', { rule: RULE })
    const old = { id: 'old-1', account, segment: 'buyers', state: 'done', fromMs: 1, specKeys: keysOf('') }
    await store.save(store.config, [account, 'backfill', 'buyers'], old)
    catalogs = open()
    expect(readKeys()).to.deep.equal(keysOf(''))
    expect(catalogs.segments.backfillOf(account, 'buyers')).to.deep.equal(old)
  })
})
