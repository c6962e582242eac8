import { expect } from 'chai'
import type { Database } from 'lmdb'
import { Store } from '../../src/store/store.js'
import { emptyVisitor } from '../../actors/visitor.js'
import type { DeliveryRecord } from '../../src/delivery/record.js'
import { decodeRow, type OutboxRow } from '../../src/store/record-codec.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { Listeners } from '../../src/listeners.js'

const row: OutboxRow = { kind: 'event', account: 'acc', event: 'purchase', occurredAtMs: 1 }

describe('Store', () => {
  it('never gives a sequence number twice, even after the outbox rows that carried it are gone', async () => {
    const dir = tempDir()
    try {
      let store = new Store({ path: dir, durability: 'flushed' })
      const first = [store.appendOutbox(row), store.appendOutbox(row)].map(Number)
      const scheduled = store.allocateSeq()
      await store.durable(store.outbox.remove(first[1]!))
      await store.durable(store.outbox.remove(first[0]!))
      await store.close()
      // Reopened with an empty outbox: the next numbers are past every one given before.
      store = new Store({ path: dir, durability: 'flushed' })
      expect(store.outbox.getCount()).to.equal(0)
      const next = Number(store.appendOutbox(row))
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

  it('makes the writes of one turn durable together: one wait and one commit observation, a new one the next turn', async () => {
    const dir = tempDir()
    const observed: number[] = []
    const durableObserved = new Listeners<(durationMs: number) => void>()
    durableObserved.add(durationMs => { observed.push(durationMs) })
    const store = new Store({ path: dir, durability: 'flushed', durableObserved })
    try {
      const first = store.durable(store.visitors.put(['a', 'v1'], emptyVisitor()))
      const second = store.durable(store.visitors.put(['a', 'v2'], emptyVisitor()))
      expect(second).to.equal(first)
      await Promise.all([first, second])
      expect(observed).to.have.length(1)
      const next = store.durable(store.visitors.put(['a', 'v3'], emptyVisitor()))
      expect(next).not.to.equal(first)
      await next
      expect(observed).to.have.length(2)
      expect(store.visitors.get(['a', 'v2'])).to.deep.equal(emptyVisitor())
    } finally {
      await store.close()
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

  it("shares the record structures of Beacon's own rows, not of maps keyed by site data, and reads both back after a restart", async () => {
    const dir = tempDir()
    const account = '7d1f0c3e-2b4a-4e6f-9a8b-1c2d3e4f5a6b'
    const visitor = (i: number) => ({
      ...emptyVisitor(),
      firstSeenMs: 1000 + i,
      lastPath: `/p/${i}`,
      // Keys of the site's own: a new set for every visitor.
      attributes: { [`attr${i}`]: [{ value: i }], plan: [{ value: 'pro' }] },
      attributeTimes: { [`attr${i}`]: i },
      counts: { [`event${i}`]: i, pageView: 1 },
      windows: { [`w${i}`]: [i, 1] },
    })
    const delivery = (i: number): DeliveryRecord => ({
      id: `${i}.hook`, account, webhookId: 'hook', seq: i, status: 'delivered',
      item: { id: `${i}.hook`, occurredAtMs: 5, context: { account, visitorId: `v${i}`, event: 'purchase', eventFields: { [`field${i}`]: i } } },
      attempt: 2, attempts: [{ atMs: 6, status: 200, latencyMs: 1.5 }], dueMs: 0, createdAtMs: 5, updatedAtMs: 6, replayedAtMs: null, node: 'n',
    })
    const firstByte = (db: Database, value: unknown): number => (db as unknown as { encoder: { encode (v: unknown): Uint8Array } }).encoder.encode(value)[0]!
    try {
      let store = new Store({ path: dir, durability: 'flushed' })
      let last: Promise<boolean> | null = null
      for (let i = 0; i < 200; i++) {
        last = store.visitors.put([account, `v${i}`], visitor(i))
        store.deliveries.put([account, 'hook', i], delivery(i)).catch(() => {})
        store.appendOutbox({ kind: 'event', account, event: 'purchase', visitorId: `v${i}`, fields: { [`field${i}`]: i }, occurredAtMs: i })
      }
      await store.durable(last!)
      // The rows themselves are shared records (a msgpack record id, 0x40-0x5f, as their first byte)...
      for (const [db, value] of [[store.visitors, visitor(0)], [store.deliveries, delivery(0)]] as const) {
        expect(firstByte(db, value)).to.be.within(0x40, 0x5f)
      }
      // ...the maps keyed by site data in them plain maps, not records describing their keys inline...
      const encode = (db: Database, value: unknown): Buffer => Buffer.from((db as unknown as { encoder: { encode (v: unknown): Uint8Array } }).encoder.encode(value))
      const inlineRecord = Buffer.from([0xd4, 0x72]) // msgpackr's record definition extension
      expect(encode(store.visitors, visitor(0)).includes(inlineRecord)).to.equal(false)
      // (outbox rows are the bytes of the delivery record codec, which shares nothing)
      expect(Buffer.from(store.outbox.get(1) as Uint8Array).includes(inlineRecord)).to.equal(false)
      // ...and 200 different sets of site keys took no shared structure.
      for (const name of ['visitors', 'deliveries']) {
        expect((store.meta.get(['structures', name]) as unknown[]).length).to.be.within(1, 8)
      }
      expect(store.meta.get(['structures', 'outbox'])).to.equal(undefined)
      await store.close()
      store = new Store({ path: dir, durability: 'flushed' })
      for (let i = 0; i < 200; i++) {
        expect(store.visitors.get([account, `v${i}`])).to.deep.equal(visitor(i))
        expect(store.deliveries.get([account, 'hook', i])).to.deep.equal(delivery(i))
      }
      expect(decodeRow(store.outbox.get(200) as Uint8Array)).to.deep.include({ visitorId: 'v199', fields: { field199: 199 } })
      await store.close()
    } finally {
      removeDir(dir)
    }
  })
})
