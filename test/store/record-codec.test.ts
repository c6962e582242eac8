// Delivery records as bytes (record-codec.ts): encoded once by the relay, stored in LMDB and published
// as they are, decodable on any node.

import { expect } from 'chai'
import { Packr } from 'msgpackr'
import { asStored, decodeMessage, decodeRecord, decodeRow, encodeMessage, encodeRecord, encodeRow, recordOfRow, recordPrefix, type OutboxRow } from '../../src/store/record-codec.js'

function record (seq: number, eventFields: Record<string, unknown> = { orderId: `o-${seq}`, total: seq * 1.5, attributes: { plan: 'pro' } }) {
  return {
    id: `${seq}.orders`, account: 'acc-1', webhookId: 'orders', seq, status: 'pending',
    item: { id: `${seq}.orders`, occurredAtMs: 1_700_000_000_000 + seq, context: { account: 'acc-1', visitorId: `v-${seq}`, event: 'purchase', eventFields } },
    attempt: 1, attempts: [], dueMs: 0, createdAtMs: 1_700_000_000_000, updatedAtMs: 1_700_000_000_000, replayedAtMs: null, node: 'node-1',
  }
}

describe('delivery record codec', () => {
  it('round-trips a record with no key names of Beacon\'s own records in its bytes, and its ids once', () => {
    const bytes = encodeRecord(record(7))
    expect(decodeRecord(bytes)).to.deep.equal(record(7))
    const text = Buffer.from(bytes).toString('latin1')
    for (const key of ['webhookId', 'occurredAtMs', 'createdAtMs', 'eventFields', 'visitorId']) expect(text).not.to.include(key)
    expect(text.split('acc-1')).to.have.length(2) // the account once, not again in the context
    expect(text).not.to.include('7.orders') // the id is the seq and the webhook id
    expect(text).to.include('orderId') // site data describes its own keys
  })

  it('keeps the structure ids of stored records: the bytes of a known record do not change', () => {
    // STRUCTURES is append only: an edit that renumbers them would misread every stored record.
    expect(Buffer.from(encodeRecord(record(1, {}))).toString('hex')).to.equal(
      'dc00140101a66f7264657273a56163632d31a66e6f64652d31a770656e64696e67019000cb4278bcfe56800000cb4278bcfe56800000c0' +
      'cb4278bcfe56801000a3762d31c0a87075726368617365de0000c0c0c0')
  })

  it('writes a record whose ids do not follow the usual pattern as it is, and reads it back the same', () => {
    const odd = { ...record(5), id: 'custom' }
    const otherAccount = { ...record(6), account: 'acc-2' } // its context still says acc-1
    for (const value of [odd, otherAccount, { ...record(7), node: undefined }]) {
      const back = decodeRecord(encodeRecord(value))
      expect(back).to.deep.equal(JSON.parse(JSON.stringify(value)))
    }
    expect(encodeRecord(otherAccount).length).to.be.above(encodeRecord(record(8)).length)
  })

  it('keeps the body of a record that carries one (a saved report\'s result)', () => {
    const withBody = { ...record(9), item: { ...record(9).item, context: { account: 'acc-1' }, body: '{"id":"r-1","rows":[]}' } }
    expect(decodeRecord(encodeRecord(withBody))).to.deep.equal(withBody)
  })

  it('round-trips shapes it does not list, also site keys named like its own fields', () => {
    const odd = record(3, { account: 'x', context: { atMs: 1 }, list: [{ a: 1 }, { a: 2 }], empty: {} })
    expect(decodeRecord(encodeRecord(odd))).to.deep.equal(odd)
    const attempts = { ...record(4), status: 'failed', attempts: [{ atMs: 1, latencyMs: 2, status: 503, error: 'HTTP 503' }, { atMs: 3, latencyMs: 4 }] }
    expect(decodeRecord(encodeRecord(attempts))).to.deep.equal(attempts)
  })

  it('makes messages of one record and of arrays of every header size from the records\' own bytes', () => {
    for (const n of [1, 2, 15, 16, 100, 1000]) {
      const records = Array.from({ length: n }, (_, i) => record(i + 1))
      expect(decodeMessage(encodeMessage(records.map(encodeRecord)))).to.deep.equal(records)
    }
  })

  it('decodes messages of an earlier release, and decodes its own correctly after them', () => {
    const earlier = new Packr({ useRecords: true })
    const records = [record(1, { q: 1 }), record(2, { q: 2 })]
    expect(decodeMessage(earlier.pack(records))).to.deep.equal(records)
    expect(decodeMessage(earlier.pack(records[0]))).to.deep.equal([records[0]])
    expect(decodeMessage(encodeMessage([encodeRecord(record(9))]))).to.deep.equal([record(9)])
  })

  it('refuses a message of an unknown version', () => {
    const message = encodeMessage([encodeRecord(record(1))])
    message[1] = 9
    expect(() => decodeMessage(message)).to.throw(/version 9/)
  })

  describe('outbox rows', () => {
    const NOW = 1_763_900_000_123
    /** The record the relay makes of a row (DeliveryHub's newRecord), as encodeRecord writes it and decodeRecord reads it. */
    const recordOf = (row: OutboxRow, seq: number, webhookId: string, node: string): unknown => {
      const id = `${seq}.${webhookId}`
      const context: Record<string, unknown> = { account: row.account }
      if (row.visitorId !== undefined) context.visitorId = row.visitorId
      if (row.profileId !== undefined) context.profileId = row.profileId
      if (row.kind === 'event') {
        context.event = row.event
        if (row.fields !== undefined) context.eventFields = row.fields
      } else {
        context.audience = row.segment
        context.change = row.change
      }
      if (row.attributes !== undefined) context.attributes = row.attributes
      return {
        id, account: row.account, webhookId, seq, status: 'pending', item: { id, occurredAtMs: row.occurredAtMs, context },
        attempt: 1, attempts: [], dueMs: 0, createdAtMs: NOW, updatedAtMs: NOW, replayedAtMs: null, node,
      }
    }
    const rows: OutboxRow[] = [
      { kind: 'event', account: 'acc-1', event: 'purchase', visitorId: 'v-1', fields: { orderId: 'o-1', total: 12.5, attributes: { plan: 'pro' } }, occurredAtMs: NOW - 5 },
      { kind: 'event', account: '7d1f0c3e-2b4a-4e6f-9a8b-1c2d3e4f5a6b', event: 'attributesUpdated', profileId: 'p-1', visitorId: 'v-2', occurredAtMs: 1.5 },
      { kind: 'event', account: 'é'.repeat(200), event: 'ünïcödé', profileId: 'p-2', fields: { ключ: ['значение', null, true], updatedAtMs: 1, account: 'x', event: 'y' }, occurredAtMs: 0 },
      { kind: 'event', account: 'a'.repeat(70_000), event: 'purchase', visitorId: 'v', fields: {}, occurredAtMs: NOW },
      { kind: 'audience', account: 'acc-1', segment: 'vip', change: 'enter', visitorId: 'v-3', occurredAtMs: NOW },
      { kind: 'audience', account: 'acc-1', segment: 'vip', change: 'exit', profileId: 'p-3', occurredAtMs: NOW },
      // With the entity's attributes that webhook templates read.
      { kind: 'event', account: 'acc-1', event: 'purchase', visitorId: 'v-4', profileId: 'p-4', fields: { orderId: 'o-4' }, attributes: { plan: 'pro', tags: ['a', 'b'] }, occurredAtMs: NOW },
      { kind: 'audience', account: 'acc-1', segment: 'vip', change: 'enter', visitorId: 'v-5', attributes: { plan: 'free' }, occurredAtMs: NOW },
    ]

    it('round-trips every kind of row, with accounts of every string header size', () => {
      for (const row of rows) expect(decodeRow(encodeRow(row))).to.deep.equal(row)
      expect(() => decodeRow(encodeRecord(record(1)))).to.throw(/not an outbox row/)
      expect(() => recordOfRow(encodeRecord(record(1)), 1, recordPrefix('orders', 'acc-1', 'node-1'), NOW)).to.throw(/not an outbox row/)
    })

    it('makes from a row\'s bytes the very record encodeRecord writes, for seqs of every size', () => {
      for (const row of rows) {
        for (const seq of [1, 63, 64, 70, 127, 128, 255, 256, 65_536, 2 ** 32 - 1, 2 ** 32, 2 ** 40 + 3]) {
          const expected = recordOf(row, seq, 'orders', 'node-1')
          const bytes = recordOfRow(encodeRow(row), seq, recordPrefix('orders', row.account, 'node-1'), NOW)
          expect(decodeRecord(bytes)).to.deep.equal(expected)
          expect(decodeRecord(bytes)).to.deep.equal(decodeRecord(encodeRecord(expected as object)))
          // And in a message, among records encoded the usual way.
          expect(decodeMessage(encodeMessage([encodeRecord(record(2)), bytes]))).to.deep.equal([record(2), expected])
        }
      }
    })

    it('reads rows an earlier release wrote (nine elements, no attributes) and makes their records', () => {
      const earlier = new Packr({ useRecords: false })
      const row: OutboxRow = { kind: 'event', account: 'acc-1', event: 'purchase', visitorId: 'v-1', fields: { orderId: 'o-1' }, occurredAtMs: NOW }
      const bytes = earlier.pack([2, row.account, row.occurredAtMs, row.visitorId, null, row.event, row.fields, null, null])
      expect(bytes[0]).to.equal(0x99)
      expect(decodeRow(bytes)).to.deep.equal(row)
      expect(decodeRecord(recordOfRow(bytes, 7, recordPrefix('orders', row.account, 'node-1'), NOW))).to.deep.equal(recordOf(row, 7, 'orders', 'node-1'))
    })

    it('stores bytes as a msgpack bin, which a msgpack db decodes as those bytes', () => {
      const bytes = encodeRow(rows[0]!)
      const stored = (asStored(bytes) as Record<string, Uint8Array>)['\x10binary-data\x02']!
      expect(stored[0]).to.equal(0xc6)
      const back = new Packr({ useRecords: true }).unpack(stored) as Uint8Array // as an lmdb db decodes it
      expect(Buffer.from(back).equals(Buffer.from(bytes))).to.equal(true)
    })
  })
})
