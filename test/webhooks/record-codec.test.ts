// Delivery records as bytes (record-codec.ts): encoded once by the relay, stored in LMDB and published
// as they are, decodable on any node.

import { expect } from 'chai'
import { Packr } from 'msgpackr'
import { decodeMessage, decodeRecord, encodeMessage, encodeRecord } from '../../src/webhooks/index.js'

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
})
