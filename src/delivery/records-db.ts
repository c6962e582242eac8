// The deliveries db as the hub reads and writes it: each record under [account, webhookId, seq], and
// what its attempts changed since (an outcome row) right after it, under [..., OUTCOME_KEY].

import { decodeRecord } from '../store/record-codec.js'
import type { Key, Store } from '../store/store.js'
import { seqOf, type DeliveryRecord, type OutcomeRow } from './record.js'

/**
 * The last element of an outcome row's key. The record's key is a prefix of it, so the outcome sorts
 * right after its record and a range of records reads both in one pass.
 */
export const OUTCOME_KEY = 0

/**
 * The delivery records of a range of the deliveries db as last settled: each record with the outcome
 * row that follows it laid over it. Records written by releases before outcome rows read as they are.
 */
export function * recordsIn (store: Store, range: { start?: unknown[], end?: unknown[] }): Generator<DeliveryRecord> {
  let record: DeliveryRecord | null = null
  for (const { key, value } of store.deliveries.getRange(range as { start?: Key, end?: Key })) {
    if ((key as unknown[]).length === 3) {
      if (record !== null) yield record
      record = recordOf(value) ?? null
    } else if (record !== null && (key as unknown[])[2] === record.seq) {
      yield { ...record, ...(recordOf(value) as OutcomeRow | undefined) }
      record = null
    }
  }
  if (record !== null) yield record
}

/** A webhook's delivery records as last settled, in sequence (creation) order, seq in [fromSeq, toSeq). */
export function recordsOf (store: Store, account: string, webhookId: string, fromSeq = 0, toSeq = Number.MAX_SAFE_INTEGER): Iterable<DeliveryRecord> {
  return recordsIn(store, { start: [account, webhookId, fromSeq], end: [account, webhookId, toSeq] })
}

/** One delivery record as last settled. */
export function readRecord (store: Store, account: string, webhookId: string, seq: number): DeliveryRecord | undefined {
  const record = recordOf(store.deliveries.get([account, webhookId, seq]))
  if (record === undefined) return undefined
  const outcome = recordOf(store.deliveries.get([account, webhookId, seq, OUTCOME_KEY])) as OutcomeRow | undefined
  return outcome === undefined ? record : { ...record, ...outcome }
}

/** Remove a record and its outcome row. Resolves with the record's removal. */
export function removeRecord (store: Store, account: string, webhookId: string, seq: number, onFailure: (error: unknown) => void): Promise<boolean> {
  store.ignoreFailure(store.deliveries.remove([account, webhookId, seq, OUTCOME_KEY]), onFailure)
  return store.deliveries.remove([account, webhookId, seq])
}

/**
 * A stored delivery record or outcome row: the bytes encodeRecord made (a Buffer, as LMDB gives a
 * msgpack bin), or a value stored as a plain msgpack record (a record of an earlier release).
 */
function recordOf (value: unknown): DeliveryRecord | undefined {
  return value instanceof Uint8Array ? decodeRecord(value) as DeliveryRecord : value as DeliveryRecord | undefined
}

/**
 * The delivery record of an id, when this node's store holds that record: in cluster mode an id of
 * another node carries that node's seq, which here may be the key of another record.
 */
export function readRecordById (store: Store, account: string, webhookId: string, id: string): DeliveryRecord | undefined {
  const record = readRecord(store, account, webhookId, seqOf(id))
  return record?.id === id ? record : undefined
}
