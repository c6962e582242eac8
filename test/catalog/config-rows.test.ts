// The shape every per-account configuration kind is built on, on a real store: keys, not-found,
// paging, the limit under concurrent creations, and rows written through to the config db.

import { expect } from 'chai'
import { ConfigRows } from '../../src/catalog/config-rows.js'
import { ApiError } from '../../src/errors.js'
import { Store } from '../../src/store/store.js'
import { removeDir, tempDir } from '../helpers/beacon.js'

function codeOf (run: () => unknown): string | undefined {
  try {
    run()
  } catch (error) {
    return error instanceof ApiError ? error.items[0]!.code : undefined
  }
  return undefined
}

describe('ConfigRows (the generic catalog shape)', () => {
  let dir: string
  let store: Store
  let rows: ConfigRows<{ n: number }>
  beforeEach(() => {
    dir = tempDir()
    store = new Store({ path: dir, durability: 'committed' })
    rows = new ConfigRows({ store, kind: 'thing', max: 3, limitMessage: 'At most %d things.', notFound: 'campaign_not_found' })
  })
  afterEach(async () => {
    await store.close()
    removeDir(dir)
  })

  /** Create-or-replace as a catalog does: save, then set. */
  const put = (account: string, name: string, n: number): Promise<void> => rows.reserve(account, name, async () => {
    await rows.save(account, name, { n })
    rows.set(account, name, { n })
  })

  it('keeps items per account under [account, kind, name], written through to the config db', async () => {
    await put('a', 'x', 1)
    await put('b', 'x', 2)
    expect(rows.key('a', 'x')).to.deep.equal(['a', 'thing', 'x'])
    expect(store.config.get(['a', 'thing', 'x'])).to.deep.equal({ n: 1 })
    expect(rows.get('b', 'x')).to.deep.equal({ n: 2 })
    expect(rows.has('a', 'y')).to.equal(false)
    expect([...rows.all()]).to.deep.equal([{ n: 1 }, { n: 2 }])
    await rows.remove('a', 'x')
    rows.delete('a', 'x')
    expect(store.config.get(['a', 'thing', 'x'])).to.equal(undefined)
    expect(codeOf(() => rows.get('a', 'x'))).to.equal('campaign_not_found')
    rows.forget('b')
    expect(rows.of('b')).to.equal(undefined)
  })

  it('lists a page at a time in name order', async () => {
    for (const name of ['c', 'a', 'b']) await put('a', name, name.charCodeAt(0))
    const first = rows.list('a', { cursor: '', limit: 2 }, name => name)
    expect(first).to.deep.equal({ items: ['a', 'b'], next: 'b' })
    expect(rows.list('a', { cursor: 'b', limit: 2 }, name => name)).to.deep.equal({ items: ['c'], next: null })
    expect(rows.list('none', { cursor: '', limit: 2 }, name => name)).to.deep.equal({ items: [], next: null })
  })

  it('lets concurrent creations reach the limit exactly, a replacement always passing', async () => {
    const results = await Promise.allSettled(['p', 'q', 'r', 's', 't'].map((name, i) => put('a', name, i)))
    expect(results.filter(result => result.status === 'fulfilled')).to.have.length(3)
    const refused = results.find(result => result.status === 'rejected') as PromiseRejectedResult
    expect(refused.reason).to.be.instanceOf(ApiError)
    expect((refused.reason as ApiError).items).to.deep.equal([{ code: 'conflict', message: 'At most 3 things.' }])
    await put('a', 'p', 9)
    expect(rows.get('a', 'p')).to.deep.equal({ n: 9 })
    // Another account has its own count.
    await put('b', 'p', 1)
  })
})
