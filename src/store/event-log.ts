// The retained event log (docs/event-log.md): every event a visitor actor accepted, kept with its
// account, visitor, profile, kind, fields and server time for BEACON_EVENT_RETENTION_DAYS.
//
// Embedded mode: the store's `events` db, key [account, timeMs, seq]. Account first, then time: a
// per-account time range (the admin read, an export) is one contiguous walk of the B-tree, newest first
// by walking it backwards; `seq` (this folder's own counter, reserved in blocks like the outbox's) makes
// two events of one millisecond distinct and orders them as they were applied. Values are flat msgpack
// arrays (event-row.ts, which also reads the records rows were written as before 2026-11-28).
//
// Rows are written in the LMDB transaction of the visitor's state write, so an answered event is a
// logged one, with no fsync of its own. The first event of an account and millisecond in an event turn
// is put at once, as a row of its own; the ones after it in that turn (the rest of a batch, or other
// requests of the same moment) are kept and put as one group (format 2) right before the turn's
// transaction commits (lmdb-js's `beforecommit`, which the first put made sure there is). One put of a
// hundred events instead of a hundred: the key, the write instruction and the B-tree insertion are paid
// once. An event's id is its key's time and seq plus its place in the group.
//
// Trimming walks each account's oldest keys (retention), then, over the size cap, the oldest hour of
// every account in turn; erasing a person walks the account's events (a visitor filter needs the
// value: it is not in the key, which keeps keys short and the append a single put).

import type { Database } from 'lmdb'
import { EVENT_GROUP_FORMAT, eventAt, eventCount, eventRow, eventsKept, isEventGroup, rowKind, rowProfile, rowVisitor, storedEvent, type EventRow } from './event-row.js'
import { KEY_PART_MAX, type Store } from './store.js'
import { fieldsExcept } from '../fields-except.js'

export type { StoredEvent } from './event-row.js'

/** One logged event as the admin API and exports show it. */
export interface LoggedEvent {
  /** `<timeMs>-<seq>`: unique within the data folder, and where a page's `next` resumes. */
  id: string
  time: string
  visitorId: string
  profileId?: string
  kind: string
  fields: Record<string, unknown>
  /** The segments the visitor was in once the event was applied (absent: none, or logged before they were kept). */
  segments?: string[]
}

/** A read of one account's log: the time range [fromMs, toMs) and optional filters. */
export interface EventQuery {
  fromMs: number
  toMs: number
  visitorId: string | null
  profileId: string | null
  kind: string | null
}

/**
 * Appends an accepted event (the visitor actor calls it in the event turn of its state write), with the
 * segments the visitor is in once it is applied (computed and manual, its profile's too when linked).
 * `dedupeKey`: the request's Idempotency-Key, if any. A promise (cluster mode: the stream's
 * acknowledgement) is waited for by the actor's reply, as its state write is.
 */
export type EventAppender = (account: string, visitorId: string, profileId: string | null, event: Record<string, unknown>, nowMs: number, segments: readonly string[], dedupeKey?: string | null) => void | Promise<void>

/**
 * A retained event log as the admin routes and erasure use it: this folder's (EventLog, embedded mode)
 * or the cluster's JetStream stream (src/cluster/event-stream.ts).
 */
export interface EventStore {
  page (account: string, query: EventQuery, limit: number, cursor: string | null): { events: LoggedEvent[], next: string | null } | Promise<{ events: LoggedEvent[], next: string | null }>
  range (account: string, query: EventQuery): Iterable<LoggedEvent[]> | AsyncIterable<LoggedEvent[]>
  forget (account: string, visitors: ReadonlySet<string>, profiles: ReadonlySet<string>): Promise<number>
}

/** An event body's kind and the fields kept: the token (browsers may send one) never; account, visitor, profile and kind are columns. */
export function eventColumns (event: Record<string, unknown>): { kind: string, fields: Record<string, unknown> } {
  return { kind: event.event as string, fields: fieldsExcept(event, NOT_FIELDS) }
}

const NOT_FIELDS: ReadonlySet<string> = new Set(['token', 'account', 'visitorId', 'profileId', 'event'])

/** Events per page of the admin read (default and most). */
export const EVENT_PAGE_DEFAULT = 100
export const EVENT_PAGE_MAX = 1000
/**
 * Rows a page (or an export step) reads at most before it answers: a filter that matches rarely then
 * answers fewer events with a `next`, instead of walking the whole month in one request.
 */
export const EVENT_SCAN_MAX = 20_000
/** Rows removed per trim or erasure turn (one transaction); the event loop is served between turns. */
export const EVENT_TRIM_BATCH_MAX = 5_000
/** Over the size cap, each step removes every account's events older than its oldest plus this. */
export const EVENT_CAP_STEP_MS = 3_600_000
/** How often the background trim runs. */
export const EVENT_TRIM_EVERY_MS = 60_000

/** The events of one account and millisecond appended in this event turn after the first: [2, row, …]. */
interface PendingGroup {
  account: string
  timeMs: number
  rows: unknown[]
}

const SEQ_RESERVED_KEY = 'event-seq-reserved'
const SEQ_RESERVE_BLOCK = 100_000
const CURSOR = /^(\d{1,16})-(\d{1,16})$/

type EventKey = [string, number, number]

export interface EventLogOptions {
  /** BEACON_EVENT_RETENTION_DAYS, in ms. */
  retentionMs: number
  /** BEACON_EVENT_LOG_MAX_BYTES (0: no cap but the map size). */
  sizeMaxBytes: number
}

export class EventLog implements EventStore {
  private readonly store: Store
  private readonly db: Database
  private readonly retentionMs: number
  private readonly sizeMaxBytes: number
  private seq: number
  private seqReserved: number
  /** This event turn's groups, put before its transaction commits; the last one used first. */
  private turn: PendingGroup[] = []
  private last: PendingGroup | null = null

  constructor (store: Store, { retentionMs, sizeMaxBytes }: EventLogOptions) {
    this.store = store
    this.db = store.events
    this.retentionMs = retentionMs
    this.sizeMaxBytes = sizeMaxBytes
    // Numbers of a block reserved but not used before a restart are skipped: never given twice.
    this.seq = this.seqReserved = (store.meta.get(SEQ_RESERVED_KEY) as number | undefined) ?? 0
    this.db.on('beforecommit', () => this.putGroups())
  }

  /** For the visitor actor: bound once, so the hot path makes no closure. */
  readonly append: EventAppender = (account, visitorId, profileId, event, nowMs, segments) => {
    this.appendRow(account, visitorId, profileId, event, nowMs, segments)
  }

  /** Appends an accepted event (as `append`) and answers its row, which the saved reports' columns are fed from. */
  appendRow (account: string, visitorId: string, profileId: string | null, event: Record<string, unknown>, nowMs: number, segments: readonly string[]): EventRow {
    const row = eventRow(visitorId, profileId, event, segments)
    // In a synchronous transaction (a tool's, a test's) there is no turn to wait for: a row of its own.
    const grouped = !inSyncTransaction(this.db)
    const group = grouped ? this.groupOf(account, nowMs) : null
    if (group !== null) {
      group.rows.push(row)
      return row
    }
    // The first of its account and millisecond in this turn: put now, which also opens the turn's
    // transaction (its failure is the transaction's, reported through the state write it travels with).
    this.store.ignoreFailure(this.db.put([account, nowMs, this.nextSeq()], row))
    if (grouped) this.turn.push(this.last = { account, timeMs: nowMs, rows: [EVENT_GROUP_FORMAT] })
    return row
  }

  /** This turn's group of an account and millisecond, or null when none was appended yet. */
  private groupOf (account: string, timeMs: number): PendingGroup | null {
    const last = this.last
    if (last !== null && last.timeMs === timeMs && last.account === account) return last
    for (const group of this.turn) {
      if (group.timeMs === timeMs && group.account === account) {
        this.last = group
        return group
      }
    }
    return null
  }

  /** Right before the turn's transaction commits: each group with events, one put (seqs in a row from its key's). */
  private putGroups (): void {
    const turn = this.turn
    if (turn.length === 0) return
    this.turn = []
    this.last = null
    for (const { account, timeMs, rows } of turn) {
      if (rows.length === 1) continue
      const first = this.nextSeq()
      for (let i = 2; i < rows.length; i++) this.nextSeq()
      this.store.ignoreFailure(this.db.put([account, timeMs, first], rows.length === 2 ? rows[1] : rows))
    }
  }

  /** The seq of the last row appended (rows logged so far have seq ≤ it). */
  get lastSeq (): number { return this.seq }

  private nextSeq (): number {
    const seq = ++this.seq
    if (seq > this.seqReserved) {
      this.seqReserved = seq + SEQ_RESERVE_BLOCK
      this.store.ignoreFailure(this.store.meta.put(SEQ_RESERVED_KEY, this.seqReserved))
    }
    return seq
  }

  /**
   * One page, newest first: at most `limit` events, reading at most EVENT_SCAN_MAX rows. `cursor`: the
   * `next` of the previous page (null: from `toMs`). `next` is null once the range is walked.
   */
  page (account: string, query: EventQuery, limit: number, cursor: string | null): { events: LoggedEvent[], next: string | null } {
    const parsed = cursor === null ? null : parseCursor(cursor)
    const after = parsed === null || parsed[0] >= query.toMs ? null : parsed
    // Reverse walks start at their start key, inclusive: [t, seq - 1] comes right after [t, seq], and a
    // group keyed before the cursor's event may hold events after it (skipped).
    const start = after === null ? [account, query.toMs] : [account, after[0], after[1] - 1]
    const events: LoggedEvent[] = []
    let scanned = 0
    for (const { key, value } of this.db.getRange({ start, end: [account, query.fromMs], reverse: true })) {
      const [, timeMs, first] = key as EventKey
      for (let i = eventCount(value) - 1; i >= 0; i--) {
        const seq = first + i
        if (after !== null && timeMs === after[0] && seq >= after[1]) continue
        const row = eventAt(value, i)
        if (row !== null && matches(row, query)) events.push(view(timeMs, seq, row))
        if (events.length >= limit || ++scanned >= EVENT_SCAN_MAX) return { events, next: `${timeMs}-${seq}` }
      }
    }
    return { events, next: null }
  }

  /**
   * The account's events of [fromMs, toMs) matching the query, oldest first, in steps of at most
   * EVENT_SCAN_MAX rows (each step one read transaction): what an export streams.
   */
  * range (account: string, query: EventQuery): Generator<LoggedEvent[]> {
    let start: (string | number)[] = [account, query.fromMs]
    for (;;) {
      const batch: LoggedEvent[] = []
      let last: EventKey | null = null
      let scanned = 0
      for (const { key, value } of this.db.getRange({ start, end: [account, query.toMs], limit: EVENT_SCAN_MAX })) {
        last = key as EventKey
        scanned++
        for (let i = 0, n = eventCount(value); i < n; i++) {
          const row = eventAt(value, i)
          if (row !== null && matches(row, query)) batch.push(view(last[1], last[2] + i, row))
        }
      }
      if (batch.length > 0) yield batch
      if (last === null || scanned < EVENT_SCAN_MAX) return
      start = [account, last[1], last[2] + 1]
    }
  }

  /**
   * At most `limit` of the account's events of [fromMs, toMs) matching the query, oldest first, after the
   * event `after` (an event's [timeMs, seq]; null: from fromMs), reading at most EVENT_SCAN_MAX rows (one
   * read transaction). `last`: the last row read, where the next call resumes; null once the range is walked.
   */
  next (account: string, query: EventQuery, after: [number, number] | null, limit: number): { events: LoggedEvent[], last: [number, number] | null } {
    const from = after === null || after[0] < query.fromMs ? null : after
    // From the first key of `after`'s millisecond: a group keyed before `after` may hold events after it.
    const start = from === null ? [account, query.fromMs] : [account, from[0]]
    const events: LoggedEvent[] = []
    let scanned = 0
    for (const { key, value } of this.db.getRange({ start, end: [account, query.toMs] })) {
      const [, timeMs, first] = key as EventKey
      for (let i = 0, n = eventCount(value); i < n; i++) {
        const seq = first + i
        if (from !== null && timeMs === from[0] && seq <= from[1]) continue
        const row = eventAt(value, i)
        if (row !== null && matches(row, query)) events.push(view(timeMs, seq, row))
        if (events.length >= limit || ++scanned >= EVENT_SCAN_MAX) return { events, last: [timeMs, seq] }
      }
    }
    return { events, last: null }
  }

  /**
   * Remove the account's events of these visitors or profiles (erasure). Walks the account's log in
   * turns of EVENT_TRIM_BATCH_MAX rows, each durable before the next. Returns how many were removed.
   */
  async forget (account: string, visitors: ReadonlySet<string>, profiles: ReadonlySet<string>): Promise<number> {
    if (visitors.size === 0 && profiles.size === 0) return 0
    const erased = (row: unknown): boolean => {
      const profileId = rowProfile(row)
      return visitors.has(rowVisitor(row)) || (profileId !== undefined && profiles.has(profileId))
    }
    let start: (string | number)[] = [account]
    let removed = 0
    for (;;) {
      let last: EventKey | null = null
      let scanned = 0
      let write: Promise<boolean> | null = null
      for (const { key, value } of this.db.getRange({ start, end: [account, KEY_PART_MAX], limit: EVENT_TRIM_BATCH_MAX })) {
        last = key as EventKey
        scanned++
        if (!isEventGroup(value)) {
          if (erased(value)) {
            write = this.db.remove(last)
            removed++
          }
          continue
        }
        // A group keeps its other events in their places (their ids do not change); the erased ones' bytes go.
        let left = 0
        let changed = false
        for (let i = 1; i < value.length; i++) {
          if (value[i] === null) continue
          if (erased(value[i])) {
            value[i] = null
            changed = true
            removed++
          } else left++
        }
        if (changed) write = left === 0 ? this.db.remove(last) : this.db.put(last, value)
      }
      if (write !== null) await this.store.durable(write)
      if (last === null || scanned < EVENT_TRIM_BATCH_MAX) return removed
      start = [account, last[1], last[2] + 1]
    }
  }

  /** Remove every event of an account (its deletion). Returns how many. */
  async removeAccount (account: string): Promise<number> {
    let removed = 0
    for (;;) {
      let write: Promise<boolean> | null = null
      let n = 0
      for (const { key, value } of this.db.getRange({ start: [account], end: [account, KEY_PART_MAX], limit: EVENT_TRIM_BATCH_MAX })) {
        write = this.db.remove(key)
        removed += eventsKept(value)
        n++
      }
      if (write !== null) await this.store.durable(write)
      if (n < EVENT_TRIM_BATCH_MAX) return removed
    }
  }

  /**
   * One trim turn (one transaction): events past retention, then, over the size cap, the oldest hour
   * of every account. Removes at most `max` rows (a group of events is one); returns how many it
   * removed (`max`: call again).
   */
  trim (nowMs: number, max = EVENT_TRIM_BATCH_MAX): number {
    let removed = this.removeBefore(() => nowMs - this.retentionMs, max)
    if (removed < max && this.overCap()) {
      removed += this.removeBefore(oldestMs => oldestMs + EVENT_CAP_STEP_MS, max - removed)
    }
    return removed
  }

  /** Trim turns until nothing is left to remove, each committed before the next (tests, tools). */
  async trimAll (nowMs: number): Promise<number> {
    let total = 0
    for (;;) {
      const removed = this.trim(nowMs)
      total += removed
      await this.db.committed
      if (removed < EVENT_TRIM_BATCH_MAX && !(removed > 0 && this.overCap())) return total
    }
  }

  /** Whether the log is larger than BEACON_EVENT_LOG_MAX_BYTES (as last committed). */
  overCap (): boolean {
    return this.sizeMaxBytes > 0 && this.sizeBytes() > this.sizeMaxBytes
  }

  /** The pages the log's B-tree holds, in bytes (what the size cap compares). */
  sizeBytes (): number {
    const stats = this.db.getStats() as { pageSize: number, treeBranchPageCount: number, treeLeafPageCount: number, overflowPages: number }
    return stats.pageSize * (stats.treeBranchPageCount + stats.treeLeafPageCount + stats.overflowPages)
  }

  /** Events kept (all accounts): a walk of every row (tests, tools). */
  count (): number {
    let count = 0
    for (const { value } of this.db.getRange({})) count += eventsKept(value)
    return count
  }

  /** For each account, remove its events older than cutoff(its oldest event's time); at most `max` rows. */
  private removeBefore (cutoff: (oldestMs: number) => number, max: number): number {
    let removed = 0
    let from: (string | number)[] = ['']
    while (removed < max) {
      const first = firstKey(this.db, from)
      if (first === null) break
      const account = first[0]
      const beforeMs = cutoff(first[1])
      for (const key of this.db.getKeys({ start: [account], end: [account, beforeMs], limit: max - removed })) {
        this.store.ignoreFailure(this.db.remove(key))
        removed++
      }
      from = [account, KEY_PART_MAX]
    }
    return removed
  }
}

function firstKey (db: Database, start: (string | number)[]): EventKey | null {
  let first: EventKey | null = null
  for (const key of db.getKeys({ start, limit: 1 })) first = key as EventKey
  return first
}

/** Whether the caller writes in a synchronous transaction of the db's environment (lmdb-js's own flag). */
function inSyncTransaction (db: Database): boolean {
  return Boolean((db as unknown as { env: { writeTxn: unknown } }).env.writeTxn)
}

/** Whether a stored row (of format 1 or the record format) matches the query's filters, read without building the event. */
function matches (value: unknown, query: EventQuery): boolean {
  return (query.visitorId === null || rowVisitor(value) === query.visitorId) &&
    (query.profileId === null || rowProfile(value) === query.profileId) &&
    (query.kind === null || rowKind(value) === query.kind)
}

function view (timeMs: number, seq: number, value: unknown): LoggedEvent {
  const stored = storedEvent(value)
  const event: LoggedEvent = { id: `${timeMs}-${seq}`, time: new Date(timeMs).toISOString(), visitorId: stored.visitorId, kind: stored.kind, fields: stored.fields }
  if (stored.profileId !== undefined) event.profileId = stored.profileId
  if (stored.segments !== undefined) event.segments = stored.segments
  return event
}

/** A page's `next` as [timeMs, seq], or null when it is not one (the route answers 400). */
export function parseCursor (cursor: string): [number, number] | null {
  const match = CURSOR.exec(cursor)
  return match === null ? null : [Number(match[1]), Number(match[2])]
}

/**
 * The background trim: every EVENT_TRIM_EVERY_MS, turns of at most EVENT_TRIM_BATCH_MAX rows until
 * nothing is left to remove (the event loop served between them). Returns what stops it.
 */
export function trimEventLog (log: EventLog, nowMs: () => number, onError: (error: unknown) => void, everyMs = EVENT_TRIM_EVERY_MS): () => void {
  let stopped = false
  let timer: NodeJS.Timeout | null = null
  const turn = (): void => {
    timer = null
    if (stopped) return
    let removed = 0
    try {
      removed = log.trim(nowMs())
    } catch (error) {
      onError(error)
    }
    if (stopped) return
    // A full turn, or a step under the size cap that left it still over: the next turn at once.
    if (removed >= EVENT_TRIM_BATCH_MAX || (removed > 0 && log.overCap())) setImmediate(turn)
    else timer = setTimeout(turn, everyMs).unref()
  }
  timer = setTimeout(turn, everyMs).unref()
  return () => {
    stopped = true
    if (timer !== null) clearTimeout(timer)
  }
}
