// The value of one row of the retained event log (docs/event-log.md), and the reading of both of its
// formats.
//
// Format 1 (since 2026-11-28) is one flat msgpack array, built in one pass over the event's own keys:
//
//   [1, visitorId, kind, profileId | null, segments | null, name, value, name, value, …]
//
// each `name` either a small integer, the place of one of Beacon's own event fields in
// EVENT_ROW_FIELDS (one byte instead of the name), or the name itself (custom fields); the pairs keep
// the event's order. It replaced a record `{ visitorId, profileId?, kind, fields, segments? }` whose
// fields were a nested msgpack map: the flat row skips the object the event's fields were copied
// into, the nested map, and about a fifth of the bytes (bench/results/2026-11-28-event-log-cost-2.md),
// and the saved reports' columns read it without building the fields back (saved-index.ts).
// Rows written in the record format before are read as they are: `storedEvent` and the accessors take
// either. A later format takes the next number in the first place.
//
// Format 2 (also since 2026-11-28) holds several events in one value: the events of one account and
// millisecond applied in one event turn after its first (a batch's, or concurrent requests'):
//
//   [2, row, row, …]
//
// each `row` one of format 1, or null where an erasure removed the event. The key's seq is the first
// event's; the others follow it one by one, so an event keeps its id (time and seq) through erasures.
// One put for a hundred events instead of a hundred puts (event-log.ts).

/** One logged event as stored (the key holds account, time and seq). */
export interface StoredEvent {
  visitorId: string
  profileId?: string
  kind: string
  fields: Record<string, unknown>
  /** The segments the visitor was in once the event was applied (absent: none, or logged before they were kept). */
  segments?: string[]
}

/** A row of format 1 (see the top of this file). */
export type EventRow = unknown[]

export const EVENT_ROW_FORMAT = 1
export const EVENT_GROUP_FORMAT = 2
/** Where the pairs of names and values start in a row of format 1. */
export const EVENT_ROW_PAIRS = 5

/**
 * Beacon's own event fields a row names by their place here. Part of the stored format: never reorder
 * or remove; a new name goes at the end. The first five are the saved reports' dimension columns, in
 * the order of DIMENSION_FIELDS (saved-index.ts reads them by place).
 */
export const EVENT_ROW_FIELDS = [
  'platform', 'device', 'path', 'campaignId', 'variant',
  'referrer', 'sku', 'price', 'brand', 'breadcrumb', 'category', 'orderId', 'orderTotal', 'purchasedItems',
  'purposes', 'timestamp', 'messageId', 'profileIdSignature',
] as const

/** Keys of the event body that are columns of the row or never kept (the token a browser may send). */
const NOT_PAIRS = -1
const FIELD_PLACES: ReadonlyMap<string, number> = new Map<string, number>([
  ...EVENT_ROW_FIELDS.map((name, place): [string, number] => [name, place]),
  ['token', NOT_PAIRS], ['account', NOT_PAIRS], ['visitorId', NOT_PAIRS], ['profileId', NOT_PAIRS], ['event', NOT_PAIRS],
])

/**
 * The row of an accepted event: its kind, and every field but the token, account, visitor, profile and
 * kind (which are columns). `segments` is copied (the caller's array may be the visitor's own).
 */
export function eventRow (visitorId: string, profileId: string | null, event: Record<string, unknown>, segments: readonly string[]): EventRow {
  const row: EventRow = [EVENT_ROW_FORMAT, visitorId, event.event, profileId, segments.length === 0 ? null : segments.slice()]
  for (const name in event) {
    const value = event[name]
    // An absent optional field (undefined) has no JSON form: the record format dropped it when read too.
    if (value === undefined) continue
    const place = FIELD_PLACES.get(name)
    if (place === NOT_PAIRS) continue
    row.push(place ?? name, value)
  }
  return row
}

/** Whether a stored value is a group of events (format 2). */
export function isEventGroup (value: unknown): value is unknown[] {
  return Array.isArray(value) && value[0] === EVENT_GROUP_FORMAT
}

/** How many events a stored value holds: a group's places (erased ones included), else one. */
export function eventCount (value: unknown): number {
  return isEventGroup(value) ? value.length - 1 : 1
}

/** The events a stored value holds: a group's, erased ones not counted, else one. */
export function eventsKept (value: unknown): number {
  if (!isEventGroup(value)) return 1
  let n = 0
  for (let i = 1; i < value.length; i++) if (value[i] !== null) n++
  return n
}

/** The event at place `i` of a stored value (its seq is the key's plus `i`): a row of either format, or null where erased. */
export function eventAt (value: unknown, i: number): unknown {
  return isEventGroup(value) ? value[i + 1] : value
}

/** Whether a stored value is a row of format 1 (else a record of the format before). */
export function isEventRow (value: unknown): value is EventRow {
  if (!Array.isArray(value)) return false
  if (value[0] !== EVENT_ROW_FORMAT) throw new Error(`event log row of an unknown format: ${String(value[0])}`)
  return true
}

/** The name of a row's pair. */
export function rowFieldName (name: unknown): string {
  return typeof name === 'number' ? EVENT_ROW_FIELDS[name]! : name as string
}

export function rowVisitor (value: unknown): string {
  return isEventRow(value) ? value[1] as string : (value as StoredEvent).visitorId
}

export function rowProfile (value: unknown): string | undefined {
  return isEventRow(value) ? value[3] as string | null ?? undefined : (value as StoredEvent).profileId
}

export function rowKind (value: unknown): string {
  return isEventRow(value) ? value[2] as string : (value as StoredEvent).kind
}

/** A stored value, of either format, as the event it holds. */
export function storedEvent (value: unknown): StoredEvent {
  if (!isEventRow(value)) return value as StoredEvent
  const fields: Record<string, unknown> = {}
  for (let i = EVENT_ROW_PAIRS; i < value.length; i += 2) fields[rowFieldName(value[i])] = value[i + 1]
  const stored: StoredEvent = { visitorId: value[1] as string, kind: value[2] as string, fields }
  if (value[3] !== null) stored.profileId = value[3] as string
  if (value[4] !== null) stored.segments = value[4] as string[]
  return stored
}
