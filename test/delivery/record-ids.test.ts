// Delivery ids (record.ts): `<seq>.<webhook>` in embedded mode, `<node>:<seq>.<webhook>` in cluster mode,
// where every node's outbox counts from 1. Both derive the record's key (seqOf), both are stored as
// the compact tuple (record-codec.ts: a 21st element for the node), and the relay's fast path from a
// row's bytes makes the very record newRecord makes. A row a new owner resends keeps the id of its
// first place (a 22nd element, that seq), and its stream message id is the record id alone.

import { expect } from 'chai'
import { asStored, decodeMessage, decodeRecord, encodeMessage, encodeRecord, encodeRow, originBytes, recordOfRow, recordPrefix, type OutboxRow } from '../../src/store/record-codec.js'
import { Store } from '../../src/store/store.js'
import { findRecordsById, readRecordById } from '../../src/delivery/records-db.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { deliveryId, newRecord, scheduledRecord, seqOf } from '../../src/delivery/record.js'
import { messageIdOf } from '../../src/delivery/jetstream/subjects.js'
import type { CompiledWebhook } from '../../src/webhooks/compile.js'

const NOW = 1_700_000_000_000
const NODE = '3f2a9c1e-0b4d-4e8f-9a7b-6c5d4e3f2a1b'
const webhook = { id: 'orders', account: 'acc-1' } as unknown as CompiledWebhook
const rows: OutboxRow[] = [
  { kind: 'event', account: 'acc-1', event: 'purchase', visitorId: 'v-1', fields: { orderId: 'o-1' }, attributes: { plan: 'pro' }, occurredAtMs: NOW },
  { kind: 'audience', account: 'acc-1', segment: 'vip', change: 'enter', profileId: 'p-1', occurredAtMs: NOW },
]

describe('delivery ids', () => {
  it('are <seq>.<webhook> without a node, <node>:<seq>.<webhook> with one; seqOf reads the seq of both', () => {
    expect(deliveryId(7, 'orders', null)).to.equal('7.orders')
    expect(deliveryId(7, 'orders', NODE)).to.equal(`${NODE}:7.orders`)
    for (const seq of [1, 63, 64, 2 ** 32, 2 ** 40 + 3]) {
      expect(seqOf(deliveryId(seq, 'orders', null))).to.equal(seq)
      expect(seqOf(deliveryId(seq, 'orders', NODE))).to.equal(seq)
      expect(seqOf(deliveryId(seq, 'a.b:c', NODE))).to.equal(seq) // a webhook id with dots and colons
    }
  })

  it('keeps embedded records as they were: no origin, 20 elements', () => {
    const record = newRecord(rows[0]!, 5, webhook, NOW, 'node-1')
    expect(record.id).to.equal('5.orders')
    expect(record).not.to.have.property('origin')
    const bytes = encodeRecord(record)
    expect(bytes[2]).to.equal(20)
    expect(decodeRecord(bytes)).to.deep.equal(record)
  })

  it('stores a cluster record compactly with its node, and reads it back with the same id', () => {
    for (const row of rows) {
      const record = newRecord(row, 9, webhook, NOW, NODE, NODE)
      expect(record.id).to.equal(`${NODE}:9.orders`)
      expect(record.item.id).to.equal(record.id)
      const bytes = encodeRecord(record)
      expect(bytes[2]).to.equal(21) // the tuple, not a map
      expect(Buffer.from(bytes).toString('latin1')).not.to.include(':9.orders')
      expect(decodeRecord(bytes)).to.deep.equal(JSON.parse(JSON.stringify(record)))
    }
    const scheduled = scheduledRecord(11, webhook, { account: 'acc-1', event: 'schedule' }, NOW, NOW, NODE, NODE)
    expect(scheduled.id).to.equal(`${NODE}:11.orders`)
    expect(decodeRecord(encodeRecord(scheduled))).to.deep.equal(JSON.parse(JSON.stringify(scheduled)))
  })

  it('makes from a row\'s bytes the very record newRecord makes, with the node, for seqs of every size', () => {
    for (const row of rows) {
      for (const seq of [1, 63, 64, 127, 128, 65_536, 2 ** 32, 2 ** 40 + 3]) {
        const expected = JSON.parse(JSON.stringify(newRecord(row, seq, webhook, NOW, NODE, NODE)))
        const bytes = recordOfRow(encodeRow(row), seq, recordPrefix('orders', row.account, NODE), NOW, originBytes(NODE))
        expect(decodeRecord(bytes)).to.deep.equal(expected)
        expect(decodeRecord(bytes)).to.deep.equal(decodeRecord(encodeRecord(expected)))
        expect(decodeMessage(encodeMessage([bytes, encodeRecord(newRecord(row, 2, webhook, NOW, 'node-1'))]))[0]).to.deep.equal(expected)
      }
    }
  })

  it('keeps the id of a resent row\'s first place (node and seq there), stored compactly, from a row\'s bytes too', () => {
    const FIRST = 'a1b2c3d4-0000-4000-8000-000000000001'
    for (const row of rows) {
      for (const seq of [1, 64, 2 ** 32]) {
        const record = newRecord(row, seq, webhook, NOW, NODE, NODE, { node: FIRST, seq: 17 })
        expect(record.id).to.equal(`${FIRST}:17.orders`)
        expect(record.item.id).to.equal(record.id)
        expect(record.seq).to.equal(seq) // the key here stays this node's
        const bytes = encodeRecord(record)
        expect(bytes[2]).to.equal(22)
        expect(decodeRecord(bytes)).to.deep.equal(JSON.parse(JSON.stringify(record)))
        const fast = recordOfRow(encodeRow(row), seq, recordPrefix('orders', row.account, NODE), NOW, originBytes(FIRST, 17))
        expect(decodeRecord(fast)).to.deep.equal(JSON.parse(JSON.stringify(record)))
      }
    }
    // Embedded mode (no node of its own) has no first place to keep.
    expect(newRecord(rows[0]!, 5, webhook, NOW, 'node-1', null, { node: FIRST, seq: 17 }).id).to.equal('5.orders')
  })

  it('publishes a cluster record under its id alone (any node resending it makes the same message id), others under the node\'s', () => {
    const FIRST = 'a1b2c3d4-0000-4000-8000-000000000001'
    expect(messageIdOf(newRecord(rows[0]!, 5, webhook, NOW, NODE, NODE, { node: FIRST, seq: 17 }), 'node-2')).to.equal(`${FIRST}:17.orders`)
    expect(messageIdOf(newRecord(rows[0]!, 17, webhook, NOW, FIRST, FIRST), 'node-1')).to.equal(`${FIRST}:17.orders`)
    expect(messageIdOf(newRecord(rows[0]!, 5, webhook, NOW, 'node-1'), 'node-1')).to.equal('node-1:5.orders')
  })

  it('finds by id the record of a row resent for another node, whose id does not carry its key here', async () => {
    const dir = tempDir()
    const store = new Store({ path: dir, durability: 'committed' })
    try {
      const FIRST = 'a1b2c3d4-0000-4000-8000-000000000001'
      const own = newRecord(rows[0]!, 5, webhook, NOW, store.nodeId, store.nodeId)
      const resent = newRecord(rows[1]!, 6, webhook, NOW, store.nodeId, store.nodeId, { node: FIRST, seq: 5 })
      for (const record of [own, resent]) await store.deliveries.put([record.account, record.webhookId, record.seq], asStored(encodeRecord(record)))
      // Its id names seq 5, this node's key of another record: never read as that one.
      expect(readRecordById(store, 'acc-1', 'orders', resent.id)).to.equal(undefined)
      const found = findRecordsById(store, 'acc-1', 'orders', [own.id, resent.id, `${FIRST}:9.orders`])
      expect([...found.keys()]).to.have.members([own.id, resent.id])
      expect(found.get(resent.id)).to.deep.equal(JSON.parse(JSON.stringify(resent)))
    } finally {
      await store.close()
      removeDir(dir)
    }
  })
})
