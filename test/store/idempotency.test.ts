// Idempotency-Key records in LMDB (src/store/idempotency.ts): found while live, swept once expired (in
// batches, the removals told to the listeners), a record put again under the same scope kept; keys checked.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { Listeners } from '../../src/listeners.js'
import { entityOfScope, IdempotencyRecords, idempotencyScope, validIdempotencyKey, type IdempotencySwept } from '../../src/store/idempotency.js'
import { removeDir, tempDir } from '../helpers/beacon.js'

describe('Idempotency-Key records (src/store/idempotency.ts)', () => {
  let dir: string
  let store: Store
  const account = '7b0c3b7e-1c1a-4e4e-9a1a-000000000001'

  beforeEach(() => {
    dir = tempDir('beacon-idem-')
    store = new Store({ path: dir, durability: 'committed' })
  })
  afterEach(async () => {
    await store.close()
    removeDir(dir)
  })

  it('finds a record while it lives, before and after its commit, and not once expired', async () => {
    const records = new IdempotencyRecords(store)
    const scope = idempotencyScope('v', 'a-visitor', 'key-1')
    records.put(account, scope, { f: 'fp', x: 1_000, r: ['answer'] })
    // Not committed yet: found all the same (a second request with the key runs right after the first).
    expect(store.idempotency.get([account, scope])).to.equal(undefined)
    expect(records.find(account, scope, 999)).to.deep.equal({ f: 'fp', x: 1_000, r: ['answer'] })
    await store.root.committed
    expect(new IdempotencyRecords(store).find(account, scope, 999)).to.deep.equal({ f: 'fp', x: 1_000, r: ['answer'] })
    expect(records.find(account, scope, 1_000)).to.equal(null)
    expect(records.find(account, idempotencyScope('p', 'a-visitor', 'key-1'), 0)).to.equal(null)
  })

  it('sweeps expired records in batches and tells who listens; keeps live ones and one put again since', async () => {
    const swept: string[] = []
    const listeners = new Listeners<IdempotencySwept>()
    listeners.add((_account, scope) => swept.push(scope))
    const records = new IdempotencyRecords(store, listeners)
    for (let i = 0; i < 5; i++) records.put(account, idempotencyScope('v', `v${i}`, 'k'), { f: 'fp', x: 100 + i })
    records.put(account, idempotencyScope('p', 'ana', 'k'), { f: 'fp', x: 500 })
    // Put again with a later expiry: its first expiry entry must not remove it.
    records.put(account, idempotencyScope('v', 'v0', 'k'), { f: 'fp2', x: 900 })
    await store.root.committed
    expect(records.sweep(103, 2)).to.equal(2)
    await store.root.committed
    expect(records.sweep(103, 2)).to.equal(2)
    await store.root.committed
    expect(records.sweep(103, 2)).to.equal(0)
    expect(swept).to.deep.equal(['vv1\u0000k', 'vv2\u0000k', 'vv3\u0000k'])
    expect(records.find(account, idempotencyScope('v', 'v0', 'k'), 103)).to.deep.include({ f: 'fp2' })
    expect(records.find(account, idempotencyScope('v', 'v4', 'k'), 103)).to.deep.include({ x: 104 })
    expect(records.sweep(10_000)).to.equal(3)
    await store.root.committed
    expect([...store.idempotency.getKeys()]).to.deep.equal([])
    expect([...store.idempotencyExpiries.getKeys()]).to.deep.equal([])
  })

  it('checks keys: 1 to 255 printable ASCII characters', () => {
    expect(validIdempotencyKey('a')).to.equal(true)
    expect(validIdempotencyKey(' ~')).to.equal(true)
    expect(validIdempotencyKey('k'.repeat(255))).to.equal(true)
    expect(validIdempotencyKey('')).to.equal(false)
    expect(validIdempotencyKey('k'.repeat(256))).to.equal(false)
    for (const bad of ['a\tb', 'a\u007fb', 'é', 'a\u0000']) expect(validIdempotencyKey(bad), JSON.stringify(bad)).to.equal(false)
    expect(entityOfScope(idempotencyScope('p', 'ana\u0000odd@example.com', 'k:1'))).to.equal('ana\u0000odd@example.com')
  })
})
