// Segment backfills (docs/event-log.md, "Backfilling a segment"): a computed segment saved with `backfill: true` is
// evaluated over the retained event log, so its members are who it would have had.
//
// The cut is the moment the new segment set is swapped in (`fromMs`, src/catalog/segments.ts `put`):
// the segment reads window specs of its own from then on (keyed by the backfill's id, so whatever other
// segments or an earlier save counted is not used), which count live events from the cut
// (WindowSpec.countsFromMs), and the backfill counts every logged event before it. Each event is
// counted once, by one side.
//
// The job walks the account's log oldest first in steps of at most `stepMax` events; per step it sums,
// per visitor, the counters of the new specs from that visitor's events and sends the visitor actor a
// `backfill` message, which adds them to its own and re-evaluates. While the backfill runs the
// segment's enters and exits write no audience event (SegmentSet.backfilling): audience webhooks and
// destinations hear of changes after it only. After the walk it waits for the account's re-evaluation
// pass (visitors without logged events), then ends and releases the hold.
//
// Its row (config db, [account, 'backfill', segment]) holds where the walk stands, saved after each
// step; a restart resumes from it. A step sent again is not counted twice: each visitor keeps the last
// position it added (VisitorState.backfills). Changing or deleting the segment cancels it.
//
// Which nodes apply events is the mode's (BackfillNodes, chosen once): embedded, this process, the cut
// at the swap. Cluster mode (src/jobs/cluster-backfills.ts): the row is replicated, written before the
// segment, so every node holds the segment from the change on; the cut is set ahead of the swap, and the
// job, on the node that took the save, goes on only once every live node said it holds the backfill
// before the cut (else it is cancelled, nothing counted twice nor missed); it reads the cluster's event
// stream and waits for every node's re-evaluation pass.

import { randomUUID } from 'node:crypto'
import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'
import type { Store } from '../store/store.js'
import { EVENT_SCAN_MAX, type EventLog, type EventQuery } from '../store/event-log.js'
import type { SegmentCatalog } from '../catalog/segments.js'
import type { SegmentDef } from '../segments/rules.js'
import { recordEvent, type WindowSpec, type Windows } from '../segments/windows.js'
import type { ActorSender } from '../../actors/actor-router.js'
import type { VisitorKind } from '../../actors/visitor.js'
import { EMPTY_METRICS } from '../../actors/entity.js'
import type { ReplaySource } from './replay.js'

export const BACKFILL_STATES = ['running', 'done', 'cancelled'] as const
export type BackfillState = typeof BACKFILL_STATES[number]

/** Logged events read per step (one read transaction, then at most this many visitor messages). */
export const BACKFILL_STEP_DEFAULT = 1000
/**
 * The walk's last read comes at least this long after it started (real time): events received before
 * the swap, still waiting in a mailbox, are applied and logged by then (BEACON_BACKFILL_SETTLE_MS).
 */
export const BACKFILL_SETTLE_MS = 1000
/** How long a failed step waits before it is tried again. */
export const BACKFILL_RETRY_MS = 200

const KIND = 'backfill'
const NO_SEGMENTS: ReadonlySet<string> = new Set()

/** A backfill as stored. */
export interface BackfillRow {
  id: string
  account: string
  segment: string
  state: BackfillState
  /** Logged events before this time are the backfill's; live ones from it on count live. */
  fromMs: number
  /** The window specs the rule introduced (the others were counting already). */
  specKeys: string[]
  /** The rule it evaluates (JSON): another one means the segment changed. */
  rule: string
  /** The last event read ([timeMs, seq]); null: none yet. */
  cursor: [number, number] | null
  walked: boolean
  /** Logged events read. */
  events: number
  /** Visitors whose counters it added to (each once). */
  visitors: number
  /** The account's segments version of the save (cluster mode: what a node must have applied to hold it). */
  version: number
  /** Every node applying events held it before its cut (absent in rows of an earlier release: embedded, held). */
  held?: boolean
  createdAtMs: number
  updatedAtMs: number
  finishedAtMs: number | null
  error: string | null
}

/** Where a backfill reads: the log's next events before the cut, and each one's place in that order (what a visitor's `through` compares). */
export interface BackfillSource extends ReplaySource {
  positionOf: (id: string) => [number, number]
}

/** This folder's log, read in time order (embedded mode). */
export function timeOrdered (log: EventLog): BackfillSource {
  return { next: (account, query, after, limit) => log.next(account, query, after, limit), positionOf: idParts }
}

/** The nodes that apply events: this process (embedded mode), or every node of a cluster (src/jobs/cluster-backfills.ts). */
export interface BackfillNodes {
  /** How far ahead of the swap the cut is set: 0 where this process applies every event. */
  readonly cutAheadMs: number
  newId: () => string
  /** Whether this node runs the backfill (and resumes it after a restart). */
  runsHere: (row: BackfillRow) => boolean
  /** Null once every node applying events holds the backfill, before its cut; else why not (it is then cancelled). */
  held: (row: BackfillRow) => Promise<string | null>
  /** Resolves once every node's re-evaluation pass of the account ended (src/jobs/segment-maintenance.ts). */
  idle: (account: string) => Promise<void>
}

/** Embedded mode: this process applies every event, holding the backfill from the swap on. */
export function thisProcess (entitiesIdle: (account: string) => Promise<void>): BackfillNodes {
  return { cutAheadMs: 0, newId: randomUUID, runsHere: () => true, held: async () => null, idle: entitiesIdle }
}

export interface SegmentBackfillsOptions {
  store: Store
  source: BackfillSource
  segments: SegmentCatalog
  /** The visitor actors (cluster mode: at their partitions' owners). */
  actors: ActorSender
  visitors: VisitorKind
  clock: Clock
  nodes: BackfillNodes
  /** Whether the account still exists. */
  accountActive: (account: string) => boolean
  onError: (error: unknown) => void
  stepMax?: number
  retryMs?: number
  /** How long the walk keeps reading after it started; default BACKFILL_SETTLE_MS. */
  settleMs?: number
}

export class SegmentBackfills {
  private readonly store: Store
  private readonly source: BackfillSource
  private readonly segments: SegmentCatalog
  private readonly actors: ActorSender
  private readonly visitors: VisitorKind
  private readonly clock: Clock
  private readonly nodes: BackfillNodes
  private readonly accountActive: (account: string) => boolean
  private readonly onError: (error: unknown) => void
  private readonly stepMax: number
  private readonly retryMs: number
  private readonly settleMs: number
  /** Running backfills by `account/segment`, with the walk's promise. */
  private readonly active = new Map<string, { row: BackfillRow, walk: Promise<void> }>()
  /** Segments whose backfill is being created (a second one is refused meanwhile). */
  private readonly starting = new Set<string>()
  private stopped = false

  constructor ({ store, source, segments, actors, visitors, clock, nodes, accountActive, onError, stepMax = BACKFILL_STEP_DEFAULT, retryMs = BACKFILL_RETRY_MS, settleMs = BACKFILL_SETTLE_MS }: SegmentBackfillsOptions) {
    this.store = store
    this.source = source
    this.segments = segments
    this.actors = actors
    this.visitors = visitors
    this.clock = clock
    this.nodes = nodes
    this.accountActive = accountActive
    this.onError = onError
    this.stepMax = stepMax
    this.retryMs = retryMs
    this.settleMs = settleMs
  }

  /** Resume the backfills of this node a stop (or a crash) interrupted (their holds came back with the catalog's rows). */
  start (): void {
    for (const { key, value } of this.store.config.getRange({})) {
      const k = key as unknown[]
      if (k[1] !== KIND) continue
      const row = value as BackfillRow
      if (row.state !== 'running' || !this.accountActive(row.account) || !this.nodes.runsHere(row)) continue
      this.run(row)
    }
  }

  /**
   * Save the segment and backfill it; resolves once both are durable. 409 backfill_running while one
   * runs for the segment.
   */
  async create (account: string, segment: string, def: SegmentDef): Promise<BackfillRow> {
    const name = `${account}/${segment}`
    if (this.active.has(name) || this.starting.has(name)) throw new ApiError('backfill_running')
    this.starting.add(name)
    try {
      const nowMs = this.clock.nowMs()
      const row = (await this.segments.put(account, segment, def, {
        id: this.nodes.newId(),
        aheadMs: this.nodes.cutAheadMs,
        row: (hold, version): BackfillRow => ({
          id: hold.id, account, segment, state: 'running', fromMs: hold.fromMs, specKeys: [...hold.specKeys], rule: JSON.stringify(def.rule ?? null),
          cursor: null, walked: hold.specKeys.length === 0, events: 0, visitors: 0, version, held: false,
          createdAtMs: nowMs, updatedAtMs: nowMs, finishedAtMs: null, error: null,
        }),
      }))!
      this.run(row)
      return row
    } finally {
      this.starting.delete(name)
    }
  }

  /** The segment's last backfill; 404 backfill_not_found when it never had one. */
  get (account: string, segment: string): BackfillRow {
    const row = this.active.get(`${account}/${segment}`)?.row ?? this.segments.backfillOf(account, segment) as BackfillRow | undefined
    if (row === undefined) throw new ApiError('backfill_not_found')
    return row
  }

  /** The segment was changed (without a backfill) or deleted: its running backfill stops. Resolves once durable. */
  async cancel (account: string, segment: string, reason: string): Promise<void> {
    const entry = this.active.get(`${account}/${segment}`)
    if (entry === undefined || entry.row.state !== 'running') return
    this.end(entry.row, 'cancelled', reason)
    await this.save(entry.row)
  }

  /** No more steps; resolves once the step under way ended. */
  async stop (): Promise<void> {
    this.stopped = true
    await Promise.all([...this.active.values()].map(entry => entry.walk))
  }

  private run (row: BackfillRow): void {
    const name = `${row.account}/${row.segment}`
    const walk = this.walk(row).catch(this.onError).finally(() => {
      if (this.active.get(name)?.row === row) this.active.delete(name)
    })
    this.active.set(name, { row, walk })
  }

  private async walk (row: BackfillRow): Promise<void> {
    // Per visitor, the orders already counted: a repeated orderId counts once, as it did live.
    const orders = new Map<string, Set<string>>()
    // (Resumed after a restart: counted from now, later than the swap.)
    const settleFrom = performance.now()
    let atEnd = false
    let resumed = row.cursor !== null && !row.walked
    while (!this.stopped && row.state === 'running') {
      if (!this.accountActive(row.account)) return
      const changed = row.held === false ? await this.nodes.held(row) : this.changedSince(row)
      if (changed !== null) {
        this.end(row, 'cancelled', changed)
        await this.save(row)
        return
      }
      if (row.held === false) {
        row.held = true
        continue
      }
      try {
        // Resumed: the orders of the events read before the stop (read again, nothing sent).
        if (resumed) await this.ordersBefore(row, orders)
        resumed = false
        if (!row.walked) atEnd = await this.step(row, orders, settleFrom)
        else {
          await this.nodes.idle(row.account)
          if (this.stopped || row.state !== 'running') return
          this.end(row, 'done', null)
        }
        row.updatedAtMs = this.clock.nowMs()
        await this.save(row)
      } catch (error) {
        this.onError(error)
        await new Promise(resolve => setTimeout(resolve, this.retryMs))
      }
      // Let requests in between steps (a backfill is background work); at the end, wait to settle.
      if (!row.walked && row.state === 'running' && atEnd) await new Promise(resolve => setTimeout(resolve, this.settleMs / 10))
      else await new Promise(resolve => setImmediate(resolve))
    }
  }

  /** Why the backfill can no longer go on (its segment changed or was deleted), or null. */
  private changedSince (row: BackfillRow): string | null {
    let def: SegmentDef
    try {
      def = this.segments.get(row.account, row.segment)
    } catch {
      return 'The segment was deleted.'
    }
    return JSON.stringify(def.rule ?? null) === row.rule ? null : 'The segment was changed.'
  }

  /** The orders of the events the backfill read already (up to its cursor), by visitor. */
  private async ordersBefore (row: BackfillRow, orders: Map<string, Set<string>>): Promise<void> {
    const query: EventQuery = { fromMs: 0, toMs: row.fromMs, visitorId: null, profileId: null, kind: 'purchase' }
    const end = row.cursor!
    let after: [number, number] | null = null
    for (;;) {
      const { events, last } = await this.source.next(row.account, query, after, EVENT_SCAN_MAX)
      for (const event of events) {
        const at = this.source.positionOf(event.id)
        if (at[0] > end[0] || (at[0] === end[0] && at[1] > end[1])) return
        if (typeof event.fields.orderId === 'string') seenBefore(orders, event.visitorId, event.fields.orderId)
      }
      if (last === null) return
      after = last
    }
  }

  /** Read the next events, send each of their visitors its counters; resolves with whether it read to the end (for now). */
  private async step (row: BackfillRow, orders: Map<string, Set<string>>, settleFrom: number): Promise<boolean> {
    const set = this.segments.compiledSet(row.account)
    // The counters of events before fromMs: the live specs skip those.
    const specs: WindowSpec[] = []
    for (const key of row.specKeys) {
      const spec = set.specsByKey.get(key)
      if (spec !== undefined) specs.push({ ...spec, countsFromMs: 0 })
    }
    const query: EventQuery = { fromMs: 0, toMs: row.fromMs, visitorId: null, profileId: null, kind: null }
    const { events, last } = await this.source.next(row.account, query, row.cursor, this.stepMax)
    const byVisitor = new Map<string, Windows>()
    let through = row.cursor
    for (const event of events) {
      through = this.source.positionOf(event.id)
      const atMs = idParts(event.id)[0]
      const body: Record<string, unknown> = { ...event.fields, event: event.kind }
      if (event.kind === 'purchase' && typeof body.orderId === 'string' && seenBefore(orders, event.visitorId, body.orderId)) continue
      let windows = byVisitor.get(event.visitorId)
      if (windows === undefined) byVisitor.set(event.visitorId, windows = {})
      recordEvent(windows, specs, { event: body, attributes: {}, segments: NO_SEGMENTS, visitor: EMPTY_METRICS, nowMs: atMs })
    }
    if (through !== null && byVisitor.size > 0) {
      const at = through
      const replies = await Promise.allSettled([...byVisitor].map(([visitor, windows]) => {
        // Every spec, even one without events here: the visitor's first step drops its stale counters.
        for (const key of row.specKeys) windows[key] ??= []
        return this.actors.send(this.visitors, row.account, visitor, { type: 'backfill', id: row.id, segment: row.segment, through: at, windows })
      }))
      let failure: unknown = null
      for (const reply of replies) {
        if (reply.status === 'rejected') failure = reply.reason
        else if (reply.value) row.visitors++
      }
      // The step is sent again (the visitors that took it already ignore it): its cursor does not move.
      if (failure !== null) throw failure
    }
    row.events += events.length
    row.cursor = last ?? through
    // The end, read at least settleMs after the cut: an event that came before it but was
    // applied after it (a mailbox's wait) is in the log by then, after the cursor.
    if (last === null && performance.now() - settleFrom >= this.nodes.cutAheadMs + this.settleMs) row.walked = true
    return last === null
  }

  private end (row: BackfillRow, state: BackfillState, error: string | null): void {
    row.state = state
    row.error = error
    row.finishedAtMs = this.clock.nowMs()
    row.updatedAtMs = row.finishedAtMs
    this.segments.release(row.account, row.segment)
  }

  private async save (row: BackfillRow): Promise<void> {
    await this.segments.saveBackfill(row)
  }
}

/** A logged event's id as [timeMs, seq] (this folder's log: its position). */
export function idParts (id: string): [number, number] {
  const dash = id.indexOf('-')
  return [Number(id.slice(0, dash)), Number(id.slice(dash + 1))]
}

/** Whether the visitor's order was seen already; it is from now on. */
function seenBefore (orders: Map<string, Set<string>>, visitor: string, orderId: string): boolean {
  let seen = orders.get(visitor)
  if (seen === undefined) orders.set(visitor, seen = new Set())
  if (seen.has(orderId)) return true
  seen.add(orderId)
  return false
}

/** A backfill as the API shows it, with the segment's members now. */
export function backfillView (row: BackfillRow, members: number): Record<string, unknown> {
  return {
    id: row.id, segment: row.segment, state: row.state, before: new Date(row.fromMs).toISOString(),
    events: row.events, visitors: row.visitors, members, walked: row.walked,
    createdAt: new Date(row.createdAtMs).toISOString(), updatedAt: new Date(row.updatedAtMs).toISOString(),
    finishedAt: row.finishedAtMs === null ? null : new Date(row.finishedAtMs).toISOString(), error: row.error,
  }
}
