// The columns saved reports are computed from (docs/reports.md, "How it is computed"): every event of
// the retained log, held in memory per account as typed arrays, with each string replaced by its
// number in a per-column dictionary. A report over 10 million events is then one pass over a few
// arrays with integer keys (bench/reports.ts: under 2 s on this machine under load, where walking the
// log's LMDB rows reads about 300,000 events/s and DuckDB's grouped distinct counts took 2-13 s).
//
// Loaded from the log in the background at start (saved-load.ts drives the turns): the server serves
// meanwhile, and the index is `ready` once the walk is done. The walk reads only the rows logged before
// it began (seq ≤ `upToSeq`, up to each account's last such key); what happens to an account the walk has not finished yet (appends,
// erasures) is queued for it, in order, and replayed once its rows are in, so every event is counted
// once. Then the wiring keeps it in step: each appended event is added, each erasure marks its rows
// dead, and rows the log no longer has (retention, size cap, account deletion) are dropped when a
// report reads the account and by a pass every minute (`compact`, saved-results.ts), so the columns
// hold what the log holds, not everything the process saw. The log stays the record; this is a derived
// view of it, never written to disk.

import type { Database, Key } from 'lmdb'
import { EVENT_ROW_FIELDS, EVENT_ROW_PAIRS, eventAt, eventCount, eventRow, isEventRow, type EventRow, type StoredEvent } from '../store/event-row.js'
import { KEY_PART_MAX } from '../store/store.js'

/** The columns every event has (absent: NONE), besides time, visitor, profile and kind. */
export const DIMENSION_FIELDS = ['platform', 'device', 'path', 'campaignId', 'variant'] as const
export type DimensionField = typeof DIMENSION_FIELDS[number]

/** A column value that is absent. */
export const NONE = -1
/**
 * Distinct string values kept per custom field and account: past it, later values of that field are
 * not kept (the field is `overflowed`: it can still be summed, but not broken down or filtered by).
 */
export const FIELD_VALUES_MAX = 10_000
/** Fields never kept as columns: the identity and routing fields, and a client's own message keys. */
const NOT_FIELDS: ReadonlySet<string> = new Set(['token', 'account', 'visitorId', 'profileId', 'event', 'profileIdSignature', 'messageId', ...DIMENSION_FIELDS])
const CAPACITY_MIN = 1024

/** Strings of one column, numbered in order of first sight. */
export class Dictionary {
  readonly values: string[] = []
  private readonly ids = new Map<string, number>()

  /** The value's number, added if new (NONE when the dictionary is full). */
  idOf (value: string, max = Number.MAX_SAFE_INTEGER): number {
    let id = this.ids.get(value)
    if (id === undefined) {
      if (this.values.length >= max) return NONE
      id = this.values.length
      this.values.push(value)
      this.ids.set(value, id)
    }
    return id
  }

  /** The value's number, or NONE when never seen. */
  find (value: string): number { return this.ids.get(value) ?? NONE }

  /**
   * Keeps only the values `column`'s first `n` entries refer to, numbered anew in order of first use,
   * and rewrites those entries to the new numbers (NONE stays NONE).
   */
  keepUsed (column: Int32Array, n: number): void {
    const renumbered = new Int32Array(this.values.length).fill(NONE)
    const kept: string[] = []
    for (let row = 0; row < n; row++) {
      const old = column[row]!
      if (old === NONE) continue
      let id = renumbered[old]!
      if (id === NONE) {
        id = renumbered[old] = kept.length
        kept.push(this.values[old]!)
      }
      column[row] = id
    }
    this.values.length = kept.length
    this.ids.clear()
    for (let id = 0; id < kept.length; id++) {
      this.values[id] = kept[id]!
      this.ids.set(kept[id]!, id)
    }
  }

  get size (): number { return this.values.length }
}

/** A custom field's values, kept only for the rows that have it (rows ascending). */
export class SparseField {
  rows = new Int32Array(CAPACITY_MIN)
  /** The number (NaN: the value is a string). */
  numbers = new Float64Array(CAPACITY_MIN)
  /** The string's number in `dictionary` (NONE: a number, or a string past FIELD_VALUES_MAX). */
  strings = new Int32Array(CAPACITY_MIN)
  n = 0
  overflowed = false
  readonly dictionary = new Dictionary()

  push (row: number, value: unknown): void {
    if (this.n === this.rows.length) this.grow(this.n * 2)
    const at = this.n
    if (typeof value === 'number') {
      this.numbers[at] = value
      this.strings[at] = NONE
    } else {
      const id = this.dictionary.idOf(String(value), FIELD_VALUES_MAX)
      if (id === NONE) this.overflowed = true
      this.numbers[at] = Number.NaN
      this.strings[at] = id
    }
    this.rows[at] = row
    this.n++
  }

  grow (capacity: number): void {
    this.rows = resized(this.rows, capacity)
    this.numbers = resized(this.numbers, capacity)
    this.strings = resized(this.strings, capacity)
  }
}

/** One account's events as columns, in the order they were applied. */
export class AccountColumns {
  n = 0
  timeMs = new Float64Array(CAPACITY_MIN)
  visitor = new Int32Array(CAPACITY_MIN)
  profile = new Int32Array(CAPACITY_MIN)
  kind = new Int32Array(CAPACITY_MIN)
  /** 1: in the log; 0: erased (dropped at the next compaction). */
  alive = new Uint8Array(CAPACITY_MIN)
  dimensions: Int32Array[] = DIMENSION_FIELDS.map(() => new Int32Array(CAPACITY_MIN))
  /** The segments the visitor was in at the event: a number in `segmentSets` (NONE: none, or a row logged before they were kept). */
  segmentSet = new Int32Array(CAPACITY_MIN)
  readonly visitors = new Dictionary()
  readonly profiles = new Dictionary()
  readonly kinds = new Dictionary()
  readonly dimensionValues: Dictionary[] = DIMENSION_FIELDS.map(() => new Dictionary())
  readonly fields = new Map<string, SparseField>()
  /** Each segment's name once, and each combination of segments seen (its members' numbers in `segmentNames`). */
  readonly segmentNames = new Dictionary()
  readonly segmentSets = new Dictionary()
  readonly segmentSetMembers: Int32Array[] = []
  /** Rows marked dead by erasures since the last compaction. */
  dead = 0
  /** Rows dropped since the dictionaries were last cut to the rows kept (compact). */
  private droppedSinceRenumber = 0
  /**
   * Whether every row's time is at least the one before it (the log's server times, in the order
   * applied). A clock stepping back clears it: reports then count distinct people by sets (slower).
   */
  ordered = true

  /** An event as a record of the log's former format (and the cluster's stream) has it. */
  add (timeMs: number, visitorId: string, profileId: string | null, kind: string, fields: Record<string, unknown>, segments: readonly string[] | null | undefined): void {
    const row = this.addIdentity(timeMs, visitorId, profileId, kind, segments)
    for (let d = 0; d < DIMENSION_FIELDS.length; d++) {
      const value = fields[DIMENSION_FIELDS[d]!]
      this.dimensions[d]![row] = typeof value === 'string' ? this.dimensionValues[d]!.idOf(value) : NONE
    }
    for (const name in fields) this.addField(row, name, fields[name])
  }

  /** An event as the log's row holds it (event-row.ts): its pairs read in place, the dimensions by their number. */
  addRow (timeMs: number, event: EventRow): void {
    const row = this.addIdentity(timeMs, event[1] as string, event[3] as string | null, event[2] as string, event[4] as string[] | null)
    for (let d = 0; d < DIMENSION_FIELDS.length; d++) this.dimensions[d]![row] = NONE
    for (let i = EVENT_ROW_PAIRS; i < event.length; i += 2) {
      const name = event[i]
      const value = event[i + 1]
      if (typeof name !== 'number') this.addField(row, name as string, value)
      else if (name >= DIMENSION_FIELDS.length) this.addField(row, EVENT_ROW_FIELDS[name]!, value)
      else if (typeof value === 'string') this.dimensions[name]![row] = this.dimensionValues[name]!.idOf(value)
    }
  }

  /** A new row with its time, visitor, profile, kind and segments; answers its number. */
  private addIdentity (timeMs: number, visitorId: string, profileId: string | null, kind: string, segments: readonly string[] | null | undefined): number {
    if (this.n === this.timeMs.length) this.grow(this.n * 2)
    const row = this.n++
    if (row > 0 && timeMs < this.timeMs[row - 1]!) this.ordered = false
    this.timeMs[row] = timeMs
    this.visitor[row] = this.visitors.idOf(visitorId)
    this.profile[row] = profileId === null ? NONE : this.profiles.idOf(profileId)
    this.kind[row] = this.kinds.idOf(kind)
    this.alive[row] = 1
    this.segmentSet[row] = segments == null || segments.length === 0 ? NONE : this.segmentSetOf(segments)
    return row
  }

  /** A custom field's value (scalars only; the identity and dimension fields are not custom). */
  private addField (row: number, name: string, value: unknown): void {
    if (NOT_FIELDS.has(name)) return
    if (typeof value !== 'number' && typeof value !== 'string' && typeof value !== 'boolean') return
    let field = this.fields.get(name)
    if (field === undefined) this.fields.set(name, field = new SparseField())
    field.push(row, value)
  }

  /** The number of this combination of segments (segment names hold no newline: NAME_PATTERN). */
  private segmentSetOf (segments: readonly string[]): number {
    const key = segments.length === 1 ? segments[0]! : segments.join('\n')
    const id = this.segmentSets.idOf(key)
    if (id === this.segmentSetMembers.length) this.segmentSetMembers.push(Int32Array.from(segments, name => this.segmentNames.idOf(name)))
    return id
  }

  /** Mark dead the rows of these visitors and of devices linked to these profiles (an erasure). */
  forget (visitors: ReadonlySet<string>, profiles: ReadonlySet<string>): void {
    const visitorIds = new Set<number>()
    for (const id of visitors) if (this.visitors.find(id) !== NONE) visitorIds.add(this.visitors.find(id))
    const profileIds = new Set<number>()
    for (const id of profiles) if (this.profiles.find(id) !== NONE) profileIds.add(this.profiles.find(id))
    if (visitorIds.size === 0 && profileIds.size === 0) return
    for (let row = 0; row < this.n; row++) {
      if (this.alive[row] === 1 && (visitorIds.has(this.visitor[row]!) || profileIds.has(this.profile[row]!))) {
        this.alive[row] = 0
        this.dead++
      }
    }
  }

  /**
   * Drop the rows the log no longer holds: older than `keptFromMs` (the account's oldest event in the
   * log, after retention and the size cap) and erased ones. Rewrites the arrays only when there is
   * something to drop.
   */
  compact (keptFromMs: number): void {
    // In time order (the usual case) with nothing erased, the first row is the oldest: nothing to scan.
    if (this.dead === 0 && this.ordered && (this.n === 0 || this.timeMs[0]! >= keptFromMs)) return
    let stale = this.dead
    for (let row = 0; row < this.n; row++) if (this.alive[row] === 1 && this.timeMs[row]! < keptFromMs) stale++
    if (stale === 0) return
    const keep = new Int32Array(this.n).fill(NONE)
    let kept = 0
    for (let row = 0; row < this.n; row++) {
      if (this.alive[row] === 1 && this.timeMs[row]! >= keptFromMs) keep[row] = kept++
    }
    for (let row = 0; row < this.n; row++) {
      const to = keep[row]!
      if (to === NONE || to === row) continue
      this.timeMs[to] = this.timeMs[row]!
      this.visitor[to] = this.visitor[row]!
      this.profile[to] = this.profile[row]!
      this.kind[to] = this.kind[row]!
      this.alive[to] = 1
      for (const column of this.dimensions) column[to] = column[row]!
      this.segmentSet[to] = this.segmentSet[row]!
    }
    for (const field of this.fields.values()) {
      let at = 0
      for (let i = 0; i < field.n; i++) {
        const to = keep[field.rows[i]!]!
        if (to === NONE) continue
        field.rows[at] = to
        field.numbers[at] = field.numbers[i]!
        field.strings[at] = field.strings[i]!
        at++
      }
      field.n = at
    }
    this.droppedSinceRenumber += this.n - kept
    this.n = kept
    this.dead = 0
    this.ordered = true
    for (let row = 1; row < kept && this.ordered; row++) if (this.timeMs[row]! < this.timeMs[row - 1]!) this.ordered = false
    // The dictionaries keep the strings of dropped rows (every visitor a site ever had, in a process that
    // runs for months) until as many rows were dropped as half of those kept: then they keep only what
    // the rows refer to, so they hold at most about one and a half retention windows' worth of values.
    // The same for the arrays' capacity, left at the largest the account had.
    if (this.droppedSinceRenumber * 2 >= kept) this.renumber()
    if (this.timeMs.length > 4 * Math.max(kept, CAPACITY_MIN)) this.grow(2 * kept)
  }

  /** The dictionaries of visitors, profiles and dimension values cut to what the rows refer to. */
  private renumber (): void {
    this.visitors.keepUsed(this.visitor, this.n)
    this.profiles.keepUsed(this.profile, this.n)
    for (let d = 0; d < DIMENSION_FIELDS.length; d++) this.dimensionValues[d]!.keepUsed(this.dimensions[d]!, this.n)
    this.droppedSinceRenumber = 0
  }

  private grow (capacity: number): void {
    this.timeMs = resized(this.timeMs, capacity)
    this.visitor = resized(this.visitor, capacity)
    this.profile = resized(this.profile, capacity)
    this.kind = resized(this.kind, capacity)
    this.alive = resized(this.alive, capacity)
    this.dimensions = this.dimensions.map(column => resized(column, capacity))
    this.segmentSet = resized(this.segmentSet, capacity)
  }
}

/** What happened to an account while the load had not finished it: replayed in order after its rows. */
type Queued =
  | { add: true, timeMs: number, row: EventRow }
  | { add: false, visitors: ReadonlySet<string>, profiles: ReadonlySet<string> }

/** Where the load stands: where the next turn starts, and what it waits to replay. */
interface Loading {
  /** Rows logged after the load began (seq above this) reach the index as appends, never through the walk. */
  upToSeq: number
  /** The key the next turn starts at (undefined: the log's first). */
  next: Key | undefined
  /** The account being walked, and the last key it had when the load began (null: none). */
  account: string | null
  end: [number, number] | null
  /** Accounts whose rows are all in (their appends go straight to the columns). */
  done: Set<string>
  queued: Map<string, Queued[]>
  /** Accounts deleted during the load: their remaining logged rows are skipped. */
  removed: Set<string>
  read: number
}

/**
 * Every account's columns: what the wiring feeds and the report engine reads.
 *
 * Appended events are added after the event turn that logged them (`addRow`: on the next setImmediate,
 * all of that turn's events at once), not in the request's own turn: their columns' cost is then not
 * between the event and the commit its answer waits for (the log's cost on the single-event path,
 * bench/results/2026-11-28-event-log-cost-2.md). Every read and every other change of the index adds
 * what is pending first, so a report, an erasure, a compaction or the load's catch-up sees the columns
 * exactly as if each event had been added at once, in the same order.
 */
export class SavedReportIndex {
  private readonly accounts = new Map<string, AccountColumns>()
  private loading: Loading | null = null
  /** Appended events not added yet: account, time and row, three entries each, in the order appended. */
  private pending: Array<string | number | EventRow> = []
  private drainQueued = false
  private readonly drainLater = (): void => {
    this.drainQueued = false
    this.drain()
  }

  /** Cluster mode: fed from the cluster's stream, which has not been read up to where it stood yet. */
  private feeding = false

  /** Whether the columns hold the whole log (false while the background load, or the stream's first read, runs). */
  get ready (): boolean { return this.loading === null && !this.feeding }

  /**
   * Cluster mode (saved-stream-feed.ts): every event comes through `addFed`, in the stream's order, the
   * index not ready until `fed` is called (the stream read up to where it stood).
   */
  beginFeed (): void { this.feeding = true }
  fed (): void { this.feeding = false }

  /** An event of the cluster's stream (its fields as stored: no identity field among them). */
  addFed (account: string, timeMs: number, visitorId: string, profileId: string | null, kind: string, fields: Record<string, unknown>, segments: readonly string[] | undefined): void {
    this.drain()
    this.columns(account).add(timeMs, visitorId, profileId, kind, fields, segments)
  }

  /** Start a load of the rows logged so far (seq ≤ upToSeq): not ready until `loadTurn` answers true. Its `read` counts the rows loaded. */
  beginLoad (upToSeq: number): Readonly<{ read: number }> {
    this.drain()
    const loading: Loading = { upToSeq, next: undefined, account: null, end: null, done: new Set(), queued: new Map(), removed: new Set(), read: 0 }
    this.loading = loading
    return loading
  }

  /**
   * Read up to `rows` more rows of the log (key order: account, then time). Each account is walked up
   * to the last key it had when the load began, then skipped to the next account: rows appended since
   * (its newest) are never walked, so the load ends however fast events arrive. Answers true once the
   * walk is done and everything queued is replayed (the index is then ready), in the same synchronous turn.
   */
  loadTurn (events: Database, rows: number): boolean {
    this.drain()
    const loading = this.loading
    if (loading === null) return true
    let budget = rows
    while (budget > 0) {
      const asked = budget
      let got = 0
      let skipped = false
      for (const { key, value } of events.getRange({ start: loading.next, limit: asked })) {
        got++
        budget--
        const [account, timeMs, seq] = key as [string, number, number]
        if (account !== loading.account) {
          if (loading.account !== null) this.finishAccount(loading.account)
          loading.account = account
          loading.end = loading.removed.has(account) ? null : lastKeyUpTo(events, account, loading.upToSeq)
        }
        const end = loading.end
        if (end === null || timeMs > end[0] || (timeMs === end[0] && seq > end[1])) {
          // Past the account's rows of before the load: on to the next account.
          loading.next = [account, KEY_PART_MAX]
          skipped = true
          break
        }
        // [account, t, seq + 1] is the first key after [account, t, seq] (seq is an integer).
        loading.next = [account, timeMs, seq + 1]
        if (seq > loading.upToSeq) continue
        const columns = this.columns(account)
        for (let i = 0, n = eventCount(value); i < n && seq + i <= loading.upToSeq; i++) {
          const row = eventAt(value, i)
          if (row === null) continue
          if (isEventRow(row)) columns.addRow(timeMs, row)
          else {
            // A row of the record format (logged before 2026-11-28).
            const stored = row as StoredEvent
            columns.add(timeMs, stored.visitorId, stored.profileId ?? null, stored.kind, stored.fields, stored.segments)
          }
          loading.read++
        }
      }
      if (skipped) continue
      if (got === asked) return false
      // The walk is done. The final catch-up: every account not finished yet gets what was queued for it.
      for (const account of loading.queued.keys()) this.replay(account)
      this.loading = null
      return true
    }
    return false
  }

  /** The log's rows, in key order, in one synchronous walk (a bench; the server loads in turns). */
  load (events: Database): number {
    const loading = this.beginLoad(Number.MAX_SAFE_INTEGER)
    while (!this.loadTurn(events, 100_000));
    return loading.read
  }

  /** An event just appended to the log (the visitor actor's event turn), as an event body. */
  add (account: string, visitorId: string, profileId: string | null, event: Record<string, unknown>, nowMs: number, segments: readonly string[]): void {
    this.addRow(account, nowMs, eventRow(visitorId, profileId, event, segments))
  }

  /**
   * An event just appended to the log, as its row (EventLog.appendRow; the row is not changed after).
   * Added once the current event turn is over, or before the index is next read or changed.
   */
  addRow (account: string, timeMs: number, row: EventRow): void {
    this.pending.push(account, timeMs, row)
    if (!this.drainQueued) {
      this.drainQueued = true
      setImmediate(this.drainLater)
    }
  }

  /** Adds the appended events not added yet, in order. */
  private drain (): void {
    const pending = this.pending
    if (pending.length === 0) return
    this.pending = []
    for (let i = 0; i < pending.length; i += 3) {
      const account = pending[i] as string
      const timeMs = pending[i + 1] as number
      const row = pending[i + 2] as EventRow
      const queue = this.queueOf(account)
      if (queue !== null) queue.push({ add: true, timeMs, row })
      else this.columns(account).addRow(timeMs, row)
    }
  }

  forget (account: string, visitors: ReadonlySet<string>, profiles: ReadonlySet<string>): void {
    this.drain()
    const queue = this.queueOf(account)
    if (queue !== null) queue.push({ add: false, visitors, profiles })
    else this.accounts.get(account)?.forget(visitors, profiles)
  }

  removeAccount (account: string): void {
    this.drain()
    this.accounts.delete(account)
    const loading = this.loading
    if (loading !== null && !loading.done.has(account)) {
      loading.queued.delete(account)
      loading.removed.add(account)
    }
  }

  /** The account's columns (empty when it has no event yet). */
  of (account: string): AccountColumns | undefined {
    this.drain()
    return this.accounts.get(account)
  }

  /** The accounts that have columns. */
  accountIds (): string[] {
    this.drain()
    return [...this.accounts.keys()]
  }

  private columns (account: string): AccountColumns {
    let columns = this.accounts.get(account)
    if (columns === undefined) this.accounts.set(account, columns = new AccountColumns())
    return columns
  }

  /** The queue of an account the load has not finished, or null when its changes go straight in. */
  private queueOf (account: string): Queued[] | null {
    const loading = this.loading
    if (loading === null || loading.done.has(account)) return null
    let queue = loading.queued.get(account)
    if (queue === undefined) loading.queued.set(account, queue = [])
    return queue
  }

  private finishAccount (account: string): void {
    this.replay(account)
    this.loading!.done.add(account)
  }

  private replay (account: string): void {
    const queue = this.loading!.queued.get(account)
    if (queue === undefined) return
    this.loading!.queued.delete(account)
    for (const op of queue) {
      if (op.add) this.columns(account).addRow(op.timeMs, op.row)
      else this.accounts.get(account)?.forget(op.visitors, op.profiles)
    }
  }
}

/** The account's last key [timeMs, seq] among rows of seq ≤ upToSeq (walked from its newest), or null. */
function lastKeyUpTo (events: Database, account: string, upToSeq: number): [number, number] | null {
  for (const key of events.getKeys({ start: [account, KEY_PART_MAX], end: [account], reverse: true })) {
    const [, timeMs, seq] = key as [string, number, number]
    if (seq <= upToSeq) return [timeMs, seq]
  }
  return null
}

function resized<T extends Float64Array | Int32Array | Uint8Array> (array: T, capacity: number): T {
  const next = new (array.constructor as new (n: number) => T)(Math.max(capacity, CAPACITY_MIN))
  next.set(array.subarray(0, Math.min(array.length, capacity)))
  return next
}
