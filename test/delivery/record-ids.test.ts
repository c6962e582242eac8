// Delivery ids (record.ts): `<seq>.<webhook>` in embedded mode, `<node>:<seq>.<webhook>` in cluster mode,
// where every node's outbox counts from 1. Both derive the record's key (seqOf), both are stored as
// the compact tuple (record-codec.ts: a 21st element for the node), and the relay's fast path from a
// row's bytes makes the very record newRecord makes.

import { expect } from 'chai'
import { decodeMessage, decodeRecord, encodeMessage, encodeRecord, encodeRow, originBytes, recordOfRow, recordPrefix, type OutboxRow } from '../../src/store/record-codec.js'
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
})
