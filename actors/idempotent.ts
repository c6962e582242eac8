// Idempotency-Key in the visitor and profile actors (docs/retries-and-limits.md, "Idempotent writes"). A write message
// may carry a claim (the key and the request's fingerprint): before applying it the actor looks for the
// key's record; found with the same fingerprint, the message is not applied and the stored answer is the
// reply (the claim says so: `replayed`); found with another, 422. Not found, the message is applied and
// its answer recorded with the state write (src/store/idempotency.ts; cluster mode: in the same
// changelog entry, entity-log.ts).
//
// The actor runs one message at a time, so a second request with the key waits in the mailbox for the
// first: it finds the first's record (not committed yet: IdempotencyRecords keeps it in memory until
// then), and its answer waits for the first write to be durable, as the first's does.

import { ApiError } from '../src/errors.js'
import { IDEMPOTENCY_FORWARDED_RETENTION_MS, IDEMPOTENCY_RETENTION_MS, idempotencyScope, type IdempotencyRecord, type IdempotencyRecords } from '../src/store/idempotency.js'

/** A write's Idempotency-Key, from the HTTP layer; `replayed` is set by the actor when it answered from the record. */
export interface IdempotencyClaim {
  readonly key: string
  /** Of the endpoint and the body (src/http/idempotency-key.ts). */
  readonly fingerprint: string
  /**
   * The key a forwarding node gave a keyless write (FORWARDED_KEY_PREFIX), not the client's: kept
   * IDEMPOTENCY_FORWARDED_RETENTION_MS, and its replays are not marked to the client.
   */
  readonly forwarded?: boolean
  replayed: boolean
}

/** What a write made with a claim stores beside its state (the entity log puts it in the entry). */
export interface IdempotentWrite {
  scope: string
  record: IdempotencyRecord
}

/** The stored answer for the claim, or null to apply the message; throws 422 when the key answered another request. */
export function recall (records: IdempotencyRecords, account: string, tag: 'v' | 'p', id: string, claim: IdempotencyClaim, nowMs: number): IdempotencyRecord | null {
  const record = records.find(account, idempotencyScope(tag, id, claim.key), nowMs)
  if (record === null) return null
  if (record.f !== claim.fingerprint) {
    throw new ApiError('idempotency_key_reused', 'This Idempotency-Key was used with another request within the last 24 hours: a retry sends the same body to the same endpoint; a new request takes a new key.')
  }
  claim.replayed = true
  return record
}

/** Record the claim's answer, in the event turn of the state write (one transaction). */
export function remember (records: IdempotencyRecords, account: string, tag: 'v' | 'p', id: string, claim: IdempotencyClaim, answer: unknown, nowMs: number): IdempotentWrite {
  const scope = idempotencyScope(tag, id, claim.key)
  const x = nowMs + (claim.forwarded === true ? IDEMPOTENCY_FORWARDED_RETENTION_MS : IDEMPOTENCY_RETENTION_MS)
  const record: IdempotencyRecord = answer === undefined ? { f: claim.fingerprint, x } : { f: claim.fingerprint, x, r: answer }
  records.put(account, scope, record)
  return { scope, record }
}

/**
 * The write that carries a claim's record, as the actor tracks it: when it fails, the record is taken
 * back (a retry with the key is applied then, not answered from a record of a write that is nowhere).
 */
export function withRecord (records: IdempotencyRecords, account: string, idem: IdempotentWrite | null, write: Promise<void>): Promise<void> {
  if (idem !== null) write.catch(() => { records.withdraw(account, idem.scope, idem.record) })
  return write
}
