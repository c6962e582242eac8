// The visitor actor (DMP): one anonymous device of one account. It owns the device's attributes,
// segments and tracked behaviour, and is the only writer of its row.

import type { Store } from '../src/store/store.js'
import { isCapped, recordImpression, type CampaignSet, type ImpressionHistory, type VisitorMetrics } from '../src/matching/index.js'
import { applyAttributes, applySegments, queryEntity, type Attributes, type AttributeValue, type EntityQuery, type EntityState } from './entity.js'
import type { Actor, ActorKind, ActorRuntime } from './runtime.js'
import type { ProfileKind } from './profile.js'

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
  [field: string]: unknown
}

export interface Campaign {
  id: string
  name: string
  priority: number
  content: unknown
}

/** The account's compiled campaigns (null when it has none). */
export type CampaignSource = (account: string) => CampaignSet | null

export type VisitorMessage =
  | { type: 'event', event: EventBody, nowMs: number }
  | { type: 'attributes', attributes: Record<string, AttributeValue | null> }
  | { type: 'segments', assign: string[], remove: string[] }
  | { type: 'query', query: EntityQuery }
  | { type: 'snapshot' }

export type VisitorKind = ActorKind<VisitorState, VisitorMessage, unknown>

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
  }
}

export interface VisitorDeps {
  store: Store
  runtime: ActorRuntime
  profiles: ProfileKind
  campaigns: CampaignSource
}

const NO_CAMPAIGNS: Campaign[] = []

export function visitorKind ({ store, runtime, profiles, campaigns }: VisitorDeps): VisitorKind {
  const db = store.visitors

  function save (actor: Actor<VisitorState>): void {
    actor.track(store.durable(db.put([actor.account, actor.id], actor.state)))
  }

  function onEvent (actor: Actor<VisitorState>, event: EventBody, nowMs: number): Campaign[] | Promise<Campaign[]> {
    const state = actor.state
    const previous = state.profileId
    const profileId = event.profileId ?? previous
    const set = campaigns(actor.account)
    if (profileId === previous && (previous === null || set === null)) {
      // The hot path: synchronous from here to the write.
      recordBehaviour(state, event, nowMs)
      const matched = set === null ? NO_CAMPAIGNS : matchCampaigns(set, event, state, state.attributes, nowMs)
      save(actor)
      return matched
    }
    return linkAndMatch(actor, set, event, profileId!, nowMs)
  }

  /**
   * The slower path, for a linked visitor: a new link is durable on both sides before the event is
   * acknowledged, and campaigns see the profile's attributes over the device's own. Nothing of the
   * event touches the state until the awaits are past, so a failed link leaves no half-applied event.
   */
  async function linkAndMatch (actor: Actor<VisitorState>, set: CampaignSet | null, event: EventBody, profileId: string, nowMs: number): Promise<Campaign[]> {
    const state = actor.state
    const previous = state.profileId
    if (profileId !== previous) {
      const links: Promise<unknown>[] = [runtime.send(profiles, actor.account, profileId, { type: 'link', visitorId: actor.id })]
      if (previous !== null) links.push(runtime.send(profiles, actor.account, previous, { type: 'unlink', visitorId: actor.id }))
      await Promise.all(links)
      state.profileId = profileId
    }
    const own = set === null ? null : await runtime.send(profiles, actor.account, profileId, { type: 'own-attributes' }) as Attributes
    recordBehaviour(state, event, nowMs)
    const matched = set === null ? NO_CAMPAIGNS : matchCampaigns(set, event, state, { ...state.attributes, ...own }, nowMs)
    save(actor)
    return matched
  }

  return {
    name: 'visitor',
    load (account, id) {
      const stored = db.get([account, id]) as Partial<VisitorState> | undefined
      // Rows written by an older release lack newer fields: fill them with their empty values.
      return stored === undefined ? emptyVisitor() : { ...emptyVisitor(), ...stored }
    },
    handle (actor, message) {
      switch (message.type) {
        case 'event':
          return onEvent(actor, message.event, message.nowMs)
        case 'attributes':
          applyAttributes(actor.state, message.attributes)
          save(actor)
          return undefined
        case 'segments': {
          const segments = applySegments(actor.state, message.assign, message.remove)
          save(actor)
          return segments
        }
        case 'query':
          return queryEntity(actor.state, message.query)
        case 'snapshot':
          return structuredClone(actor.state)
      }
    },
  }
}

/**
 * The campaigns to answer an event with: the compiled set's eligible ones, less those at their
 * frequency cap; each capped one returned counts an impression in the state (saved with the event).
 */
export function matchCampaigns (set: CampaignSet, event: EventBody, state: VisitorState, attributes: Attributes, nowMs: number): Campaign[] {
  const matched = set.match({ event, attributes, segments: new Set(state.segments), visitor: metricsOf(state), nowMs })
  if (matched.length === 0) return NO_CAMPAIGNS
  const out: Campaign[] = []
  for (const campaign of matched) {
    if (campaign.cap !== null) {
      const history = state.impressions[campaign.id]
      if (isCapped(campaign.cap, history, nowMs)) continue
      state.impressions[campaign.id] = recordImpression(history, campaign.cap, nowMs)
    }
    out.push({ id: campaign.id, name: campaign.name, priority: campaign.priority, content: campaign.content })
  }
  return out
}

function metricsOf (state: VisitorState): VisitorMetrics {
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

/** Update the tracked behaviour (first/last seen, counts, recent SKUs, purchases) with one event. */
export function recordBehaviour (state: VisitorState, event: EventBody, nowMs: number): void {
  if (state.firstSeenMs === 0) state.firstSeenMs = nowMs
  state.lastSeenMs = nowMs
  const kind = event.event
  if (kind === 'purchase' && event.orderId !== undefined) {
    // The same order reported twice (a reload of the thank-you page) is one purchase.
    if (state.orderIds.includes(event.orderId)) return touch(state, event)
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
