// The panel's reads over many people of one account: search (by id prefix, by attribute value),
// the recently active visitors, and the preview of an unsaved segment rule. None is indexed: each
// walks the account's rows of the visitors (or profiles) db in key order, bounded.
//
// Bounded: a request examines at most `scanMax` rows (PEOPLE_SCAN_DEFAULT, at most PEOPLE_SCAN_MAX)
// and says how many it examined (`scanned`) and whether that was every row of the account (`complete`);
// `next` continues where it stopped. Rows are read PEOPLE_SCAN_BATCH at a time, each batch in its own
// read (a fresh range from the last key), with the event loop free between batches (setImmediate).
//
// Read from this node's store: in cluster mode a node holds only its partitions' rows (and stale copies
// of others'), so the admin routes refuse these reads there (501 cluster_unsupported: src/http/admin-routes.ts).

import type { Database } from 'lmdb'
import { KEY_PART_MAX, type Key, type Store } from '../store/store.js'
import type { Clock } from '../clock.js'
import { emptyVisitor, lastActiveMs, metricsOf, type VisitorState } from '../../actors/visitor.js'
import type { ProfileState } from '../../actors/profile.js'
import { allSegments } from '../../actors/entity.js'
import { compileRule, type SegmentContext } from '../segments/rules.js'
import type { SegmentSet } from '../segments/segment-set.js'
import type { WindowSpec } from '../segments/windows.js'

/** Rows examined by one request unless it asks otherwise (`?scan=`). */
export const PEOPLE_SCAN_DEFAULT = 10_000
/** The most rows one request may examine. */
export const PEOPLE_SCAN_MAX = 100_000
/** Rows read between two yields of the event loop. */
export const PEOPLE_SCAN_BATCH = 500
/** The most people one answer lists. */
export const PEOPLE_LIMIT_MAX = 100
/** The visitors a segment preview names. */
export const PREVIEW_SAMPLE_MAX = 10

export type PersonKind = 'visitor' | 'profile'

export interface PersonSummary {
  kind: PersonKind
  id: string
  attributes: Record<string, unknown>
  /** Visitors: the linked profile; profiles: null. */
  profileId: string | null
  /** Visitors: last activity (ms; 0: unknown); profiles: 0. */
  activeMs: number
  /** Profiles: linked devices; visitors: 0. */
  visitors: number
}

export interface Scanned { scanned: number, complete: boolean }
export interface PeoplePage extends Scanned { people: PersonSummary[], next: string | null }
export interface Preview extends Scanned {
  matches: number
  sample: PersonSummary[]
  next: string | null
  /** False when the rule counts or sums events over a window no saved segment of the account reads: stored visitors have no counters for it yet (they count from when such a segment is saved). */
  windowsRecorded: boolean
}

export interface SearchQuery {
  /** Ids starting with this (visitor ids are lower case). */
  idPrefix: string
  /** An attribute the person has; with `value`, one whose value (or an element of it) equals it, case-insensitive. */
  attribute: string | null
  value: string | null
}

export interface PeopleScanDeps {
  store: Store
  clock: Clock
  /** The account's compiled segments (to tell whether a rule's windows are recorded). */
  segments: (account: string) => SegmentSet
}

const yieldLoop = async (): Promise<void> => { await new Promise(resolve => setImmediate(resolve)) }

function matchesValue (value: unknown, wanted: string): boolean {
  if (Array.isArray(value)) return value.some(item => matchesValue(item, wanted))
  if (typeof value === 'string') return value.toLowerCase() === wanted
  if (typeof value === 'number' || typeof value === 'boolean') return String(value) === wanted
  return false
}

function visitorSummary (id: string, state: Partial<VisitorState>): PersonSummary {
  return { kind: 'visitor', id, attributes: state.attributes ?? {}, profileId: state.profileId ?? null, activeMs: lastActiveMs(state as VisitorState), visitors: 0 }
}

function profileSummary (id: string, state: Partial<ProfileState>): PersonSummary {
  return { kind: 'profile', id, attributes: state.attributes ?? {}, profileId: null, activeMs: 0, visitors: state.visitors?.length ?? 0 }
}

/** `activeMs.id` of the last person of a page of the recently active: the next page lists those after it. */
export function recentCursor (person: PersonSummary): string {
  return `${person.activeMs}.${person.id}`
}

export function parseRecentCursor (cursor: string): { activeMs: number, id: string } | null {
  const dot = cursor.indexOf('.')
  const activeMs = Number(cursor.slice(0, dot))
  return dot < 1 || !Number.isSafeInteger(activeMs) || activeMs < 0 ? null : { activeMs, id: cursor.slice(dot + 1) }
}

/** Whether a comes before b among the recently active: later activity first, then id order. */
function before (a: { activeMs: number, id: string }, b: { activeMs: number, id: string }): boolean {
  return a.activeMs !== b.activeMs ? a.activeMs > b.activeMs : a.id < b.id
}

export class PeopleScan {
  constructor (private readonly deps: PeopleScanDeps) {}

  /**
   * Walks the account's rows whose id starts with `prefix`, after the id `after`, calling `visit` on
   * each until it answers true (stop) or `scanMax` rows were examined. `last`: the last id examined.
   */
  private async walk (db: Database, account: string, prefix: string, after: string | null, scanMax: number, visit: (id: string, value: unknown) => boolean): Promise<Scanned & { last: string | null }> {
    let scanned = 0
    let last = after
    for (;;) {
      const start: Key = [account, last ?? prefix]
      let read = 0
      let ended = true
      let stopped = false
      for (const { key, value } of db.getRange({ start, end: [account, KEY_PART_MAX] }) as Iterable<{ key: Key, value: unknown }>) {
        const id = (key as unknown[])[1]
        if (typeof id !== 'string') continue
        if (!id.startsWith(prefix)) break // sorted: past the prefix's ids
        if (id === last) continue
        last = id
        scanned++
        read++
        if (visit(id, value)) { stopped = true; ended = false; break }
        if (scanned >= scanMax || read >= PEOPLE_SCAN_BATCH) { ended = false; break }
      }
      if (ended) return { scanned, complete: true, last }
      if (stopped || scanned >= scanMax) return { scanned, complete: false, last }
      await yieldLoop()
    }
  }

  /** Visitors or profiles whose id starts with `idPrefix` and that have the attribute (value), in id order. */
  async search (account: string, kind: PersonKind, query: SearchQuery, after: string | null, limit: number, scanMax: number): Promise<PeoplePage> {
    const { store } = this.deps
    const people: PersonSummary[] = []
    const wanted = query.value === null ? null : query.value.toLowerCase()
    const walked = await this.walk(kind === 'visitor' ? store.visitors : store.profiles, account, query.idPrefix, after, scanMax, (id, value) => {
      const row = value as { attributes?: Record<string, unknown> }
      if (query.attribute !== null) {
        const attributes = row.attributes ?? {}
        if (!Object.hasOwn(attributes, query.attribute)) return false
        const held = attributes[query.attribute]
        if (held === null || held === undefined) return false
        if (wanted !== null && !matchesValue(held, wanted)) return false
      }
      people.push(kind === 'visitor' ? visitorSummary(id, value as Partial<VisitorState>) : profileSummary(id, value as Partial<ProfileState>))
      return people.length >= limit
    })
    return { people, scanned: walked.scanned, complete: walked.complete, next: walked.complete ? null : walked.last }
  }

  /**
   * The most recently active visitors among the first `scanMax` rows of the account (all of them when
   * `complete`), latest first; after `cursor` (the `next` of the previous page) when given.
   */
  async recent (account: string, cursor: { activeMs: number, id: string } | null, limit: number, scanMax: number): Promise<PeoplePage> {
    const top: PersonSummary[] = []
    const walked = await this.walk(this.deps.store.visitors, account, '', null, scanMax, (id, value) => {
      const person = visitorSummary(id, value as Partial<VisitorState>)
      if (person.activeMs === 0) return false
      if (cursor !== null && !before(cursor, person)) return false
      if (top.length === limit && !before(person, top[limit - 1]!)) return false
      let at = top.length
      while (at > 0 && before(person, top[at - 1]!)) at--
      top.splice(at, 0, person)
      if (top.length > limit) top.pop()
      return false
    })
    return { people: top, scanned: walked.scanned, complete: walked.complete, next: top.length === limit ? recentCursor(top[limit - 1]!) : null }
  }

  /**
   * How many visitors a (validated) rule matches now, from their stored state as the segment engine
   * reads it (attributes, segments, behaviour, window counters), and the first PREVIEW_SAMPLE_MAX of them.
   */
  async preview (account: string, rule: unknown, after: string | null, scanMax: number): Promise<Preview> {
    const specs = new Map<string, WindowSpec>()
    const test = compileRule(rule, specs)
    const recorded = this.deps.segments(account).specsByKey
    const windowsRecorded = [...specs.keys()].every(key => recorded.has(key))
    const nowMs = this.deps.clock.nowMs()
    const sample: PersonSummary[] = []
    let matches = 0
    const walked = await this.walk(this.deps.store.visitors, account, '', after, scanMax, (id, value) => {
      const state: VisitorState = { ...emptyVisitor(), ...(value as Partial<VisitorState>) }
      const ctx: SegmentContext = { event: {}, attributes: state.attributes, segments: new Set(allSegments(state)), visitor: metricsOf(state), nowMs, windows: state.windows }
      if (!test(ctx)) return false
      matches++
      if (sample.length < PREVIEW_SAMPLE_MAX) sample.push(visitorSummary(id, state))
      return false
    })
    return { matches, sample, scanned: walked.scanned, complete: walked.complete, next: walked.complete ? null : walked.last, windowsRecorded }
  }
}
