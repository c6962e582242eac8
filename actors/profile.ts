// The profile actor (CDP): one known person of one account. It owns the person's own attributes and
// segments and a copy of each linked device's data, sent by the visitor actors after every change
// (actors talk by messages, never by reaching into each other's state). Its unified view merges them:
// its own attributes win; among devices the latest write wins and lists of strings merge as sets;
// segments are the manual ones (its own and its devices') plus those computed over the behaviour of
// all its devices together.

import type { Store } from '../src/store/store.js'
import type { Clock } from '../src/clock.js'
import type { VisitorMetrics } from '../src/matching/index.js'
import type { SegmentSet } from '../src/segments/segment-set.js'
import { mergeWindows, type Windows } from '../src/segments/windows.js'
import {
  allSegments, applyAttributes, applySegments, evaluateInto, evaluateSegments, type ChangeWanted, type MembersListed, type MembershipCounter, countErased, indexMembership, outboxErased, outboxEvent, queryEntity, EMPTY_METRICS,
  type Attributes, type AttributeValue, type EntityQuery, type EntityState, type EntityView, type EventWanted, type AttributesWanted, type EntityRef, pickAttributes,
} from './entity.js'
import type { Actor, ActorKind } from './runtime.js'
import type { EntityWrites } from './entity-writes.js'
import { recall, remember, withRecord, type IdempotencyClaim } from './idempotent.js'
import { IdempotencyRecords } from '../src/store/idempotency.js'

/** Devices kept per profile; linking one more drops the least recently active. */
export const PROFILE_VISITORS_MAX = 100
const RECENT_LIST_MAX = 100

/** A copy of one device's data, as its visitor actor last sent it. */
export interface DeviceSummary {
  attributes: Attributes
  attributeTimes: Record<string, number>
  segments: string[]
  windows: Windows
  metrics: VisitorMetrics
  /**
   * The summary's version (never lower than the visitor's clock when it sent it; absent in rows of
   * earlier releases): an older copy than the one held is not applied (actors/actor-router.ts).
   */
  seq?: number
  /** The device's experiment variants by campaign id (absent: none, or a row of an earlier release). */
  assignments?: Record<string, string>
}

export interface ProfileState extends EntityState {
  /** Linked devices, least recently active first. */
  visitors: string[]
  devices: Record<string, DeviceSummary>
  /** Links that moved a device away from this profile: [visitorId, movedAtMs], most recent last, bounded. */
  moves: [string, number][]
  /** Ids of the recent non-idempotent messages applied (unlink), oldest first, bounded: a repeat is skipped. */
  applied: string[]
  /**
   * The person's experiment variants by campaign id: the first a device of theirs reported, kept, so
   * their other devices get the same (absent: none yet).
   */
  assignments?: Record<string, string>
}

/** What a linked visitor's campaigns see of its profile. */
export interface ProfileView {
  attributes: Attributes
  segments: string[]
  /** The person's experiment variants by campaign id (absent: none). */
  assignments?: Record<string, string>
}

export type ProfileMessage =
  /** `quiet`: an import's (src/http/import-rows.ts): no outbox row, for the update nor the segment changes it makes. */
  | { type: 'attributes', attributes: Record<string, AttributeValue | null>, idem?: IdempotencyClaim, quiet?: boolean }
  | { type: 'segments', assign: string[], remove: string[], idem?: IdempotencyClaim }
  | { type: 'device', visitorId: string, summary: DeviceSummary, event?: Record<string, unknown>, nowMs: number, quiet?: boolean }
  | { type: 'unlink', visitorId: string, nowMs: number, forget?: boolean, msgId?: string }
  | { type: 'evaluate', nowMs: number }
  | { type: 'query', query: EntityQuery }
  | { type: 'snapshot' }
  | { type: 'erase' }

/** The reply to each message. */
export interface ProfileReplies {
  attributes: undefined
  /** The profile's segments after the change, its devices' included. */
  segments: string[]
  /** What the device's campaigns see of the profile now. */
  device: ProfileView
  unlink: undefined
  evaluate: undefined
  query: EntityView
  /** A copy of the state, with the unified view. */
  snapshot: ProfileSnapshot
  /** The profile's devices, erased next; null: the profile was never seen. */
  erase: string[] | null
}

export type ProfileSnapshot = ProfileState & { unified: ProfileView }

export type ProfileKind = ActorKind<ProfileState, ProfileMessage, ProfileReplies>

/**
 * Earlier releases kept device ids as the client spelled them: one spelling (lower case) now, so a
 * device that reports again in lower case is the same one (the most recent copy of a device wins).
 */
function lowerCaseDevices (state: ProfileState): ProfileState {
  if (!state.visitors.some(id => id !== id.toLowerCase())) return state
  const devices: Record<string, DeviceSummary> = {}
  const visitors: string[] = []
  for (const id of state.visitors) {
    const key = id.toLowerCase()
    const at = visitors.indexOf(key)
    if (at >= 0) visitors.splice(at, 1)
    visitors.push(key)
    if (Object.hasOwn(state.devices, id)) devices[key] = state.devices[id]!
  }
  state.visitors = visitors
  state.devices = devices
  state.moves = state.moves.map(([id, atMs]) => [id.toLowerCase(), atMs])
  return state
}

export function emptyProfile (): ProfileState {
  return { attributes: {}, segments: [], computed: [], segmentsVersion: 0, expiresAtMs: 0, indexed: [], visitors: [], devices: {}, moves: [], applied: [] }
}

export interface ProfileDeps {
  store: Store
  segments: (account: string) => SegmentSet
  clock: Clock
  wantsEvent: EventWanted
  wantsChange: ChangeWanted
  listsMembers: MembersListed
  attributesWanted: AttributesWanted
  /** Told of every segment entered or left (member counts and reports); default none. */
  membership?: MembershipCounter | null
  /** Cluster mode: writes go through the partition changelog (entity-log.ts). Absent: LMDB, as configured. */
  writes?: EntityWrites | null
  /** Idempotency-Key answers (one for both kinds, given by the wiring); default: this store's, unswept. */
  idempotency?: IdempotencyRecords
}

const NO_EVENT: Record<string, unknown> = Object.freeze({})
const NO_CHANGE_WANTED: ChangeWanted = () => false
const MOVES_MAX = 100
/** Message ids a profile remembers (actors/actor-router.ts: a repeat within them is not applied again). */
export const APPLIED_MAX = 256

export function profileKind ({ store, segments, clock, wantsEvent, wantsChange, listsMembers, attributesWanted, membership = null, writes = null, idempotency = new IdempotencyRecords(store) }: ProfileDeps): ProfileKind {
  const db = store.profiles

  /** Re-evaluate over the unified view, then write outbox rows, expiry and state in this event turn. */
  function save (actor: Actor<ProfileState>, event: Record<string, unknown>, nowMs: number, announce: string | null = null, fields: Record<string, unknown> = NO_EVENT, claim: IdempotencyClaim | null = null, answer: ((state: ProfileState) => unknown) | null = null, quiet = false): void {
    const state = actor.state
    const names = attributesWanted(actor.account)
    const ref: EntityRef = { store, kind: 'profile', account: actor.account, id: actor.id }
    if (names.size > 0) ref.attributes = pickAttributes(names, unifiedAttributes(state))
    if (announce !== null && !quiet && wantsEvent(actor.account, announce)) outboxEvent(ref, announce, nowMs, fields, null)
    const set = segments(actor.account)
    if (set.computed.length > 0 || state.computed.length > 0 || state.expiresAtMs !== 0) {
      const windows = mergeWindows(Object.values(state.devices).map(device => device.windows))
      const ctx = {
        event,
        attributes: unifiedAttributes(state),
        segments: new Set(allSegments(state, deviceSegments(state))),
        visitor: unifiedMetrics(state),
        nowMs,
        windows,
      }
      evaluateInto(ref, quiet ? NO_CHANGE_WANTED : wantsChange, state, set, evaluateSegments(set, ctx), windows, nowMs, membership)
    } else {
      state.segmentsVersion = set.version
    }
    indexMembership({ store, kind: 'profile', account: actor.account, id: actor.id }, listsMembers, state, allSegments(state, deviceSegments(state)))
    // The request's Idempotency-Key answer, with the state (same transaction, same changelog entry).
    const idem = claim === null ? null : remember(idempotency, actor.account, 'p', actor.id, claim, answer === null ? undefined : answer(state), clock.nowMs())
    // Evicted while it ran (cluster mode: its partition lost, maybe recovered since): its state may be older than the partition's.
    const write = writes === null ? store.durable(db.put([actor.account, actor.id], state)) : actor.broken ? writes.refuse(actor.account, actor.id) : writes.write('profile', actor.account, actor.id, state, idem)
    actor.track(withRecord(idempotency, actor.account, idem, write))
  }

  function segmentsOf (state: ProfileState): string[] {
    return allSegments(state, deviceSegments(state))
  }

  function view (state: ProfileState): ProfileView {
    const unified: ProfileView = { attributes: unifiedAttributes(state), segments: allSegments(state, deviceSegments(state)) }
    if (state.assignments !== undefined) unified.assignments = state.assignments
    return unified
  }

  return {
    name: 'profile',
    load (account, id) {
      const stored = db.get([account, id]) as Partial<ProfileState> | undefined
      return stored === undefined ? emptyProfile() : lowerCaseDevices({ ...emptyProfile(), ...stored })
    },
    handle (actor, message) {
      const state = actor.state
      switch (message.type) {
        case 'attributes':
          // A retry of a write made with this Idempotency-Key: answered as the first time, nothing applied.
          if (message.idem !== undefined && recall(idempotency, actor.account, 'p', actor.id, message.idem, clock.nowMs()) !== null) return undefined
          applyAttributes(state.attributes, message.attributes)
          save(actor, NO_EVENT, clock.nowMs(), 'attributesUpdated', { attributes: message.attributes }, message.idem ?? null, null, message.quiet === true)
          return undefined
        case 'segments': {
          const first = message.idem === undefined ? null : recall(idempotency, actor.account, 'p', actor.id, message.idem, clock.nowMs())
          if (first !== null) return first.r as string[]
          applySegments(state, message.assign, message.remove, membership === null ? undefined : { account: actor.account, counter: membership })
          save(actor, NO_EVENT, clock.nowMs(), 'segmentsUpdated', { assignees: message.assign, removes: message.remove }, message.idem ?? null, segmentsOf)
          return segmentsOf(state)
        }
        case 'device': {
          // A copy older than the one held (a late repeat): nothing changes, the answer is as before.
          const held = state.devices[message.visitorId]
          if (held?.seq !== undefined && message.summary.seq !== undefined && message.summary.seq < held.seq) return view(state)
          const at = state.visitors.indexOf(message.visitorId)
          if (at >= 0) state.visitors.splice(at, 1)
          // Into the uncapped index (with the state write, in this event turn): the capped list below
          // may drop this device, erasure must still find it.
          else store.ignoreFailure(store.links.put([actor.account, actor.id, message.visitorId], null))
          state.visitors.push(message.visitorId)
          state.devices[message.visitorId] = message.summary
          // The first variant the person was seen in stays theirs (a later device's is not taken).
          for (const campaign in message.summary.assignments ?? {}) {
            const assignments = state.assignments ??= {}
            if (!Object.hasOwn(assignments, campaign)) assignments[campaign] = message.summary.assignments![campaign]!
          }
          if (state.visitors.length > PROFILE_VISITORS_MAX) delete state.devices[state.visitors.shift()!]
          save(actor, message.event ?? NO_EVENT, message.nowMs, null, NO_EVENT, null, null, message.quiet === true)
          return view(state)
        }
        case 'unlink': {
          if (message.msgId !== undefined && state.applied.includes(message.msgId)) return undefined
          const at = state.visitors.indexOf(message.visitorId)
          if (at < 0) return undefined
          if (message.msgId !== undefined) {
            state.applied.push(message.msgId)
            if (state.applied.length > APPLIED_MAX) state.applied.shift()
          }
          state.visitors.splice(at, 1)
          delete state.devices[message.visitorId]
          // An erased device leaves no trace here; a device that moved to another profile is remembered.
          if (message.forget !== true) state.moves.push([message.visitorId, message.nowMs])
          if (state.moves.length > MOVES_MAX) state.moves.shift()
          save(actor, NO_EVENT, message.nowMs)
          return undefined
        }
        case 'evaluate':
          save(actor, NO_EVENT, message.nowMs)
          return undefined
        case 'query': {
          if (state.segmentsVersion !== segments(actor.account).version) save(actor, NO_EVENT, clock.nowMs())
          const unified = view(state)
          return queryEntity(unified.attributes, unified.segments, message.query) satisfies EntityView
        }
        case 'snapshot':
          return { ...structuredClone(state), unified: view(state) }
        case 'erase': {
          // Never seen: nothing to erase (the caller answers 404).
          if (db.get([actor.account, actor.id]) === undefined && actor.pending === null) return null
          if (state.expiresAtMs !== 0) store.ignoreFailure(store.expiries.remove([state.expiresAtMs, actor.account, 'profile', actor.id]))
          // The audience destinations it was added to remove it (rows spared by the erasure's forget).
          const names = attributesWanted(actor.account)
          const ref: EntityRef = { store, kind: 'profile', account: actor.account, id: actor.id }
          if (names.size > 0) ref.attributes = pickAttributes(names, unifiedAttributes(state))
          outboxErased(ref, wantsChange, state, clock.nowMs())
          indexMembership({ store, kind: 'profile', account: actor.account, id: actor.id }, listsMembers, state, [])
          if (membership !== null) countErased(state, actor.account, membership)
          const visitors = state.visitors
          actor.state = emptyProfile()
          actor.track(writes === null ? store.durable(db.remove([actor.account, actor.id])) : writes.write('profile', actor.account, actor.id, null))
          return visitors
        }
      }
    },
  }
}

/** Devices' attributes merged (latest write wins; string lists merge as sets), the profile's own on top. */
export function unifiedAttributes (state: ProfileState): Attributes {
  const out: Attributes = {}
  const times: Record<string, number> = {}
  for (const visitorId of state.visitors) {
    const device = state.devices[visitorId]
    if (device === undefined) continue
    for (const name in device.attributes) {
      const value = device.attributes[name]!
      const atMs = device.attributeTimes[name] ?? 0
      const seen = Object.hasOwn(out, name) ? out[name]! : undefined
      if (Array.isArray(value) && Array.isArray(seen)) {
        out[name] = [...new Set([...seen, ...value])]
        times[name] = Math.max(times[name]!, atMs)
      } else if (seen === undefined || atMs >= times[name]!) {
        out[name] = Array.isArray(value) ? value.slice() : value
        times[name] = atMs
      }
    }
  }
  for (const name in state.attributes) out[name] = state.attributes[name]!
  return out
}

function deviceSegments (state: ProfileState): string[] {
  const out: string[] = []
  for (const visitorId of state.visitors) {
    const device = state.devices[visitorId]
    if (device !== undefined) for (const segment of device.segments) out.push(segment)
  }
  return out
}

/** Behaviour summed over devices: counts and spend added, first seen the earliest, lists merged. */
export function unifiedMetrics (state: ProfileState): VisitorMetrics {
  const devices = state.visitors.map(id => state.devices[id]).filter(d => d !== undefined)
  if (devices.length === 0) return EMPTY_METRICS
  let firstSeenMs = 0
  let lastSeenMs = 0
  const sum = { pageViews: 0, productViews: 0, purchases: 0, totalSpent: 0 }
  const skus = new Set<string>()
  const bought = new Set<string>()
  const categories = new Set<string>()
  for (const { metrics } of devices) {
    sum.pageViews += metrics.pageViews
    sum.productViews += metrics.productViews
    sum.purchases += metrics.purchases
    sum.totalSpent += metrics.totalSpent
    if (metrics.firstSeenMs !== 0 && (firstSeenMs === 0 || metrics.firstSeenMs < firstSeenMs)) firstSeenMs = metrics.firstSeenMs
    if (metrics.lastSeenMs > lastSeenMs) lastSeenMs = metrics.lastSeenMs
    for (const sku of metrics.viewedSkus) skus.add(sku)
    for (const sku of metrics.purchasedSkus) bought.add(sku)
    for (const category of metrics.viewedCategories) categories.add(category)
  }
  return {
    ...sum,
    firstSeenMs,
    lastSeenMs,
    viewedSkus: [...skus].slice(0, RECENT_LIST_MAX),
    purchasedSkus: [...bought].slice(0, RECENT_LIST_MAX),
    viewedCategories: [...categories].slice(0, RECENT_LIST_MAX),
  }
}
