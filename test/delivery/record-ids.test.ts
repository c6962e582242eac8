// Delivery ids (record.ts): `<seq>.<webhook>` in embedded mode, `<node>:<seq>.<webhook>` in cluster mode,
// where every node's outbox counts from 1. Both derive the record's key (seqOf), both are stored as
// the compact tuple (record-codec.ts: a 21st element for the node), and the relay's fast path from a
// row's bytes makes the very record newRecord makes. A row a new owner resends after a takeover keeps
// a record id of that node (its key there), and its item is sent under its first place's id (messageId).

import { expect } from 'chai'
import { asStored, decodeMessage, decodeRecord, encodeMessage, encodeRecord, encodeRow, originBytes, recordOfRow, recordPrefix, type OutboxRow } from '../../src/store/record-codec.js'
import { Store } from '../../src/store/store.js'
import { readRecordById } from '../../src/delivery/records-db.js'
import { messageIdOf } from '../../src/delivery/jetstream/subjects.js'
import { batchIdOf } from '../../src/webhooks/batch-id.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { deliveryId, newRecord, scheduledRecord, seqOf } from '../../src/delivery/record.js'
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

  it('gives a resent row\'s record this node\'s id and key, and its item its first place\'s id as webhook-id', () => {
    const FIRST = 'a1b2c3d4-0000-4000-8000-000000000001'
    for (const row of rows) {
      for (const seq of [1, 64, 2 ** 32]) {
        const record = newRecord(row, seq, webhook, NOW, NODE, NODE, { node: FIRST, seq: 17 })
        expect(record.id).to.equal(`${NODE}:${seq}.orders`)
        expect(seqOf(record.id)).to.equal(record.seq)
        expect(record.item.id).to.equal(record.id)
        expect(record.item.messageId).to.equal(`${FIRST}:17.orders`)
        expect(batchIdOf([record.item])).to.equal(`${FIRST}:17.orders`)
        // Stored and published whole (not the tuple, which has no room for it), read back the same.
        const bytes = encodeRecord(record)
        expect(decodeRecord(bytes)).to.deep.equal(JSON.parse(JSON.stringify(record)))
        expect(decodeMessage(encodeMessage([encodeRecord(newRecord(row, 2, webhook, NOW, NODE, NODE)), bytes]))[1]).to.deep.equal(JSON.parse(JSON.stringify(record)))
        // Its stream message id is its own, as any record's: no other record has it.
        expect(messageIdOf(record, NODE)).to.equal(`${NODE}:${NODE}:${seq}.orders`)
      }
    }
    // Embedded mode has no first place to keep; a row of its own writer has no messageId.
    expect(newRecord(rows[0]!, 5, webhook, NOW, 'node-1', null, { node: FIRST, seq: 17 }).item).not.to.have.property('messageId')
    expect(newRecord(rows[0]!, 5, webhook, NOW, NODE, NODE).item).not.to.have.property('messageId')
  })

  it('finds a resent row\'s record by its id, from its key', async () => {
    const dir = tempDir()
    const store = new Store({ path: dir, durability: 'committed' })
    try {
      const resent = newRecord(rows[1]!, 6, webhook, NOW, store.nodeId, store.nodeId, { node: 'a1b2c3d4-0000-4000-8000-000000000001', seq: 5 })
      await store.deliveries.put([resent.account, resent.webhookId, resent.seq], asStored(encodeRecord(resent)))
      expect(readRecordById(store, 'acc-1', 'orders', resent.id)).to.deep.equal(JSON.parse(JSON.stringify(resent)))
    } finally {
      await store.close()
      removeDir(dir)
    }
  })
})
