// A delivery record: one delivery of one outbox row (or one schedule run) to one webhook, with what
// its attempts changed. Its id is `<seq>.<webhook id>` (embedded mode) or `<origin node>:<seq>.<webhook id>`
// (cluster mode, where every node's outbox counts from 1 and all publish to one delivery stream), so
// its key in the deliveries db is derivable from it and it names the node that holds it. Its item's id
// is the record's id, and so is the webhook-id its requests carry; except for a row a new owner resends
// for the node that first wrote it (a partition taken over): the item is then sent under the id made
// there (`item.messageId`), so a receiver that had it from the first owner can tell it is the same.

import type { OutboxRow, RowOrigin } from '../store/record-codec.js'
import type { CompiledWebhook } from '../webhooks/compile.js'
import { maskCredentials } from '../webhooks/mask-credentials.js'
import type { AttemptRecord, DeliveryContext, DeliveryItem } from '../webhooks/types.js'

export const DELIVERY_STATUSES = ['pending', 'failed', 'delivered', 'dead'] as const
export type DeliveryStatus = typeof DELIVERY_STATUSES[number]

/** How an attempt of a record ended, as the workers tell it and the queue hears it. */
export type DeliveryOutcome = 'delivered' | 'retry' | 'dead'

/**
 * One delivery of one outbox row to one webhook. Key in the deliveries db: [account, webhookId, seq];
 * what its attempts changed since (an OutcomeRow) is kept under [account, webhookId, seq, OUTCOME_KEY].
 */
export interface DeliveryRecord {
  id: string
  account: string
  webhookId: string
  seq: number
  status: DeliveryStatus
  item: DeliveryItem
  /** The attempt the next send will be. */
  attempt: number
  attempts: AttemptRecord[]
  dueMs: number
  createdAtMs: number
  updatedAtMs: number
  /** Set by a replay: a queue that deduplicates by id must tell this publish from the first. */
  replayedAtMs: number | null
  /** The node (data folder, Store.nodeId) whose store holds the record; absent on records of older releases. */
  node?: string
  /**
   * Cluster mode: the node (data folder id) whose outbox seq the id carries, `<origin>:<seq>.<webhook>`.
   * Absent in embedded mode (and on records of earlier releases): the id is `<seq>.<webhook>`.
   */
  origin?: string
}

/** What an attempt changes of a record: written on its own, next to the record, when an attempt ends. */
export type OutcomeRow = Pick<DeliveryRecord, 'status' | 'attempt' | 'attempts' | 'dueMs' | 'updatedAtMs'>

/**
 * Whether `a` comes later in a record's life than `b`: a later replay of it, or a later attempt of the
 * same replay (`attempt` is the next attempt, so each outcome has a higher one than the one before).
 */
export function laterThan (a: Pick<DeliveryRecord, 'replayedAtMs' | 'attempt'>, b: Pick<DeliveryRecord, 'replayedAtMs' | 'attempt'>): boolean {
  const aReplay = a.replayedAtMs ?? 0
  const bReplay = b.replayedAtMs ?? 0
  return aReplay !== bReplay ? aReplay > bReplay : a.attempt > b.attempt
}

/** Whether an event or audience row goes to this webhook. */
export function selects (webhook: CompiledWebhook, row: OutboxRow): boolean {
  if (!webhook.enabled) return false
  if (webhook.native !== undefined) return webhook.native.selects(row)
  const trigger = webhook.trigger
  if (row.kind === 'event') return trigger.kind === 'event' && trigger.events.has(row.event!)
  // An erased member's row is for audience destinations only (webhooks heard of erasure never before).
  if (trigger.kind !== 'audience' || row.change === 'erase' || !trigger.segments.has(row.segment!)) return false
  return row.change === 'enter' ? trigger.onEnter : trigger.onExit
}

/**
 * The record of an outbox row for one webhook, pending its first attempt. Cluster mode (`origin`, this
 * node): a row resent for another node (`resent`, its first place) is sent under the id made there.
 */
export function newRecord (row: OutboxRow, seq: number, webhook: CompiledWebhook, nowMs: number, node: string, origin: string | null = null, resent: RowOrigin | null = null): DeliveryRecord {
  const context: DeliveryContext = { account: row.account }
  if (row.visitorId !== undefined) context.visitorId = row.visitorId
  if (row.profileId !== undefined) context.profileId = row.profileId
  if (row.kind === 'event') {
    context.event = row.event!
    // `attribute.<name>` reads the event's own `attributes` field (template.ts): not stored twice.
    if (row.fields !== undefined) context.eventFields = row.fields
  } else {
    context.audience = row.segment!
    context.change = row.change!
  }
  if (row.attributes !== undefined) context.attributes = row.attributes
  const id = deliveryId(seq, webhook.id, origin)
  const item: DeliveryItem = { id, occurredAtMs: row.occurredAtMs, context }
  if (origin !== null && resent !== null) item.messageId = deliveryId(resent.seq, webhook.id, resent.node)
  const record: DeliveryRecord = {
    id,
    account: row.account,
    webhookId: webhook.id,
    seq,
    status: 'pending',
    item,
    attempt: 1,
    attempts: [],
    dueMs: 0,
    createdAtMs: nowMs,
    updatedAtMs: nowMs,
    replayedAtMs: null,
    node,
  }
  if (origin !== null) record.origin = origin
  return record
}

/** The record of one member (or of the account) in a schedule run. */
export function scheduledRecord (seq: number, webhook: CompiledWebhook, context: DeliveryContext, runMs: number, nowMs: number, node: string, origin: string | null = null): DeliveryRecord {
  const id = deliveryId(seq, webhook.id, origin)
  const record: DeliveryRecord = {
    id, account: webhook.account, webhookId: webhook.id, seq, status: 'pending',
    item: { id, occurredAtMs: runMs, context },
    attempt: 1, attempts: [], dueMs: 0, createdAtMs: nowMs, updatedAtMs: nowMs, replayedAtMs: null, node,
  }
  if (origin !== null) record.origin = origin
  return record
}

/** A delivery's id: `<seq>.<webhook id>`, prefixed with `<origin>:` in cluster mode (node ids hold no `:` or `.`). */
export function deliveryId (seq: number, webhookId: string, origin: string | null | undefined): string {
  return origin === null || origin === undefined ? `${seq}.${webhookId}` : `${origin}:${seq}.${webhookId}`
}

/** The outbox seq a delivery id carries (its node's, in cluster mode): the record's key is derivable from the id. */
export function seqOf (id: string): number {
  const dot = id.indexOf('.')
  const colon = id.lastIndexOf(':', dot)
  return Number(id.slice(colon + 1, dot))
}

/** Excerpts stored by releases that did not mask them are masked as they are shown. */
export function withMaskedErrors (record: DeliveryRecord): DeliveryRecord {
  if (!record.attempts.some(attempt => attempt.error !== undefined)) return record
  return { ...record, attempts: record.attempts.map(attempt => attempt.error === undefined ? attempt : { ...attempt, error: maskCredentials(attempt.error) }) }
}

/** The key of a webhook's worker, overflow and schedule state. */
export function slot (account: string, webhookId: string): string {
  return account + '\u0000' + webhookId
}
