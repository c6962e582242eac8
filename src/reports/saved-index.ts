// The columns saved reports are computed from (docs/reports.md, "How it is computed"): every event of
// the retained log, held in memory per account as typed arrays, with each string replaced by its
// number in a per-column dictionary. A report over 10 million events is then one pass over a few
// arrays with integer keys (bench/reports.ts: under 2 s on this machine under load, where walking the
// log's LMDB rows reads about 300,000 events/s and DuckDB's grouped distinct counts took 2-13 s).
//
// Built once at start from the log (before any request is served, so nothing arrives during the walk),
// then kept in step by the wiring: each appended event is added, each erasure marks its rows dead, and
// rows the log no longer has (retention, size cap, account deletion) are dropped when a report reads the
// account (`compact`). The log stays the record; this is a derived view of it, never written to disk.

import type { Database } from 'lmdb'
import type { StoredEvent } from '../store/event-log.js'

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
  readonly visitors = new Dictionary()
  readonly profiles = new Dictionary()
  readonly kinds = new Dictionary()
  readonly dimensionValues: Dictionary[] = DIMENSION_FIELDS.map(() => new Dictionary())
  readonly fields = new Map<string, SparseField>()
  /** Rows marked dead by erasures since the last compaction. */
  dead = 0
  /**
   * Whether every row's time is at least the one before it (the log's server times, in the order
   * applied). A clock stepping back clears it: reports then count distinct people by sets (slower).
   */
  ordered = true

  add (timeMs: number, visitorId: string, profileId: string | null, kind: string, fields: Record<string, unknown>): void {
    if (this.n === this.timeMs.length) this.grow(this.n * 2)
    const row = this.n++
    if (row > 0 && timeMs < this.timeMs[row - 1]!) this.ordered = false
    this.timeMs[row] = timeMs
    this.visitor[row] = this.visitors.idOf(visitorId)
    this.profile[row] = profileId === null ? NONE : this.profiles.idOf(profileId)
    this.kind[row] = this.kinds.idOf(kind)
    this.alive[row] = 1
    for (let d = 0; d < DIMENSION_FIELDS.length; d++) {
      const value = fields[DIMENSION_FIELDS[d]!]
      this.dimensions[d]![row] = typeof value === 'string' ? this.dimensionValues[d]!.idOf(value) : NONE
    }
    for (const name in fields) {
      if (NOT_FIELDS.has(name)) continue
      const value = fields[name]
      if (typeof value !== 'number' && typeof value !== 'string' && typeof value !== 'boolean') continue
      let field = this.fields.get(name)
      if (field === undefined) this.fields.set(name, field = new SparseField())
      field.push(row, value)
    }
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
    this.n = kept
    this.dead = 0
    this.ordered = true
    for (let row = 1; row < kept && this.ordered; row++) if (this.timeMs[row]! < this.timeMs[row - 1]!) this.ordered = false
    // Dictionaries keep the strings of dropped rows until the process restarts: they are bounded by what
    // the retention window saw, and renumbering them would cost a pass over every column.
  }

  private grow (capacity: number): void {
    this.timeMs = resized(this.timeMs, capacity)
    this.visitor = resized(this.visitor, capacity)
    this.profile = resized(this.profile, capacity)
    this.kind = resized(this.kind, capacity)
    this.alive = resized(this.alive, capacity)
    this.dimensions = this.dimensions.map(column => resized(column, capacity))
  }
}

/** Every account's columns: what the wiring feeds and the report engine reads. */
export class SavedReportIndex {
  private readonly accounts = new Map<string, AccountColumns>()

  /** The log's rows, in key order (account, then time): called once at start, before serving. */
  load (events: Database): number {
    let loaded = 0
    // Key order is time order within an account: the columns come out ordered (unless the clock stepped back).
    for (const { key, value } of events.getRange()) {
      const [account, timeMs] = key as [string, number, number]
      const stored = value as StoredEvent
      this.columns(account).add(timeMs, stored.visitorId, stored.profileId ?? null, stored.kind, stored.fields)
      loaded++
    }
    return loaded
  }

  /** An event just appended to the log (the visitor actor's event turn). */
  add (account: string, visitorId: string, profileId: string | null, event: Record<string, unknown>, nowMs: number): void {
    this.columns(account).add(nowMs, visitorId, profileId, event.event as string, event)
  }

  forget (account: string, visitors: ReadonlySet<string>, profiles: ReadonlySet<string>): void {
    this.accounts.get(account)?.forget(visitors, profiles)
  }

  removeAccount (account: string): void {
    this.accounts.delete(account)
  }

  /** The account's columns (empty when it has no event yet). */
  of (account: string): AccountColumns | undefined {
    return this.accounts.get(account)
  }

  private columns (account: string): AccountColumns {
    let columns = this.accounts.get(account)
    if (columns === undefined) this.accounts.set(account, columns = new AccountColumns())
    return columns
  }
}

function resized<T extends Float64Array | Int32Array | Uint8Array> (array: T, capacity: number): T {
  const next = new (array.constructor as new (n: number) => T)(Math.max(capacity, CAPACITY_MIN))
  next.set(array.subarray(0, Math.min(array.length, capacity)))
  return next
}
