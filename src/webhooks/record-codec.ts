// Delivery records as bytes. The relay encodes each record once; those bytes are both its LMDB value
// and its part of a JetStream message, so a record is not encoded a second time to be published.
//
// The encoding is msgpack with record structures that are compiled in (STRUCTURES): the same on
// every node and every release, so any node decodes any record without the structures of the data
// folder that wrote it, and each value is compact (no key names) and quick to decode. Maps keyed by
// site data (event fields, attributes) are plain msgpack maps; a record shape that is not listed is
// described inside the value itself: still decodable anywhere, only larger.
//
// A message is MESSAGE_MAGIC followed by one record, or an array of records whose parts are the
// records' own bytes. A message without the magic is of an earlier release (msgpack records described
// inside the message) and decodes as before.

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
  // The outcome row kept beside a record (actors/delivery.ts)
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

/** A record's bytes: its LMDB value, and its part of a message. */
export function encodeRecord (record: object): Uint8Array {
  return encoder.pack(record)
}

export function decodeRecord (bytes: Uint8Array): unknown {
  return decoder.unpack(bytes)
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
  return Array.isArray(value) ? value : [value]
}
