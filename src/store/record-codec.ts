// Delivery records as bytes. The relay encodes each record once; those bytes are both its LMDB value
// and its part of a JetStream message, so a record is not encoded a second time to be published.
//
// The encoding is msgpack: a record as a tuple of its fields (see encodeRecord), and what it nests
// (attempts) or what is not a record (outcome rows) with record structures that are compiled in
// (STRUCTURES): the same on every node and every release, so any node decodes any record without the
// structures of the data folder that wrote it. Maps keyed by site data (event fields, attributes) are
// plain msgpack maps; a record shape that is not listed is described inside the value itself: still
// decodable anywhere, only larger.
//
// A message is MESSAGE_MAGIC followed by one record, or an array of records whose parts are the
// records' own bytes. A message without the magic is of an earlier release (msgpack records described
// inside the message) and decodes as before.
//
// Outbox rows are tuples too (encodeRow), laid out so that the relay makes a record of a row without
// encoding anything of the site's again: the row's bytes from occurredAtMs on are, as they are, the
// record tuple's context part (recordOfRow).
//
// In LMDB (the outbox and deliveries dbs, whose own encoder is msgpack) these bytes are stored inside a
// msgpack bin (asStored): the db decodes them as a Buffer of these very bytes.

import { asBinary } from 'lmdb'
import { Packr, unpack } from 'msgpackr'

/**
 * The shapes the relay writes, each in the key order the code builds it. APPEND ONLY: a structure's
 * position is its id in every value written since; changing or removing one misreads stored records.
 */
const STRUCTURES: readonly (readonly string[])[] = [
  // DeliveryRecord
  ['id', 'account', 'webhookId', 'seq', 'status', 'item', 'attempt', 'attempts', 'dueMs', 'createdAtMs', 'updatedAtMs', 'replayedAtMs', 'node'],
  // DeliveryItem
  ['id', 'occurredAtMs', 'context'],
  // DeliveryContext of an event row, of an audience row, of a schedule run
  ['account', 'visitorId', 'event', 'eventFields'],
  ['account', 'profileId', 'event', 'eventFields'],
  ['account', 'visitorId', 'profileId', 'event', 'eventFields'],
  ['account', 'visitorId', 'audience', 'change'],
  ['account', 'profileId', 'audience', 'change'],
  ['account', 'visitorId', 'profileId', 'audience', 'change'],
  ['account', 'event'],
  ['account', 'audience', 'event', 'visitorId'],
  ['account', 'audience', 'event', 'profileId'],
  // AttemptRecord
  ['atMs', 'latencyMs', 'status'],
  ['atMs', 'latencyMs', 'status', 'error'],
  ['atMs', 'latencyMs', 'error'],
  // The outcome row kept beside a record (src/delivery/record.ts)
  ['status', 'attempt', 'attempts', 'dueMs', 'updatedAtMs'],
]

function packr (): Packr {
  return new Packr({
    structures: STRUCTURES.map(keys => [...keys]),
    maxSharedStructures: STRUCTURES.length,
    // Nothing learnt at run time is shared: every other shape is described in its own value.
    shouldShareStructure: () => false,
    // Beacon's own objects as records; site-keyed maps (event fields, attributes) as plain maps, which
    // cost less to write than a record describing its keys inline, and decode as plain objects.
    useRecords: isOwnRecord,
    mapsAsObjects: true,
  })
}

/** A delivery record, item, context, attempt or outcome: each has one of these fields, site data seldom does. */
function isOwnRecord (value: object): boolean {
  const o = value as Record<string, unknown>
  return o.webhookId !== undefined || o.context !== undefined || o.updatedAtMs !== undefined || o.atMs !== undefined ||
    (o.account !== undefined && (o.event !== undefined || o.audience !== undefined))
}

// Two instances: decoding a value that describes its own shapes must not teach the encoder anything.
const encoder = packr()
const decoder = packr()

/** 0xc1 is never used by msgpack: a message starting with it is of this codec, then its version. */
const MESSAGE_MAGIC = 0xc1
const MESSAGE_VERSION = 1

/**
 * A delivery record is written as a tuple, [TUPLE, seq, webhookId, account, node, status, attempt,
 * attempts, dueMs, createdAtMs, updatedAtMs, replayedAtMs, occurredAtMs, visitorId, profileId, event,
 * eventFields, audience, change, attributes[, origin]]: no field names at all, and what its ids repeat (the id
 * `<seq>.<webhookId>`, or `<origin>:<seq>.<webhookId>` in cluster mode, the item's id, the context's
 * account) not written twice. A record those do not hold for (among them one whose item is sent under
 * another webhook-id, `messageId`: a row a new owner resends after a takeover, rare), and any other
 * value (an outcome row), is written as it is.
 */
const TUPLE = 1

interface RecordShape {
  id: string
  account: string
  webhookId: string
  seq: number
  status: string
  attempt: number
  attempts: unknown[]
  dueMs: number
  createdAtMs: number
  updatedAtMs: number
  replayedAtMs: number | null
  node?: string
  origin?: string
  item: { id: string, occurredAtMs: number, context: ContextShape, messageId?: string, replay?: string, body?: string }
}

interface ContextShape {
  account: string
  visitorId?: string
  profileId?: string
  event?: string
  eventFields?: Record<string, unknown>
  audience?: string
  change?: string
  attributes?: Record<string, unknown>
}

/** A record's bytes: its LMDB value, and its part of a message. */
export function encodeRecord (value: object): Uint8Array {
  const record = value as RecordShape
  const item = record.item
  const context = item?.context
  const origin = record.origin
  const id = origin === undefined ? `${record.seq}.${record.webhookId}` : `${origin}:${record.seq}.${record.webhookId}`
  if (context === undefined || context.account !== record.account || item.id !== record.id || record.id !== id || item.messageId !== undefined || item.replay !== undefined || item.body !== undefined) {
    return encoder.pack(value)
  }
  const tuple = [
    TUPLE, record.seq, record.webhookId, record.account, record.node ?? null, record.status, record.attempt,
    record.attempts, record.dueMs, record.createdAtMs, record.updatedAtMs, record.replayedAtMs, item.occurredAtMs,
    context.visitorId ?? null, context.profileId ?? null, context.event ?? null, context.eventFields ?? null,
    context.audience ?? null, context.change ?? null, context.attributes ?? null,
  ]
  // Cluster mode: the id's node, a 21st element (records of embedded mode keep their 20).
  if (origin !== undefined) tuple.push(origin)
  return encoder.pack(tuple)
}

/**
 * Where an outbox row was first written, when another node resends it (cluster mode: a partition taken
 * over): that node's data folder id and its outbox seq there, which name the webhook-id its deliveries
 * are sent under.
 */
export interface RowOrigin {
  node: string
  seq: number
}

/**
 * An outbox row: what a state change leaves for the relay (an event, or an audience change). Written
 * as the tuple [ROW, account, occurredAtMs, visitorId, profileId, event, fields, segment, change, attributes].
 */
export interface OutboxRow {
  kind: 'event' | 'audience'
  account: string
  event?: string
  segment?: string
  /** 'erase': the person was erased while a member; only audience destinations take it (as a remove). */
  change?: 'enter' | 'exit' | 'erase'
  visitorId?: string
  profileId?: string
  fields?: Record<string, unknown>
  /** The entity's stored attributes that the account's webhook templates read (`attribute.<name>`). */
  attributes?: Record<string, unknown>
  occurredAtMs: number
}

const ROW = 2

/** An outbox row's bytes. */
export function encodeRow (row: OutboxRow): Uint8Array {
  return encoder.pack([
    ROW, row.account, row.occurredAtMs, row.visitorId ?? null, row.profileId ?? null,
    row.kind === 'event' ? row.event! : null, row.fields ?? null, row.segment ?? null, row.change ?? null,
    row.attributes ?? null,
  ])
}

/** An outbox row from its bytes (encodeRow's). */
export function decodeRow (bytes: Uint8Array): OutboxRow {
  const t = decoder.unpack(bytes) as unknown[]
  if (!Array.isArray(t) || t[0] !== ROW) throw new Error('not an outbox row')
  const row: OutboxRow = t[5] !== null
    ? { kind: 'event', account: t[1] as string, event: t[5] as string, occurredAtMs: t[2] as number }
    : { kind: 'audience', account: t[1] as string, segment: t[7] as string, change: t[8] as 'enter' | 'exit' | 'erase', occurredAtMs: t[2] as number }
  if (t[3] !== null) row.visitorId = t[3] as string
  if (t[4] !== null) row.profileId = t[4] as string
  if (t[6] !== null) row.fields = t[6] as Record<string, unknown>
  // Rows of earlier releases have no attributes (nine elements).
  if (t[9] !== undefined && t[9] !== null) row.attributes = t[9] as Record<string, unknown>
  return row
}

/** What recordOfRow writes between a record's seq and its numbers, for each record of one webhook made on one node. */
export function recordPrefix (webhookId: string, account: string, node: string): Uint8Array {
  return encoder.pack([webhookId, account, node, 'pending']).subarray(1) // without the fixarray's header
}

/**
 * The bytes encodeRecord makes of a new record (pending, attempt 1, created now) of an outbox row, from
 * the row's bytes: the row's context part copied, the rest written here, so msgpackr is not involved.
 */
export function recordOfRow (row: Uint8Array, seq: number, prefix: Uint8Array, nowMs: number, origin: Uint8Array | null = null): Uint8Array {
  // The row: fixarray of 10 (9 from earlier releases: no attributes), ROW, the account (a str of any
  // length), then its context part, which ends with the attributes.
  const withAttributes = row[0] === 0x9a
  if ((row[0] !== 0x99 && !withAttributes) || row[1] !== ROW) throw new Error('not an outbox row')
  const head = row[2]!
  const contextAt = 2 + (head >= 0xa0 && head <= 0xbf ? 1 + (head & 0x1f)
    : head === 0xd9 ? 2 + row[3]!
      : head === 0xda ? 3 + ((row[3]! << 8) | row[4]!)
        : 5 + ((row[3]! << 24) >>> 0) + ((row[4]! << 16) | (row[5]! << 8) | row[6]!))
  const context = row.subarray(contextAt)
  const seqSize = seq < 0x40 ? 1 : seq <= 0xffffffff ? 5 : 9
  const out = Buffer.allocUnsafe(4 + seqSize + prefix.length + 3 + 18 + 1 + context.length + (withAttributes ? 0 : 1) + (origin?.length ?? 0))
  out[0] = 0xdc // array16 of 20 (21 with the origin)
  out[1] = 0
  out[2] = origin === null ? 20 : 21
  out[3] = TUPLE
  let at = 4
  if (seqSize === 1) {
    out[at++] = seq // a positive fixint: 0x40-0x7f are record ids here, as for msgpackr with records
  } else if (seqSize === 5) {
    out[at++] = 0xce
    out.writeUInt32BE(seq, at)
    at += 4
  } else {
    out[at++] = 0xcb
    out.writeDoubleBE(seq, at)
    at += 8
  }
  out.set(prefix, at) // webhookId, account, node, status
  at += prefix.length
  out[at++] = 1 // attempt
  out[at++] = 0x90 // attempts: []
  out[at++] = 0 // dueMs
  out[at++] = 0xcb // createdAtMs
  out.writeDoubleBE(nowMs, at)
  at += 8
  out[at++] = 0xcb // updatedAtMs
  out.writeDoubleBE(nowMs, at)
  at += 8
  out[at++] = 0xc0 // replayedAtMs
  out.set(context, at) // occurredAtMs, visitorId, profileId, event, eventFields, audience, change[, attributes]
  at += context.length
  if (!withAttributes) out[at++] = 0xc0 // attributes
  if (origin !== null) out.set(origin, at) // the id's node (originBytes)
  return out
}

/** What recordOfRow appends for a record whose id carries its node (cluster mode). */
export function originBytes (origin: string): Uint8Array {
  return encoder.pack(origin)
}

/** Bytes to put in the outbox or deliveries db as they are: inside a msgpack bin, which the db decodes as a Buffer of them. */
export function asStored (bytes: Uint8Array): ReturnType<typeof asBinary> {
  const n = bytes.length
  const stored = Buffer.allocUnsafe(5 + n)
  stored[0] = 0xc6 // bin32
  stored.writeUInt32BE(n, 1)
  stored.set(bytes, 5)
  return asBinary(stored)
}

export function decodeRecord (bytes: Uint8Array): unknown {
  return fromStored(decoder.unpack(bytes))
}

/** A value as decoded: a record tuple made a record again, anything else as it is. */
function fromStored (value: unknown): unknown {
  if (!Array.isArray(value) || value[0] !== TUPLE) return value
  const t = value as unknown[]
  const account = t[3] as string
  const origin = typeof t[20] === 'string' ? t[20] : undefined
  const id = origin === undefined ? `${t[1] as number}.${t[2] as string}` : `${origin}:${t[1] as number}.${t[2] as string}`
  const context: ContextShape = { account }
  if (t[13] !== null) context.visitorId = t[13] as string
  if (t[14] !== null) context.profileId = t[14] as string
  if (t[15] !== null) context.event = t[15] as string
  if (t[16] !== null) context.eventFields = t[16] as Record<string, unknown>
  if (t[17] !== null) context.audience = t[17] as string
  if (t[18] !== null) context.change = t[18] as string
  if (t[19] !== null) context.attributes = t[19] as Record<string, unknown>
  const record: RecordShape = {
    id, account, webhookId: t[2] as string, seq: t[1] as number, status: t[5] as string,
    item: { id, occurredAtMs: t[12] as number, context },
    attempt: t[6] as number, attempts: t[7] as unknown[], dueMs: t[8] as number, createdAtMs: t[9] as number,
    updatedAtMs: t[10] as number, replayedAtMs: t[11] as number | null,
  }
  if (t[4] !== null) record.node = t[4] as string
  if (origin !== undefined) record.origin = origin
  return record
}

/** A message of records already encoded by encodeRecord: one record as it is, several as an array. */
export function encodeMessage (parts: readonly Uint8Array[]): Uint8Array {
  const n = parts.length
  let size = 2 + (n === 1 ? 0 : n < 16 ? 1 : 3)
  for (const part of parts) size += part.length
  const message = Buffer.allocUnsafe(size)
  message[0] = MESSAGE_MAGIC
  message[1] = MESSAGE_VERSION
  let at = 2
  if (n !== 1) {
    if (n > 0xffff) throw new RangeError(`a message carries at most 65535 records, not ${n}`)
    if (n < 16) {
      message[at++] = 0x90 | n
    } else {
      message[at++] = 0xdc
      message.writeUInt16BE(n, at)
      at += 2
    }
  }
  for (const part of parts) {
    message.set(part, at)
    at += part.length
  }
  return message
}

/** The records of a message (of this codec, or of an earlier release). Throws on bytes that are neither. */
export function decodeMessage (data: Uint8Array): unknown[] {
  if (data[0] !== MESSAGE_MAGIC) {
    const value = unpack(data) as unknown
    return Array.isArray(value) ? value : [value]
  }
  if (data[1] !== MESSAGE_VERSION) throw new Error(`unknown delivery message version ${data[1]}`)
  const value = decoder.unpack(data.subarray(2)) as unknown
  // One record (a tuple, or a record as it is), or an array of them.
  if (!Array.isArray(value) || value[0] === TUPLE) return [fromStored(value)]
  return value.map(fromStored)
}
