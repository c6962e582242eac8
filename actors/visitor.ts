// The visitor actor (DMP): one anonymous device of one account. It owns the device's attributes,
// segments and tracked behaviour, and is the only writer of its row.

import type { Store } from '../src/store/store.js'
import type { Clock } from '../src/clock.js'
import { fieldsExcept } from '../src/fields-except.js'
import { assignVariant, inHoldout, isCapped, recordImpression, variantById, type CampaignSet, type Experiment, type ExperimentVariant, type ImpressionHistory, type VisitorMetrics } from '../src/matching/index.js'
import { countAllGoals, expose, HOLDOUT_GOALS, HOLDOUT_KEY, type ExperimentCounter, type Exposure } from './experiments.js'
import type { SegmentContext } from '../src/segments/rules.js'
import type { SegmentSet } from '../src/segments/segment-set.js'
import { addBackfilled, pruneWindows, recordEvent, type Windows } from '../src/segments/windows.js'
import {
  allSegments, applyAttributes, applySegments, evaluateInto, evaluateSegments, type ChangeWanted, type MembersListed, type MembershipCounter, countErased, indexMembership, outboxErased, outboxEvent, queryEntity, EMPTY_METRICS,
  type Attributes, type AttributeValue, type EntityQuery, type EntityState, type EntityView, type EventWanted, type AttributesWanted, type EntityRef, pickAttributes,
} from './entity.js'
import type { Actor, ActorKind, ActorRuntime } from './runtime.js'
import type { DeviceSummary, ProfileKind, ProfileView } from './profile.js'
import type { EntityWrites } from './entity-writes.js'
import type { ActorSender } from './actor-router.js'
import { recall, remember, withRecord, type IdempotencyClaim } from './idempotent.js'
import { IdempotencyRecords } from '../src/store/idempotency.js'
import type { EventAppender } from '../src/store/event-log.js'

/** Bounds on the behaviour kept per visitor, whatever the traffic. */
export const VIEWED_SKUS_MAX = 50
export const VIEWED_CATEGORIES_MAX = 50
export const PURCHASED_SKUS_MAX = 100
/** A repeated orderId is recognized among this many most recent orders of the visitor. */
export const ORDER_IDS_MAX = 256

export interface VisitorState extends EntityState {
  profileId: string | null
  firstSeenMs: number
  lastSeenMs: number
  /** Events seen, per event type. */
  counts: Record<string, number>
  lastPlatform: string | null
  lastDevice: string | null
  lastPath: string | null
  /** Most recent first, without repeats. */
  viewedSkus: string[]
  viewedCategories: string[]
  purchasedSkus: string[]
  purchases: number
  totalSpent: number
  orderIds: string[]
  /** Impressions of capped campaigns, by campaign id: written with the event that made them. */
  impressions: Record<string, ImpressionHistory>
  /** Bucketed counters of the window specs the account's segment rules read. */
  windows: Windows
  /** When each attribute was last written (the profile's unified view takes the latest). */
  attributeTimes: Record<string, number>
  /** The version of the last summary sent to the profile (DeviceSummary.seq; 0: none yet). */
  profileSeq: number
  /** Experiments the visitor was exposed to, by campaign id (and the account's holdout): actors/experiments.ts. */
  experiments: Record<string, Exposure>
  /**
   * When the site or the API last wrote to the visitor (an event, attributes, segments), or when its row
   * was first written otherwise (0: a row of an earlier release, not written since): what the retention
   * of inactive visitors reads (src/jobs/visitor-retention.ts). Set with the write it dates: no read writes.
   */
  activeMs: number
  /**
   * By segment, the backfill that last added counters to this visitor and the last log event it added
   * ([timeMs, seq]): a step sent again (a restart) is not counted twice (src/jobs/segment-backfill.ts).
   * Entries of segments no longer computed go with the next backfill step.
   */
  backfills: Record<string, { id: string, through: [number, number] }>
}

/** An event as validated by the HTTP layer (common fields, kind fields, custom fields). */
export interface EventBody {
  account: string
  visitorId: string
  profileId?: string
  platform: string
  device?: string
  event: string
  path?: string
  referrer?: string | null
  sku?: string
  category?: string
  orderId?: string
  orderTotal?: number
  purchasedItems?: string[]
  /** A consent event's purposes (the browser SDK's consent call): saved as the `consent` attribute. */
  purposes?: string[]
  [field: string]: unknown
}

/** The attribute a consent event sets (the destinations' default consent attribute, src/destinations/config.ts). */
export const CONSENT_ATTRIBUTE = 'consent'

export interface Campaign {
  id: string
  name: string
  priority: number
  content: unknown
  /** The visitor's variant, when the campaign runs an experiment. */
  variant?: string
}

/** The account's global holdout as compiled when the account changes: its share and hash seed. */
export interface Holdout {
  percent: number
  seed: number
}

/** The account's holdout, or null when it has none. */
export type HoldoutSource = (account: string) => Holdout | null

/** The account's compiled campaigns (null when it has none). */
export type CampaignSource = (account: string) => CampaignSet | null
/** The account's compiled segments. */
export type SegmentSource = (account: string) => SegmentSet

const EMPTY_SET: ReadonlySet<string> = new Set()

/**
 * An imported event (src/http/import-rows.ts): `atMs`, its historical time, dates it in the windows,
 * the tracked behaviour and the event log (segments are still evaluated at the message's nowMs, so an
 * event older than a window counts nowhere); it counts no experiment goal; `quiet`: no outbox row
 * (no webhook, no destination) for it nor for the segment changes it makes.
 */
export interface Imported {
  atMs: number
  quiet: boolean
}

export type VisitorMessage =
  /**
   * `track`: an event of a batch (POST /events/batch), which answers no campaigns: nothing is matched,
   * so no impression, cap or exposure is recorded for a campaign the visitor was never shown.
   */
  | { type: 'event', event: EventBody, nowMs: number, idem?: IdempotencyClaim, track?: boolean, imported?: Imported }
  | { type: 'attributes', attributes: Record<string, AttributeValue | null>, idem?: IdempotencyClaim, quiet?: boolean }
  | { type: 'segments', assign: string[], remove: string[], idem?: IdempotencyClaim }
  /** An import's link row (admin-authenticated: no signature): the visitor becomes a device of the profile. */
  | { type: 'link', profileId: string, quiet: boolean }
  | { type: 'query', query: EntityQuery }
  | { type: 'snapshot' }
  | { type: 'evaluate', nowMs: number }
  | { type: 'erase', ofProfile?: string, idleBefore?: number }
  /**
   * A segment backfill's step: counters of the visitor's logged events up to `through`, by window spec,
   * added to its own (src/jobs/segment-backfill.ts); its segment's changes are quiet meanwhile.
   */
  | { type: 'backfill', id: string, segment: string, through: [number, number], windows: Windows }

/**
 * What an erase did: `kept` when it was asked for a profile's devices and this one belongs to another
 * profile now (it is that person's), or asked for an inactive visitor (`idleBefore`, the retention) and
 * this one is linked to a profile or was active since; otherwise erased, with the profile it was linked to.
 */
export interface VisitorErased {
  existed: boolean
  kept: boolean
  profileId: string | null
}

/** The reply to each message. */
export interface VisitorReplies {
  /** The campaigns the event matched. */
  event: Campaign[]
  attributes: undefined
  /** The visitor's segments after the change. */
  segments: string[]
  link: undefined
  query: EntityView
  /** A copy of the state. */
  snapshot: VisitorState
  evaluate: undefined
  erase: VisitorErased
  /** Whether this was the backfill's first step for the visitor (false: none applied, or not the first). */
  backfill: boolean
}

export type VisitorKind = ActorKind<VisitorState, VisitorMessage, VisitorReplies>

export function emptyVisitor (): VisitorState {
  return {
    attributes: {},
    segments: [],
    profileId: null,
    firstSeenMs: 0,
    lastSeenMs: 0,
    counts: {},
    lastPlatform: null,
    lastDevice: null,
    lastPath: null,
    viewedSkus: [],
    viewedCategories: [],
    purchasedSkus: [],
    purchases: 0,
    totalSpent: 0,
    orderIds: [],
    impressions: {},
    windows: {},
    attributeTimes: {},
    profileSeq: 0,
    experiments: {},
    activeMs: 0,
    backfills: {},
    computed: [],
    segmentsVersion: 0,
    expiresAtMs: 0,
    indexed: [],
  }
}

export interface VisitorDeps {
  store: Store
  runtime: ActorRuntime
  profiles: ProfileKind
  campaigns: CampaignSource
  segments: SegmentSource
  clock: Clock
  wantsEvent: EventWanted
  wantsChange: ChangeWanted
  listsMembers: MembersListed
  attributesWanted: AttributesWanted
  /** Told of every segment entered or left (member counts and reports); default none. */
  membership?: MembershipCounter | null
  /** Cluster mode: writes go through the partition changelog (entity-log.ts). Absent: LMDB, as configured. */
  writes?: EntityWrites | null
  /** Cluster mode: messages to the profile go through the router (actor-router.ts). Absent: the runtime. */
  peers?: ActorSender | null
  /** Idempotency-Key answers (one for both kinds, given by the wiring); default: this store's, unswept. */
  idempotency?: IdempotencyRecords
  /** Told of every first exposure and goal outcome of an experiment (results); default none. */
  experiments?: ExperimentCounter | null
  /** The account's global holdout; default none. */
  holdout?: HoldoutSource
  /**
   * The retained event log (src/store/event-log.ts): told of every event applied, in the event turn of
   * the state write (one transaction). Default none (cluster mode keeps no log yet).
   */
  eventLog?: EventAppender | null
}

const NO_CAMPAIGNS: Campaign[] = []
const NO_HOLDOUT: HoldoutSource = () => null
const NO_EVENT: Record<string, unknown> = Object.freeze({})
const NO_CHANGE_WANTED: ChangeWanted = () => false
const NO_ATTRIBUTES: Attributes = Object.freeze({})
/** An event's fields webhooks are not given. */
const NOT_PASSED_ON: ReadonlySet<string> = new Set(['token'])

export function visitorKind ({ store, runtime, profiles, campaigns, segments, clock, wantsEvent, wantsChange, listsMembers, attributesWanted, membership = null, writes = null, peers = null, idempotency = new IdempotencyRecords(store), experiments = null, holdout = NO_HOLDOUT, eventLog = null }: VisitorDeps): VisitorKind {
  const db = store.visitors
  const profilesAt: ActorSender = peers ?? runtime

  /** Evaluate segments, then write outbox rows, expiry and state in this one event turn. */
  function save (actor: Actor<VisitorState>, event: Record<string, unknown>, nowMs: number, set: SegmentSet): void {
    evaluate(actor, event, nowMs, set)
    persist(actor)
  }

  /** Who writes outbox rows, with the attributes webhooks read (a linked visitor's profile's view over its own). */
  function refOf (actor: Actor<VisitorState>, profileAttributes: Attributes | null): EntityRef {
    const ref: EntityRef = { store, kind: 'visitor', account: actor.account, id: actor.id }
    const names = attributesWanted(actor.account)
    if (names.size > 0) ref.attributes = pickAttributes(names, actor.state.attributes, profileAttributes ?? NO_ATTRIBUTES)
    return ref
  }

  /** Re-evaluate computed segments; their outbox rows and expiry go out now, so persist() must follow in this turn. */
  function evaluate (actor: Actor<VisitorState>, event: Record<string, unknown>, nowMs: number, set: SegmentSet, profileAttributes: Attributes | null = null, quiet = false): void {
    const state = actor.state
    if (set.computed.length > 0 || state.computed.length > 0 || state.expiresAtMs !== 0) {
      pruneWindows(state.windows, set.specsByKey, nowMs)
      const ctx: SegmentContext = { event, attributes: state.attributes, segments: new Set(allSegments(state)), visitor: metricsOf(state), nowMs, windows: state.windows }
      evaluateInto(refOf(actor, profileAttributes), quiet ? NO_CHANGE_WANTED : wantsChange, state, set, evaluateSegments(set, ctx), state.windows, nowMs, membership)
    } else {
      state.segmentsVersion = set.version
    }
    indexMembership({ store, kind: 'visitor', account: actor.account, id: actor.id }, listsMembers, state, allSegments(state))
  }

  /** Write the state; with a claim, the request's Idempotency-Key answer too (same transaction, same changelog entry). */
  function persist (actor: Actor<VisitorState>, claim: IdempotencyClaim | null = null, answer?: unknown, logged: void | Promise<void> = undefined): void {
    const idem = claim === null ? null : remember(idempotency, actor.account, 'v', actor.id, claim, answer, clock.nowMs())
    // A row first written by something other than activity (a query's re-evaluation) is dated by it, so that it can expire.
    if (actor.state.activeMs === 0) actor.state.activeMs = clock.nowMs()
    // Evicted while it ran (cluster mode: its partition lost, maybe recovered since): its state may be older than the partition's.
    const write = writes === null ? store.durable(db.put([actor.account, actor.id], actor.state)) : actor.broken ? writes.refuse(actor.account, actor.id) : writes.write('visitor', actor.account, actor.id, actor.state, idem)
    // Cluster mode: the event's append to the log flies beside the write; the reply waits for both.
    actor.track(withRecord(idempotency, actor.account, idem, logged === undefined ? write : bothDone(write, logged)))
  }

  /** For event-driven webhooks: an outbox row, when one selects this type (call right before persist). */
  function announce (actor: Actor<VisitorState>, type: string, nowMs: number, fields: Record<string, unknown>, profileAttributes: Attributes | null = null): void {
    if (!wantsEvent(actor.account, type)) return
    // The token (browsers may send one) is never passed on.
    outboxEvent(refOf(actor, profileAttributes), type, nowMs, fieldsExcept(fields, NOT_PASSED_ON), actor.state.profileId)
  }

  function onEvent (actor: Actor<VisitorState>, event: EventBody, nowMs: number, claim: IdempotencyClaim | null, track: boolean, imported: Imported | null): Campaign[] | Promise<Campaign[]> {
    const state = actor.state
    const atMs = imported === null ? nowMs : imported.atMs
    const quiet = imported !== null && imported.quiet
    const set = campaigns(actor.account)
    const segs = segments(actor.account)
    if (event.event === 'consent' && event.purposes !== undefined) {
      // Before anything reads the attributes: this event's own outbox rows carry the new purposes.
      applyAttributes(state.attributes, { [CONSENT_ATTRIBUTE]: event.purposes.slice() })
      state.attributeTimes[CONSENT_ATTRIBUTE] = atMs
    }
    // A repeated order (a reload of the thank-you page, a browser retry) counts once, in windows too.
    const repeated = recordBehaviour(state, event, atMs)
    if (segs.specs.length > 0 && !repeated) recordEvent(state.windows, segs.specs, { event, attributes: state.attributes, segments: EMPTY_SET, visitor: EMPTY_METRICS, nowMs: atMs })
    // Goals count before this event's exposures are recorded: an exposure counts what follows it.
    if (!repeated && imported === null) countAllGoals(experiments, actor.account, state.experiments, set === null ? noExperiment : set.experiment, event, nowMs)
    // A tracked event shows nothing: as if held out (no match), and no holdout exposure recorded either.
    const held = track || holdOut(actor, event, nowMs)
    const profileId = event.profileId ?? state.profileId
    if (profileId === null) {
      // The hot path: synchronous from here to the write. Impressions are state too: match, then write.
      evaluate(actor, event, nowMs, segs, null, quiet)
      // The segments once this event is applied: what campaigns see, and what the log keeps with it.
      const inSegments = allSegments(state)
      const matched = set === null || held ? NO_CAMPAIGNS : matchCampaigns(set, event, state, state.attributes, inSegments, nowMs, experiments, actor.account, actor.id)
      if (!quiet) announce(actor, event.event, nowMs, event)
      const logged = eventLog === null ? undefined : eventLog(actor.account, actor.id, null, event, atMs, inSegments, claim === null ? null : claim.key)
      persist(actor, claim, matched, logged)
      return matched
    }
    return syncProfile(actor, profileId, event, nowMs, segs, quiet).then(view => {
      evaluate(actor, event, nowMs, segs, view.attributes, quiet)
      // The device's segments and its profile's, once this event is applied (campaigns see both; the log keeps them).
      const inSegments = allSegments(state, view.segments)
      const matched = set === null || held ? NO_CAMPAIGNS : matchCampaigns(set, event, state, { ...state.attributes, ...view.attributes }, inSegments, nowMs, experiments, actor.account, actor.id, view.assignments ?? null)
      if (!quiet) announce(actor, event.event, nowMs, event, view.attributes)
      const logged = eventLog === null ? undefined : eventLog(actor.account, actor.id, profileId, event, atMs, inSegments, claim === null ? null : claim.key)
      persist(actor, claim, matched, logged)
      return matched
    }, (error: unknown) => failAfterChange(actor, event, nowMs, segs, error))
  }

  /**
   * Whether the visitor is in the account's global holdout (no campaign at all). While the account has
   * one, each visitor's first event records it in "holdout" or "personalized", so the two compare.
   */
  function holdOut (actor: Actor<VisitorState>, event: EventBody, nowMs: number): boolean {
    const rule = holdout(actor.account)
    if (rule === null) return false
    const held = inHoldout(rule.seed, rule.percent, actor.id)
    const state = actor.state
    if (!Object.hasOwn(state.experiments, HOLDOUT_KEY)) {
      state.experiments[HOLDOUT_KEY] = expose(experiments, actor.account, HOLDOUT_KEY, 1, held ? 'holdout' : 'personalized', HOLDOUT_GOALS, state, event, nowMs)
    }
    return held
  }

  /**
   * A linked visitor tells its profile of every change (the profile keeps a copy of each device's data
   * for its unified view), and a new link is made on both sides, all durable before the answer. The
   * reply is the profile's unified view, which the visitor's campaigns see.
   *
   * A move to another profile links the new one first, then unlinks the old one, and only then points
   * the visitor at the new one: a move that fails (503, the caller retries) leaves the visitor linked to
   * the old profile, as it was, never to none. If the new profile's copy was written before the failure
   * (the unlink failed, or the reply was lost), that profile holds a copy of a device linked elsewhere
   * until the retry completes the move (or erasure skips it: the device names another profile); if the
   * unlink was written but its reply lost, the visitor's next message gives the old profile its copy back.
   */
  async function syncProfile (actor: Actor<VisitorState>, profileId: string, event: EventBody | null, nowMs: number, segs: SegmentSet, quiet = false): Promise<ProfileView> {
    const state = actor.state
    const previous = state.profileId
    // A version never lower than this node's clock: a state rolled back to its last durable write (the
    // owner died) still sends copies newer than those its lost writes sent (actor-router.ts).
    const seq = state.profileSeq = Math.max(state.profileSeq + 1, clock.nowMs())
    const summary = deviceSummary(state, segs, nowMs)
    summary.seq = seq
    const view = await profilesAt.send(profiles, actor.account, profileId, quiet ? { type: 'device', visitorId: actor.id, summary, event: event ?? undefined, nowMs, quiet } : { type: 'device', visitorId: actor.id, summary, event: event ?? undefined, nowMs })
    if (previous !== null && previous !== profileId) {
      await profilesAt.send(profiles, actor.account, previous, { type: 'unlink', visitorId: actor.id, nowMs, msgId: `${actor.id}/${seq}/unlink` })
    }
    // The visitor's row of the links index too, at its own owner (the profile's owner wrote one as well):
    // in cluster mode that is the node that keeps it across the profile's takeovers (src/store/profile-links.ts).
    if (previous !== profileId) store.ignoreFailure(store.links.put([actor.account, profileId, actor.id], null))
    state.profileId = profileId
    return view
  }

  /**
   * The change is in memory already: write it (the device's own data is right), then fail the request.
   * A failed link or move changed no `profileId` (syncProfile sets it last).
   */
  function failAfterChange (actor: Actor<VisitorState>, event: Record<string, unknown>, nowMs: number, segs: SegmentSet, error: unknown): never {
    save(actor, event, nowMs, segs)
    throw error
  }

  /**
   * After an attribute or segment update (`type` names it for event webhooks; null for re-evaluation):
   * sync the profile if linked, evaluate, save, then reply.
   */
  function afterUpdate<R> (actor: Actor<VisitorState>, reply: () => R, type: string | null = null, fields: Record<string, unknown> = NO_EVENT, claim: IdempotencyClaim | null = null, quiet = false): R | Promise<R> {
    const nowMs = clock.nowMs()
    const segs = segments(actor.account)
    const profileId = actor.state.profileId
    const finish = (profileAttributes: Attributes | null): R => {
      evaluate(actor, NO_EVENT, nowMs, segs, profileAttributes, quiet)
      if (type !== null && !quiet) announce(actor, type, nowMs, fields, profileAttributes)
      const answer = reply()
      persist(actor, claim, answer)
      return answer
    }
    if (profileId === null) return finish(null)
    return syncProfile(actor, profileId, null, nowMs, segs, quiet).then(view => finish(view.attributes), (error: unknown) => failAfterChange(actor, NO_EVENT, nowMs, segs, error))
  }

  /**
   * A row of an earlier release, stored under the id in upper case as the client sent it: moved to the
   * lower-case key with its entries in the expiries and members indexes (all in this event turn: one
   * transaction).
   */
  function legacyRow (account: string, id: string): unknown {
    const upper = id.toUpperCase()
    if (upper === id) return undefined
    const row = db.get([account, upper]) as Partial<VisitorState> | undefined
    if (row === undefined) return undefined
    store.ignoreFailure(db.put([account, id], row))
    store.ignoreFailure(db.remove([account, upper]))
    if (row.expiresAtMs !== undefined && row.expiresAtMs !== 0) {
      store.ignoreFailure(store.expiries.remove([row.expiresAtMs, account, 'visitor', upper]))
      store.ignoreFailure(store.expiries.put([row.expiresAtMs, account, 'visitor', id], null))
    }
    for (const segment of row.indexed ?? []) {
      store.ignoreFailure(store.members.remove([account, segment, 'visitor', upper]))
      store.ignoreFailure(store.members.put([account, segment, 'visitor', id], null))
    }
    return row
  }

  return {
    name: 'visitor',
    // `ABCDEF12-…` and `abcdef12-…` are one device (iOS writes UUIDs in upper case).
    key: visitorKey,
    load (account, id) {
      const stored = (db.get([account, id]) ?? legacyRow(account, id)) as Partial<VisitorState> | undefined
      // Rows written by an older release lack newer fields: fill them with their empty values.
      return stored === undefined ? emptyVisitor() : { ...emptyVisitor(), ...stored }
    },
    handle (actor, message) {
      const state = actor.state
      switch (message.type) {
        case 'event': {
          // A retry of an event sent with this Idempotency-Key: the first answer, nothing counted again.
          const first = message.idem === undefined ? null : recall(idempotency, actor.account, 'v', actor.id, message.idem, clock.nowMs())
          if (first !== null) return first.r as Campaign[]
          // An imported event is activity when it happened (the inactive-visitor retention reads it).
          state.activeMs = message.imported === undefined ? message.nowMs : Math.max(state.activeMs, message.imported.atMs)
          return onEvent(actor, message.event, message.nowMs, message.idem ?? null, message.track === true, message.imported ?? null)
        }
        case 'attributes': {
          if (message.idem !== undefined && recall(idempotency, actor.account, 'v', actor.id, message.idem, clock.nowMs()) !== null) return undefined
          applyAttributes(state.attributes, message.attributes)
          const nowMs = clock.nowMs()
          state.activeMs = nowMs
          for (const name in message.attributes) {
            if (message.attributes[name] === null) delete state.attributeTimes[name]
            else state.attributeTimes[name] = nowMs
          }
          return afterUpdate(actor, nothing, 'attributesUpdated', { attributes: message.attributes }, message.idem ?? null, message.quiet === true)
        }
        case 'segments': {
          const first = message.idem === undefined ? null : recall(idempotency, actor.account, 'v', actor.id, message.idem, clock.nowMs())
          if (first !== null) return first.r as string[]
          state.activeMs = clock.nowMs()
          applySegments(state, message.assign, message.remove, membership === null ? undefined : { account: actor.account, counter: membership })
          return afterUpdate(actor, () => allSegments(state), 'segmentsUpdated', { assignees: message.assign, removes: message.remove }, message.idem ?? null)
        }
        case 'link': {
          if (state.profileId === message.profileId) return undefined
          const nowMs = clock.nowMs()
          const segs = segments(actor.account)
          return syncProfile(actor, message.profileId, null, nowMs, segs, message.quiet).then(view => {
            evaluate(actor, NO_EVENT, nowMs, segs, view.attributes, message.quiet)
            persist(actor)
            return undefined
          }, (error: unknown) => failAfterChange(actor, NO_EVENT, nowMs, segs, error))
        }
        case 'evaluate': {
          // A window expired or the rules changed: re-evaluate without a new event.
          const segs = segments(actor.account)
          if (state.profileId !== null) return afterUpdate(actor, nothing)
          save(actor, NO_EVENT, message.nowMs, segs)
          return undefined
        }
        case 'backfill': {
          // Never seen, or erased since the log was read: nothing to rebuild, nothing written.
          if (state.firstSeenMs === 0) return false
          const last = Object.hasOwn(state.backfills, message.segment) ? state.backfills[message.segment]! : null
          const first = last === null || last.id !== message.id
          if (!first && !isAfter(message.through, last.through)) return false
          const segs = segments(actor.account)
          for (const key in message.windows) {
            const spec = segs.specsByKey.get(key)
            if (spec !== undefined) addBackfilled(state.windows, spec, message.windows[key]!, first)
          }
          for (const segment in state.backfills) if (!segs.computedNames.has(segment)) delete state.backfills[segment]
          state.backfills[message.segment] = { id: message.id, through: message.through }
          if (state.profileId !== null) return afterUpdate(actor, () => first)
          save(actor, NO_EVENT, clock.nowMs(), segs)
          return first
        }
        case 'query': {
          const segs = segments(actor.account)
          if (state.segmentsVersion !== segs.version) save(actor, NO_EVENT, clock.nowMs(), segs)
          const view = queryEntity(state.attributes, allSegments(state), message.query)
          if (state.profileId !== null) view.profileId = state.profileId
          return view
        }
        case 'snapshot':
          return structuredClone(state)
        case 'erase': {
          const profileId = state.profileId
          // A row of an earlier release under an upper-case key was moved by load, not committed yet: its state tells.
          const existed = actor.pending !== null || db.get([actor.account, actor.id]) !== undefined ||
            state.firstSeenMs !== 0 || profileId !== null || Object.keys(state.attributes).length > 0 || state.segments.length > 0
          if (message.idleBefore !== undefined) {
            // The retention's erase: an anonymous visitor inactive since before `idleBefore` only (checked
            // here, after every message queued before it); one never seen is left as it is (nothing written).
            if (!existed) return { existed, kept: false, profileId } satisfies VisitorErased
            const activeMs = lastActiveMs(state)
            if (profileId !== null || activeMs === 0 || activeMs >= message.idleBefore) return { existed, kept: true, profileId } satisfies VisitorErased
          }
          if (message.ofProfile !== undefined && profileId !== null && profileId !== message.ofProfile) {
            // Linked to another person since: kept, and no longer found as a device of the erased one.
            store.ignoreFailure(store.links.remove([actor.account, message.ofProfile, actor.id]))
            return { existed, kept: true, profileId } satisfies VisitorErased
          }
          if (state.expiresAtMs !== 0) store.ignoreFailure(store.expiries.remove([state.expiresAtMs, actor.account, 'visitor', actor.id]))
          // The audience destinations it was added to remove it (rows spared by the erasure's forget).
          outboxErased(refOf(actor, null), wantsChange, state, clock.nowMs())
          indexMembership({ store, kind: 'visitor', account: actor.account, id: actor.id }, listsMembers, state, [])
          if (membership !== null) countErased(state, actor.account, membership)
          actor.state = emptyVisitor()
          if (profileId !== null) store.ignoreFailure(store.links.remove([actor.account, profileId, actor.id]))
          actor.track(writes === null ? store.durable(db.remove([actor.account, actor.id])) : writes.write('visitor', actor.account, actor.id, null))
          return { existed, kept: false, profileId } satisfies VisitorErased
        }
      }
    },
  }
}

/** What a profile keeps of one of its devices (a copy): everything its unified view and rules need. */
export function deviceSummary (state: VisitorState, segs: SegmentSet, nowMs: number): DeviceSummary {
  pruneWindows(state.windows, segs.specsByKey, nowMs)
  const summary: DeviceSummary = structuredClone({
    attributes: state.attributes,
    attributeTimes: state.attributeTimes,
    segments: state.segments,
    windows: state.windows,
    metrics: metricsOf(state),
  })
  for (const campaign in state.experiments) {
    if (campaign !== HOLDOUT_KEY) (summary.assignments ??= {})[campaign] = state.experiments[campaign]!.v
  }
  return summary
}

/**
 * The campaigns to answer an event with: the compiled set's eligible ones, less those at their
 * frequency cap; each capped one returned counts an impression in the state (saved with the event).
 */
export function matchCampaigns (set: CampaignSet, event: EventBody, state: VisitorState, attributes: Attributes, segments: readonly string[], nowMs: number, counter: ExperimentCounter | null = null, account = '', visitorId = event.visitorId, personal: Readonly<Record<string, string>> | null = null): Campaign[] {
  const matched = set.match({ event, attributes, segments: new Set(segments), visitor: metricsOf(state), nowMs })
  if (matched.length === 0) return NO_CAMPAIGNS
  const out: Campaign[] = []
  for (const campaign of matched) {
    if (campaign.cap !== null) {
      const history = state.impressions[campaign.id]
      if (isCapped(campaign.cap, history, nowMs)) continue
      state.impressions[campaign.id] = recordImpression(history, campaign.cap, nowMs)
    }
    const experiment = campaign.experiment
    if (experiment === null) {
      out.push({ id: campaign.id, name: campaign.name, priority: campaign.priority, content: campaign.content })
      continue
    }
    const variant = variantOf(state, experiment, event, nowMs, counter, account, visitorId, personal)
    // Outside the experiment's traffic: the campaign as it is, not counted.
    if (variant === null) out.push({ id: campaign.id, name: campaign.name, priority: campaign.priority, content: campaign.content })
    // A control variant's visitor gets no campaign; the exposure is recorded all the same.
    else if (!variant.control) out.push({ id: campaign.id, name: campaign.name, priority: campaign.priority, content: variant.content, variant: variant.id })
  }
  return out
}

/**
 * The visitor's variant in the experiment (null: outside its traffic). The visitor's recorded one
 * while it still exists (an earlier revision's too: assignment stays sticky across reweighting),
 * else its profile's (the first variant a device of the person got: `personal`), else the hash's; a first exposure in a revision is recorded in the state and told to the counter.
 * A visitor already exposed in this revision reads one property of its state: no allocation.
 */
function variantOf (state: VisitorState, experiment: Experiment, event: EventBody, nowMs: number, counter: ExperimentCounter | null, account: string, visitorId: string, personal: Readonly<Record<string, string>> | null): ExperimentVariant | null {
  const id = experiment.campaignId
  const exposure = Object.hasOwn(state.experiments, id) ? state.experiments[id]! : undefined
  if (exposure !== undefined && exposure.r === experiment.revision) return variantById(experiment, exposure.v)
  const inherited = exposure !== undefined ? exposure.v : personal !== null && Object.hasOwn(personal, id) ? personal[id]! : null
  const variant = (inherited === null ? null : variantById(experiment, inherited)) ?? assignVariant(experiment, visitorId)
  if (variant === null) return null
  state.experiments[id] = expose(counter, account, id, experiment.revision, variant.id, experiment.goals, state, event, nowMs)
  return variant
}

function noExperiment (): undefined { return undefined }

/** Whether the log position a is after b (both [timeMs, seq]). */
function isAfter (a: readonly [number, number], b: readonly [number, number]): boolean {
  return a[0] > b[0] || (a[0] === b[0] && a[1] > b[1])
}

/**
 * When the visitor was last active, as far as its row tells: its activity time, or for a row of an
 * earlier release the latest of its events and attribute writes; 0 when nothing dates it.
 */
export function lastActiveMs (state: Pick<VisitorState, 'activeMs' | 'lastSeenMs' | 'firstSeenMs' | 'attributeTimes'>): number {
  let latest = Math.max(state.activeMs ?? 0, state.lastSeenMs ?? 0, state.firstSeenMs ?? 0)
  if (state.activeMs === undefined || state.activeMs === 0) {
    for (const name in state.attributeTimes) latest = Math.max(latest, state.attributeTimes[name]!)
  }
  return latest
}

export function metricsOf (state: VisitorState): VisitorMetrics {
  const counts = state.counts
  return {
    pageViews: Object.hasOwn(counts, 'pageView') ? counts.pageView! : 0,
    productViews: Object.hasOwn(counts, 'productView') ? counts.productView! : 0,
    purchases: state.purchases,
    totalSpent: state.totalSpent,
    firstSeenMs: state.firstSeenMs,
    lastSeenMs: state.lastSeenMs,
    viewedSkus: state.viewedSkus,
    purchasedSkus: state.purchasedSkus,
    viewedCategories: state.viewedCategories,
  }
}

/** Resolves when both have (a write and its event's append), rejects with the first failure. */
function bothDone (write: Promise<void>, logged: Promise<void>): Promise<void> {
  return Promise.all([write, logged]).then(noop)
}

function noop (): void {}

/** Visitor ids are UUIDs, compared without case: one spelling, lower case. */
export function visitorKey (id: string): string {
  return id.toLowerCase()
}

/**
 * Update the tracked behaviour (first/last seen, counts, recent SKUs, purchases) with one event.
 * Returns true for a purchase whose orderId was seen already: only last seen and platform moved.
 */
export function recordBehaviour (state: VisitorState, event: EventBody, nowMs: number): boolean {
  // An imported event may be older than those seen (src/http/import-rows.ts): first and last seen only widen.
  if (state.firstSeenMs === 0 || nowMs < state.firstSeenMs) state.firstSeenMs = nowMs
  if (nowMs > state.lastSeenMs) state.lastSeenMs = nowMs
  const kind = event.event
  if (kind === 'purchase' && event.orderId !== undefined) {
    // The same order reported twice (a reload of the thank-you page) is one purchase.
    if (state.orderIds.includes(event.orderId)) {
      touch(state, event)
      return true
    }
    pushRecent(state.orderIds, event.orderId, ORDER_IDS_MAX)
    state.purchases++
    if (typeof event.orderTotal === 'number') state.totalSpent += event.orderTotal
    if (event.purchasedItems !== undefined) {
      for (const sku of event.purchasedItems) pushRecent(state.purchasedSkus, sku, PURCHASED_SKUS_MAX)
    }
  }
  state.counts[kind] = (Object.hasOwn(state.counts, kind) ? state.counts[kind]! : 0) + 1
  if (kind === 'productView') {
    if (event.sku !== undefined) pushRecent(state.viewedSkus, event.sku, VIEWED_SKUS_MAX)
    if (event.category !== undefined) pushRecent(state.viewedCategories, event.category, VIEWED_CATEGORIES_MAX)
  }
  touch(state, event)
  return false
}

function touch (state: VisitorState, event: EventBody): void {
  state.lastPlatform = event.platform
  if (event.device !== undefined) state.lastDevice = event.device
  if (event.path !== undefined) state.lastPath = event.path
}

/** Move `value` to the front, keeping at most `max` entries. */
function pushRecent (list: string[], value: string, max: number): void {
  const at = list.indexOf(value)
  if (at === 0) return
  if (at > 0) list.splice(at, 1)
  list.unshift(value)
  if (list.length > max) list.length = max
}

function nothing (): undefined { return undefined }
