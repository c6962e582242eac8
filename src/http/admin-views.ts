// What the admin API shows of stored records: ISO times like the rest of the admin API, attempts
// numbered from 1, and no internal bookkeeping (store keys, evaluation versions, index entries, window
// counters keyed by rule hashes) that means nothing outside the process and may change between releases.

import type { DeliveryRecord } from '../delivery/record.js'
import type { VisitorState } from '../../actors/visitor.js'
import type { DeviceSummary, ProfileState } from '../../actors/profile.js'
import type { ImpressionHistory, VisitorMetrics } from '../matching/index.js'

function iso (ms: number): string | null {
  return ms > 0 && Number.isFinite(ms) ? new Date(ms).toISOString() : null
}

function isoTimes (times: Record<string, number>): Record<string, string | null> {
  const out: Record<string, string | null> = {}
  for (const name in times) out[name] = iso(times[name]!)
  return out
}

/** A delivery record as the deliveries log lists it. */
export function deliveryView (record: DeliveryRecord): Record<string, unknown> {
  const done = record.status === 'delivered' || record.status === 'dead'
  return {
    id: record.id,
    messageId: record.item.messageId ?? record.id,
    webhookId: record.webhookId,
    status: record.status,
    occurredAt: iso(record.item.occurredAtMs),
    context: record.item.context,
    attempts: record.attempts.map((attempt, i) => ({ attempt: i + 1, at: iso(attempt.atMs), ...without(attempt, 'atMs') })),
    /** The number the next attempt will have; null once delivered or dead. */
    nextAttempt: done ? null : record.attempt,
    dueAt: done ? null : iso(record.dueMs),
    createdAt: iso(record.createdAtMs),
    updatedAt: iso(record.updatedAtMs),
    replayedAt: record.replayedAtMs === null ? null : iso(record.replayedAtMs),
    replay: record.item.replay ?? null,
  }
}

function without<T extends object, K extends keyof T> (value: T, key: K): Omit<T, K> {
  const { [key]: _dropped, ...rest } = value
  return rest
}

function metricsView (metrics: VisitorMetrics): Record<string, unknown> {
  const { firstSeenMs, lastSeenMs, ...rest } = metrics
  return { ...rest, firstSeen: iso(firstSeenMs), lastSeen: iso(lastSeenMs) }
}

function impressionsView (impressions: Record<string, ImpressionHistory>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const id in impressions) {
    const history = impressions[id]!
    out[id] = { shown: history.n, recent: history.t.map(iso) }
  }
  return out
}

/** Everything held on a visitor, as people read it. */
export function visitorView (visitorId: string, state: VisitorState): Record<string, unknown> {
  return {
    visitorId,
    profileId: state.profileId,
    attributes: state.attributes,
    attributesUpdatedAt: isoTimes(state.attributeTimes),
    segments: state.segments,
    computedSegments: state.computed,
    firstSeen: iso(state.firstSeenMs),
    lastSeen: iso(state.lastSeenMs),
    counts: state.counts,
    lastPlatform: state.lastPlatform,
    lastDevice: state.lastDevice,
    lastPath: state.lastPath,
    viewedSkus: state.viewedSkus,
    viewedCategories: state.viewedCategories,
    purchasedSkus: state.purchasedSkus,
    purchases: state.purchases,
    totalSpent: state.totalSpent,
    orderIds: state.orderIds,
    impressions: impressionsView(state.impressions),
  }
}

function deviceView (device: DeviceSummary): Record<string, unknown> {
  return {
    attributes: device.attributes,
    attributesUpdatedAt: isoTimes(device.attributeTimes),
    segments: device.segments,
    behaviour: metricsView(device.metrics),
  }
}

/** Everything held on a profile, with the copy it keeps of each linked device. */
export function profileView (profileId: string, state: ProfileState): Record<string, unknown> {
  const devices: Record<string, unknown> = {}
  for (const id of state.visitors) if (Object.hasOwn(state.devices, id)) devices[id] = deviceView(state.devices[id]!)
  return {
    profileId,
    attributes: state.attributes,
    segments: state.segments,
    computedSegments: state.computed,
    visitors: state.visitors,
    devices,
    moves: state.moves.map(([visitorId, movedAtMs]) => ({ visitorId, movedAt: iso(movedAtMs) })),
  }
}
