// Replays of the retained event log (docs/event-log.md, "Replay"): an account's past events of a time
// range resent to one webhook or destination, oldest first and in order per visitor (a visitor's next
// event is queued once its previous one is delivered or dead), as new
// deliveries marked with the replay's id (DeliveryItem.replay: the `Beacon-Replay` header,
// `{{replay}}`), through the delivery queue with its retries.
//
// A replay keeps at most `inflightMax` of its deliveries unsettled at once: it reads the next events
// only as earlier ones are delivered or dead, so the target's worker always has room for live
// deliveries, and a target that is down holds the replay back rather than piling its queue up.
//
// Its row (config db, [account, 'replay', id]) holds where the walk stands (the last event read), the
// counts and the deliveries not settled yet; it is written in the transaction of the records it
// queued, so a restart resumes from it without queuing an event twice or losing one.

import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'
import type { Store } from '../store/store.js'
import type { EventQuery, LoggedEvent } from '../store/event-log.js'
import type { OutboxRow } from '../store/record-codec.js'
import type { CompiledWebhook } from '../webhooks/compile.js'
import type { DeliveryHub } from '../delivery/hub.js'
import { newRecord, selects, type DeliveryRecord } from '../delivery/record.js'
import { readRecordById } from '../delivery/records-db.js'
import { destinationKey } from '../destinations/compile.js'
import { newJobId } from '../cluster/node-jobs.js'

export const REPLAY_STATES = ['running', 'done', 'cancelled', 'failed'] as const
export type ReplayState = typeof REPLAY_STATES[number]

export type ReplayTarget = { webhook: string } | { destination: string }

/** What a replay is, as asked. */
export interface ReplayRequest {
  fromMs: number
  toMs: number
  target: ReplayTarget
  /** Only these event kinds; null: every kind the target takes. */
  kinds: string[] | null
}

/** A replay as stored. */
export interface ReplayRow extends ReplayRequest {
  id: string
  account: string
  state: ReplayState
  createdAtMs: number
  updatedAtMs: number
  finishedAtMs: number | null
  /** The last event read ([timeMs, seq]); null: none yet. */
  cursor: [number, number] | null
  /** Every event of the range is read (and queued or skipped). */
  walked: boolean
  read: number
  queued: number
  /** Read but not sent: of a kind the target does not take, or not among `kinds`. */
  skipped: number
  delivered: number
  /** Dead (every attempt failed), or removed before it was (an erasure). */
  failed: number
  /** Its deliveries not settled yet: [delivery id, visitor id]. */
  inFlight: Array<[string, string]>
  error: string | null
}

/** Deliveries of one replay unsettled at once (BEACON_REPLAY_INFLIGHT_MAX's default). */
export const REPLAY_INFLIGHT_DEFAULT = 100
/** Replays of an account running at once; a new one past it is refused (409 replay_limit). */
export const REPLAYS_RUNNING_MAX = 5
/** Replays kept per account: past it, creating one removes the oldest ended ones. */
export const REPLAYS_KEPT_MAX = 100
/** How often a replay looks at its deliveries' outcomes. */
export const REPLAY_POLL_MS = 50

const KIND = 'replay'

/**
 * Where a replay reads: this folder's log (EventLog, embedded mode) or the cluster's stream (EventStream):
 * the next events of the range after `after`, oldest first (in order per visitor), at most `limit`.
 */
export interface ReplaySource {
  next: (account: string, query: EventQuery, after: [number, number] | null, limit: number) =>
    { events: LoggedEvent[], last: [number, number] | null } | Promise<{ events: LoggedEvent[], last: [number, number] | null }>
}

export interface ReplaysOptions {
  store: Store
  events: ReplaySource
  deliveries: DeliveryHub
  clock: Clock
  /** The webhook or destination (its delivery key) of the account; throws 404 when there is none. */
  target: (account: string, key: string) => CompiledWebhook
  /** Whether the account still exists (a deleted one's replays stop, their rows gone with it). */
  accountActive: (account: string) => boolean
  inflightMax: number
  onError: (error: unknown) => void
  pollMs?: number
  /** Cluster mode: this node's id, named in its replays' ids (src/cluster/node-jobs.ts). */
  nodeId?: string | null
  /** Cluster mode: the origin its delivery ids carry, unique in the cluster (DeliveryHub's `idOrigin`). */
  idOrigin?: string | null
}

/** What the admin routes use: this node's replays (Replays), or the cluster's (ClusterReplays). */
export interface ReplayService {
  create: (account: string, request: ReplayRequest) => Promise<ReplayRow>
  get: (account: string, id: string) => ReplayRow | Promise<ReplayRow>
  list: (account: string) => ReplayRow[] | Promise<ReplayRow[]>
  cancel: (account: string, id: string) => Promise<ReplayRow>
}

/** 409 replay_limit when the account runs REPLAYS_RUNNING_MAX replays already. */
export function checkRunning (rows: readonly ReplayRow[]): void {
  if (rows.filter(row => row.state === 'running').length >= REPLAYS_RUNNING_MAX) {
    throw new ApiError('replay_limit', `An account runs at most ${REPLAYS_RUNNING_MAX} replays at once: wait for one to end, or cancel one.`)
  }
}

export class Replays implements ReplayService {
  private readonly store: Store
  private readonly events: ReplaySource
  private readonly deliveries: DeliveryHub
  private readonly clock: Clock
  private readonly target: (account: string, key: string) => CompiledWebhook
  private readonly accountActive: (account: string) => boolean
  private readonly inflightMax: number
  private readonly onError: (error: unknown) => void
  private readonly pollMs: number
  private readonly nodeId: string | null
  private readonly idOrigin: string | null
  /** Replays whose deliveries are not all settled yet, by id; each with its loop's timer and turn. */
  private readonly active = new Map<string, { row: ReplayRow, timer: NodeJS.Timeout | null, turn: Promise<void> | null }>()
  private stopped = false

  constructor ({ store, events, deliveries, clock, target, accountActive, inflightMax, onError, pollMs = REPLAY_POLL_MS, nodeId = null, idOrigin = null }: ReplaysOptions) {
    this.store = store
    this.events = events
    this.deliveries = deliveries
    this.clock = clock
    this.target = target
    this.accountActive = accountActive
    this.inflightMax = inflightMax
    this.onError = onError
    this.pollMs = pollMs
    this.nodeId = nodeId
    this.idOrigin = idOrigin
  }

  /** Resume the replays a stop (or a crash) interrupted. */
  start (): void {
    for (const { key, value } of this.store.config.getRange({})) {
      const k = key as unknown[]
      if (k[1] !== KIND) continue
      const row = value as ReplayRow
      if (row.state === 'running' || row.inFlight.length > 0) this.run(row)
    }
  }

  /** Start a replay; resolves once its row is durable. */
  async create (account: string, request: ReplayRequest): Promise<ReplayRow> {
    const webhook = this.target(account, targetKey(request.target))
    if (!webhook.enabled) throw new ApiError('replay_target_refused', 'The target is disabled: enable it first.', '/target')
    if (webhook.native === undefined && webhook.trigger.kind !== 'event') throw new ApiError('replay_target_refused', 'Only event webhooks take a replay of events (this one is an audience or schedule webhook).', '/target')
    const rows = this.rowsOf(account)
    checkRunning(rows)
    const nowMs = this.clock.nowMs()
    const row: ReplayRow = {
      ...request, id: newJobId(this.nodeId), account, state: 'running', createdAtMs: nowMs, updatedAtMs: nowMs, finishedAtMs: null, cursor: null, walked: false,
      read: 0, queued: 0, skipped: 0, delivered: 0, failed: 0, inFlight: [], error: null,
    }
    // The oldest ended ones go past REPLAYS_KEPT_MAX, in the transaction of the new one.
    const ended = rows.filter(old => old.state !== 'running' && old.inFlight.length === 0 && !this.active.has(old.id)).sort((a, b) => a.createdAtMs - b.createdAtMs)
    for (const old of ended.slice(0, Math.max(0, rows.length + 1 - REPLAYS_KEPT_MAX))) this.store.ignoreFailure(this.store.config.remove([account, KIND, old.id]))
    await this.store.save(this.store.config, [account, KIND, row.id], row)
    this.run(row)
    return row
  }

  /** A replay of the account; 404 replay_not_found. */
  get (account: string, id: string): ReplayRow {
    const row = this.active.get(id)?.row ?? this.store.config.get([account, KIND, id]) as ReplayRow | undefined
    if (row === undefined || row.account !== account) throw new ApiError('replay_not_found')
    return row
  }

  /** The account's replays, newest first. */
  list (account: string): ReplayRow[] {
    return this.rowsOf(account).map(row => this.active.get(row.id)?.row ?? row).sort((a, b) => b.createdAtMs - a.createdAtMs)
  }

  /**
   * Stop reading and queuing; deliveries already queued go on (their outcomes still counted). A replay
   * that already ended is answered as it is (a retried cancel is no error). Resolves once durable.
   */
  async cancel (account: string, id: string): Promise<ReplayRow> {
    const row = this.get(account, id)
    if (row.state !== 'running') return row
    this.end(row, 'cancelled', null)
    await this.store.save(this.store.config, [account, KIND, id], row)
    return row
  }

  /** No more turns; resolves once the turns under way ended (what they queued is durable). */
  async stop (): Promise<void> {
    this.stopped = true
    for (const entry of this.active.values()) if (entry.timer !== null) clearTimeout(entry.timer)
    await Promise.all([...this.active.values()].map(entry => entry.turn))
  }

  private rowsOf (account: string): ReplayRow[] {
    const rows: ReplayRow[] = []
    for (const { value } of this.store.config.getRange({ start: [account, KIND], end: [account, KIND + '\u0000'] })) rows.push(value as ReplayRow)
    return rows
  }

  private run (row: ReplayRow): void {
    const entry: { row: ReplayRow, timer: NodeJS.Timeout | null, turn: Promise<void> | null } = { row, timer: null, turn: null }
    this.active.set(row.id, entry)
    const next = (): void => {
      entry.timer = null
      if (this.stopped) return
      entry.turn = this.turn(row).then(more => {
        entry.turn = null
        if (!more) this.active.delete(row.id)
        else if (!this.stopped) entry.timer = setTimeout(next, this.pollMs)
      }, (error: unknown) => {
        entry.turn = null
        this.onError(error)
        if (!this.stopped) entry.timer = setTimeout(next, this.pollMs)
      })
    }
    next()
  }

  /** Count the outcomes come in, queue what room allows, save. Resolves with whether there is more to do. */
  private async turn (row: ReplayRow): Promise<boolean> {
    if (!this.accountActive(row.account)) return false
    const key = targetKey(row.target)
    let changed = this.settle(row, key)
    let records: DeliveryRecord[] = []
    if (row.state === 'running') {
      let webhook: CompiledWebhook | null = null
      try {
        webhook = this.target(row.account, key)
      } catch {
        // Its deliveries stay as they are, in the deliveries log; none will be attempted.
        row.failed += row.inFlight.length
        row.inFlight = []
        this.end(row, 'failed', 'The target was deleted.')
        changed = true
      }
      if (webhook !== null && !webhook.enabled) {
        // What it has queued waits for it to be enabled again; nothing more is read.
        this.end(row, 'failed', 'The target was disabled.')
        webhook = null
        changed = true
      }
      if (webhook !== null && !row.walked && this.inflightMax - row.inFlight.length > 0) {
        records = await this.read(row, webhook, this.inflightMax - row.inFlight.length)
        changed = true
      }
      if (row.walked && row.inFlight.length === 0 && row.state === 'running') this.end(row, 'done', null)
    }
    if (changed) {
      row.updatedAtMs = this.clock.nowMs()
      const save = (): Promise<boolean> => this.store.config.put([row.account, KIND, row.id], row)
      if (records.length > 0) await this.deliveries.deliver(records, save)
      else await this.store.durable(save())
    }
    return row.state === 'running' || row.inFlight.length > 0
  }

  /** Count the deliveries that reached their outcome. Returns whether any did. */
  private settle (row: ReplayRow, key: string): boolean {
    if (row.inFlight.length === 0) return false
    const still: Array<[string, string]> = []
    for (const entry of row.inFlight) {
      const record = readRecordById(this.store, row.account, key, entry[0])
      if (record === undefined || record.status === 'dead') row.failed++
      else if (record.status === 'delivered') row.delivered++
      else still.push(entry)
    }
    if (still.length === row.inFlight.length) return false
    row.inFlight = still
    return true
  }

  /**
   * The next events of the range, at most `room` of them made into deliveries. It stops before an event
   * of a visitor with a delivery of this replay not settled yet: in order per visitor, whatever the
   * target's parallel requests and retries do.
   */
  private async read (row: ReplayRow, webhook: CompiledWebhook, room: number): Promise<DeliveryRecord[]> {
    const kinds = row.kinds === null ? null : new Set(row.kinds)
    const query: EventQuery = { fromMs: row.fromMs, toMs: row.toMs, visitorId: null, profileId: null, kind: row.kinds?.length === 1 ? row.kinds[0]! : null }
    const { events, last } = await this.events.next(row.account, query, row.cursor, room)
    // Cancelled while the cluster's stream was read: nothing more is queued.
    if (row.state !== 'running') return []
    const busy = new Set(row.inFlight.map(([, visitor]) => visitor))
    const nowMs = this.clock.nowMs()
    const records: DeliveryRecord[] = []
    for (const event of events) {
      if (busy.has(event.visitorId)) return records
      const outbox = outboxRow(row.account, event)
      row.read++
      row.cursor = [outbox.occurredAtMs, Number(event.id.slice(event.id.indexOf('-') + 1))]
      if ((kinds !== null && !kinds.has(event.kind)) || !selects(webhook, outbox)) {
        row.skipped++
        continue
      }
      const record = newRecord(outbox, this.store.allocateSeq(), webhook, nowMs, this.store.nodeId, this.idOrigin)
      record.item.replay = row.id
      records.push(record)
      row.inFlight.push([record.id, event.visitorId])
      busy.add(event.visitorId)
      row.queued++
    }
    if (last === null) row.walked = true
    else row.cursor = last
    return records
  }

  private end (row: ReplayRow, state: ReplayState, error: string | null): void {
    row.state = state
    row.error = error
    row.finishedAtMs = this.clock.nowMs()
  }
}

/** The delivery key of a replay's target (a destination's is `~<id>`). */
export function targetKey (target: ReplayTarget): string {
  return 'webhook' in target ? target.webhook : destinationKey(target.destination)
}

/** A logged event as the outbox row a live delivery of it came from (its attributes then are not kept). */
function outboxRow (account: string, event: LoggedEvent): OutboxRow {
  const row: OutboxRow = { kind: 'event', account, event: event.kind, fields: event.fields, visitorId: event.visitorId, occurredAtMs: Number(event.id.slice(0, event.id.indexOf('-'))) }
  if (event.profileId !== undefined) row.profileId = event.profileId
  return row
}

/** A replay as the API shows it. */
export function replayView (row: ReplayRow): Record<string, unknown> {
  return {
    id: row.id, state: row.state, from: new Date(row.fromMs).toISOString(), to: new Date(row.toMs).toISOString(), target: row.target, kinds: row.kinds,
    createdAt: new Date(row.createdAtMs).toISOString(), updatedAt: new Date(row.updatedAtMs).toISOString(),
    finishedAt: row.finishedAtMs === null ? null : new Date(row.finishedAtMs).toISOString(),
    read: row.read, queued: row.queued, skipped: row.skipped, delivered: row.delivered, failed: row.failed, inFlight: row.inFlight.length,
    walked: row.walked, error: row.error,
  }
}
