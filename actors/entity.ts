// What visitors and profiles share: attributes, manual and computed segments, and how the API reads
// and changes them; and the segment evaluation both run after every change.

import { ApiError } from '../src/errors.js'
import type { Store } from '../src/store/store.js'
import type { OutboxRow } from '../src/store/record-codec.js'
import type { VisitorMetrics } from '../src/matching/index.js'
import { evaluateSegments, membershipChanges, type SegmentSet } from '../src/segments/segment-set.js'
import { nextExpiryMs, type Windows } from '../src/segments/windows.js'

/** Attribute values as stored: a scalar or a list of strings. */
export type AttributeValue = string | number | boolean | string[]
export type Attributes = Record<string, AttributeValue>

export interface EntityState {
  attributes: Attributes
  /** Assigned and removed through the API. */
  segments: string[]
  /** Computed from the account's segment rules; changed only by evaluation. */
  computed: string[]
  /** The version of the account's segments `computed` was evaluated under. */
  segmentsVersion: number
  /** When the entity's windows next expire (its key in the expiries index), or 0. */
  expiresAtMs: number
  /** The segments this entity is filed under in the members index (what schedules page through). */
  indexed: string[]
}

/** Attributes and segments per entity are bounded so one key can never grow without limit. */
export const ATTRIBUTES_MAX = 2000
export const SEGMENTS_MAX = 1000

export type AttributeReply = Record<string, { value: string | number | boolean }[]>

/** A read: which attributes (null: all the token allows) and which segments (null: all). */
export interface EntityQuery {
  attributes: readonly string[] | null
  segments: readonly string[] | null
  allowed: (name: string) => boolean
}

export interface EntityView {
  attributes: AttributeReply
  segments: string[]
  profileId?: string
}

export const EMPTY_METRICS: VisitorMetrics = Object.freeze({
  pageViews: 0, productViews: 0, purchases: 0, totalSpent: 0, firstSeenMs: 0, lastSeenMs: 0,
  viewedSkus: [], purchasedSkus: [], viewedCategories: [],
})

/** Answer a read from the given attributes and segments as they are now (a snapshot). */
export function queryEntity (attributes: Attributes, segments: readonly string[], query: EntityQuery): EntityView {
  return {
    attributes: readAttributes(attributes, query.attributes, query.allowed),
    segments: readSegments(segments, query.segments),
  }
}

/** Manual and computed segments together, without repeats. */
export function allSegments (state: EntityState, extra: readonly string[] = []): string[] {
  if (state.computed.length === 0 && extra.length === 0) return state.segments
  return [...new Set([...state.segments, ...extra, ...state.computed])]
}

/** Apply an update: `null` deletes, anything else replaces. Refused whole if it would pass the cap. */
export function applyAttributes (attributes: Attributes, update: Record<string, AttributeValue | null>): void {
  let added = 0
  for (const name in update) if (update[name] !== null && !Object.hasOwn(attributes, name)) added++
  if (added > 0 && Object.keys(attributes).length + added > ATTRIBUTES_MAX) {
    throw new ApiError('entity_full', `This record would have more than ${ATTRIBUTES_MAX} attributes; delete some first.`, '/attributes')
  }
  for (const name in update) {
    const value = update[name]
    if (value === null || value === undefined) delete attributes[name]
    else attributes[name] = value
  }
}

/** Told each time a visitor or profile enters (+1) or leaves (-1) a segment (member counts, reports). */
export type MembershipCounter = (account: string, segment: string, delta: 1 | -1) => void

/** Assign then remove (a name in both ends removed); returns the manual segments after the change. */
export function applySegments (state: EntityState, assign: readonly string[], remove: readonly string[], ref?: { account: string, counter: MembershipCounter }): string[] {
  const before = new Set(state.segments)
  const current = new Set(state.segments)
  for (const name of assign) current.add(name)
  for (const name of remove) current.delete(name)
  if (current.size > SEGMENTS_MAX) throw new ApiError('entity_full', `This record would be in more than ${SEGMENTS_MAX} segments.`, '/assignees')
  state.segments = [...current]
  if (ref !== undefined) {
    for (const name of current) if (!before.has(name)) ref.counter(ref.account, name, 1)
    for (const name of before) if (!current.has(name)) ref.counter(ref.account, name, -1)
  }
  return state.segments
}

/** An entity erased leaves every segment it was in. */
export function countErased (state: EntityState, account: string, counter: MembershipCounter): void {
  for (const name of new Set([...state.segments, ...state.computed])) counter(account, name, -1)
}

function readAttributes (attributes: Attributes, names: readonly string[] | null, allowed: (name: string) => boolean): AttributeReply {
  const out: AttributeReply = {}
  if (names === null) {
    for (const name in attributes) if (allowed(name)) out[name] = asValues(attributes[name]!)
    return out
  }
  for (const name of names) if (Object.hasOwn(attributes, name)) out[name] = asValues(attributes[name]!)
  return out
}

function readSegments (segments: readonly string[], names: readonly string[] | null): string[] {
  if (names === null) return segments.slice()
  return names.filter(name => segments.includes(name))
}

function asValues (value: AttributeValue): { value: string | number | boolean }[] {
  return Array.isArray(value) ? value.map(v => ({ value: v })) : [{ value }]
}

/** Who is being evaluated, for the audience events and the expiry index. */
export interface EntityRef {
  store: Store
  kind: 'visitor' | 'profile'
  account: string
  id: string
  /** What its audience and event outbox rows carry of its attributes (pickAttributes), if anything. */
  attributes?: Record<string, unknown>
}

/** Which attribute names the account's webhooks read (an empty set for most accounts). */
export type AttributesWanted = (account: string) => ReadonlySet<string>

/**
 * The attributes a webhook reads, as campaign rules see them (later sources win: a linked visitor's
 * own, then its profile's unified view); undefined when no webhook reads any, so rows stay small.
 */
export function pickAttributes (names: ReadonlySet<string>, ...sources: Attributes[]): Record<string, unknown> | undefined {
  if (names.size === 0) return undefined
  const out: Record<string, unknown> = {}
  for (const name of names) {
    for (const source of sources) if (Object.hasOwn(source, name)) out[name] = source[name]
  }
  return out
}

/** Whether an enabled audience webhook of the account selects this change of this segment. */
export type ChangeWanted = (account: string, change: 'enter' | 'exit' | 'erase', segment: string) => boolean

/**
 * Re-evaluate the computed segments and write what follows, in the caller's event turn (so in the
 * same transaction as the state write that must follow at once): one audience event per enter and
 * exit that an audience webhook selects into the outbox (no row for a change nobody is sent: at 50
 * segments, rows for every change cost a third of the throughput), and the entity's next window
 * expiry into the expiries index.
 */
export function evaluateInto (ref: EntityRef, wantsChange: ChangeWanted, state: EntityState, set: SegmentSet, members: string[], windows: Windows, nowMs: number, counter: MembershipCounter | null = null): void {
  const { entered, exited } = membershipChanges(state.computed, members)
  if (entered.length > 0 || exited.length > 0) {
    const who = ref.kind === 'visitor' ? 'visitorId' : 'profileId'
    if (counter !== null) {
      for (const segment of entered) counter(ref.account, segment, 1)
      for (const segment of exited) counter(ref.account, segment, -1)
    }
    for (const segment of entered) {
      if (set.backfilling.has(segment) || !wantsChange(ref.account, 'enter', segment)) continue
      ref.store.appendOutbox(withAttributes({ kind: 'audience', account: ref.account, segment, [who]: ref.id, change: 'enter', occurredAtMs: nowMs }, ref))
    }
    for (const segment of exited) {
      if (set.backfilling.has(segment) || !wantsChange(ref.account, 'exit', segment)) continue
      ref.store.appendOutbox(withAttributes({ kind: 'audience', account: ref.account, segment, [who]: ref.id, change: 'exit', occurredAtMs: nowMs }, ref))
    }
    state.computed = members
  }
  state.segmentsVersion = set.version
  const next = set.computed.length === 0 ? 0 : nextExpiryMs(windows, set.specsByKey)
  const filed = state.expiresAtMs
  // Filed too early is harmless: the sweep evaluates the entity then and files the next expiry. So the
  // index is written only when the expiry goes away, moves earlier, or is due: not on the many events
  // that merely move it later (a write per event otherwise, about a tenth of the throughput at 50 segments).
  if (next !== filed && (next === 0 || filed === 0 || next < filed || filed <= nowMs)) {
    if (state.expiresAtMs !== 0) ref.store.ignoreFailure(ref.store.expiries.remove([state.expiresAtMs, ref.account, ref.kind, ref.id]))
    if (next !== 0) ref.store.ignoreFailure(ref.store.expiries.put([next, ref.account, ref.kind, ref.id], null))
    state.expiresAtMs = next
  }
}

/**
 * Erasure of an entity: for each computed segment it is a member of that an audience destination
 * sends (`wantsChange(…, 'erase', …)`), an 'erase' row into the outbox, in the event turn of the
 * state's removal, so the destinations it was added to remove it. The row carries the identifiers the
 * destinations read (ref.attributes); the erasure's forget (delivery/history.ts) spares these rows.
 */
export function outboxErased (ref: EntityRef, wantsChange: ChangeWanted, state: EntityState, nowMs: number): void {
  const who = ref.kind === 'visitor' ? 'visitorId' : 'profileId'
  for (const segment of state.computed) {
    if (!wantsChange(ref.account, 'erase', segment)) continue
    ref.store.appendOutbox(withAttributes({ kind: 'audience', account: ref.account, segment, [who]: ref.id, change: 'erase', occurredAtMs: nowMs }, ref))
  }
}

/** Whether the members of this segment are indexed (an enabled schedule webhook syncs it). */
export type MembersListed = (account: string, segment: string) => boolean

/**
 * Keep the members index ([account, segment, kind, id]) in step with the entity's segments that a
 * schedule webhook syncs (the index is written on the hot path: only for segments that are read), in
 * the event turn of the state write. Self-correcting: it diffs against what it filed last time.
 */
export function indexMembership (ref: EntityRef, listed: MembersListed, state: EntityState, all: readonly string[]): void {
  const before = state.indexed
  // Most accounts have no schedule webhook: then nothing is listed and nothing is allocated per event.
  let now: Set<string> | null = null
  for (const segment of all) if (listed(ref.account, segment)) (now ??= new Set()).add(segment)
  if (now === null && before.length === 0) return
  let changed = before.length !== (now?.size ?? 0)
  for (const segment of before) {
    if (now === null || !now.has(segment)) {
      ref.store.ignoreFailure(ref.store.members.remove([ref.account, segment, ref.kind, ref.id]))
      changed = true
    }
  }
  if (now === null) {
    state.indexed = []
    return
  }
  const had = new Set(before)
  for (const segment of now) {
    if (!had.has(segment)) {
      ref.store.ignoreFailure(ref.store.members.put([ref.account, segment, ref.kind, ref.id], null))
      changed = true
    }
  }
  if (changed) state.indexed = [...now]
}

/** Whether an enabled event webhook of the account selects this event type. */
export type EventWanted = (account: string, type: string) => boolean

/**
 * An event for event-driven webhooks, into the outbox: call it in the event turn of the state write
 * (the row and the state change commit together).
 */
export function outboxEvent (ref: EntityRef, type: string, nowMs: number, fields: Record<string, unknown>, profileId: string | null): void {
  const row: OutboxRow = { kind: 'event', account: ref.account, event: type, fields, occurredAtMs: nowMs }
  if (ref.kind === 'visitor') row.visitorId = ref.id
  const profile = ref.kind === 'profile' ? ref.id : profileId
  if (profile !== null) row.profileId = profile
  ref.store.appendOutbox(withAttributes(row, ref))
}

function withAttributes (row: OutboxRow, ref: EntityRef): OutboxRow {
  if (ref.attributes !== undefined) row.attributes = ref.attributes
  return row
}

export { evaluateSegments }
