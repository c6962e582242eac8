import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { removeDir, tempDir } from '../helpers/beacon.js'

describe('Store', () => {
  it('never gives a sequence number twice, even after the outbox rows that carried it are gone', async () => {
    const dir = tempDir()
    try {
      let store = new Store({ path: dir, durability: 'flushed' })
      const first = [store.appendOutbox({ kind: 'event' }), store.appendOutbox({ kind: 'event' })].map(Number)
      const scheduled = store.allocateSeq()
      await store.durable(store.outbox.remove(first[1]!))
      await store.durable(store.outbox.remove(first[0]!))
      await store.close()
      // Reopened with an empty outbox: the next numbers are past every one given before.
      store = new Store({ path: dir, durability: 'flushed' })
      expect(store.outbox.getCount()).to.equal(0)
      const next = Number(store.appendOutbox({ kind: 'event' }))
      expect(next).to.be.greaterThan(scheduled)
      await store.durable(store.outbox.remove(next))
      await store.close()
      store = new Store({ path: dir, durability: 'flushed' })
      expect(store.allocateSeq()).to.be.greaterThan(next)
      await store.close()
    } finally {
      removeDir(dir)
    }
  })

  it('keeps the node id made on the first start, and makes another for another folder', async () => {
    const dir = tempDir()
    const other = tempDir()
    try {
      const first = new Store({ path: dir, durability: 'flushed' })
      const id = first.nodeId
      await first.close()
      const again = new Store({ path: dir, durability: 'flushed' })
      expect(again.nodeId).to.equal(id)
      await again.close()
      const elsewhere = new Store({ path: other, durability: 'flushed' })
      expect(elsewhere.nodeId).not.to.equal(id)
      await elsewhere.close()
    } finally {
      removeDir(dir)
      removeDir(other)
    }
  })

  it('opens a data folder whose name has a dot', async () => {
    const parent = tempDir()
    const dir = parent + '/beacon.data'
    try {
      let store = new Store({ path: dir, durability: 'flushed' })
      await store.save(store.accounts, 'a', { name: 'x' })
      await store.close()
      store = new Store({ path: dir, durability: 'flushed' })
      expect(store.accounts.get('a')).to.deep.equal({ name: 'x' })
      await store.close()
    } finally {
      removeDir(parent)
    }
  })
})
