// Segments: each account's definitions, the set entities are evaluated against (compiled on first use
// after a change), and the account's segments version: bumped by every change and persisted, so an
// entity evaluated under an older version files itself again. Who must re-evaluate at once (the
// background pass) hears of every change through the listeners given at construction.

import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'
import type { Listeners } from '../listeners.js'
import type { Store } from '../store/store.js'
import { SEGMENT_DEFS_MAX } from '../store/limits.js'
import type { Page } from '../store/paging.js'
import { compileSegments, EMPTY_SEGMENTS, type BackfillHold, type SegmentSet } from '../segments/segment-set.js'
import type { WindowSpec } from '../segments/windows.js'
import { compileRule, type SegmentDef } from '../segments/rules.js'
import type { AccountCatalog } from './accounts.js'
import { ConfigRows, type ConfigCatalog, type ConfigKey, type PageRequest } from './config-rows.js'
import type { ConfigWriter, RowWrite } from '../store/config-writer.js'

/** Told of the account's new segments version, once its row is written. */
export type SegmentsChanged = (account: string, version: number) => void

interface AccountSegments {
  /** Bumped on every change (persisted), so entities evaluated under an older set are re-evaluated. */
  version: number
  compiled: SegmentSet | null
  /** Running backfills by segment name (src/jobs/segment-backfill.ts). */
  holds: Map<string, BackfillHold>
  /** Backfilled segments' own windows (their last backfill's id) by segment name. */
  windows: Map<string, string>
}

const VERSION_KIND = 'segments-version'
/** A segment's last backfill (src/jobs/segment-backfill.ts keeps the rest of its row). */
const BACKFILL_KIND = 'backfill'
const NO_SEGMENTS: ReadonlyMap<string, SegmentDef> = new Map()

/** A backfill's row as this catalog reads it: a running one holds its segment on every node that loads or applies it. */
export interface HeldBackfill {
  id: string
  account: string
  segment: string
  state: string
  fromMs: number
  specKeys: string[]
  /** The segment's own windows (the backfill's id); absent in rows of an earlier release, whose segments read the shared ones. */
  windows?: string
}

/** A save with a backfill: its id, where its cut is set, and the row its job keeps (src/jobs/segment-backfill.ts). */
export interface BackfillStart<R extends HeldBackfill> {
  /** The backfill's id, which keys the segment's own windows from then on (rebuilt from the log, whoever else counts the same). */
  id: string
  /** How far ahead of the swap the cut is set: 0 where this process applies every event. */
  aheadMs: number
  /** The backfill's row for this hold and the change's segments version. */
  row: (hold: BackfillHold, version: number) => R
}

export interface SegmentCatalogOptions {
  store: Store
  clock: Clock
  accounts: AccountCatalog
  changed: Listeners<SegmentsChanged>
}

export class SegmentCatalog implements ConfigCatalog {
  readonly rowKinds = ['segment', VERSION_KIND, BACKFILL_KIND]
  private readonly store: Store
  private readonly clock: Clock
  private readonly accounts: AccountCatalog
  private readonly changed: Listeners<SegmentsChanged>
  private readonly rows: ConfigRows<SegmentDef>
  private readonly sets = new Map<string, AccountSegments>()
  /** Cluster mode: changes go through the replicated configuration (Catalogs.replicate); null: embedded. */
  writer: ConfigWriter | null = null

  constructor ({ store, clock, accounts, changed }: SegmentCatalogOptions) {
    this.store = store
    this.clock = clock
    this.accounts = accounts
    this.changed = changed
    this.rows = new ConfigRows({
      store, kind: 'segment', max: SEGMENT_DEFS_MAX, limitMessage: 'An account has at most %d segments; delete some first.', notFound: 'segment_not_found',
    })
  }

  load ([account, kind, name]: ConfigKey, value: unknown): void {
    if (kind === VERSION_KIND) this.setOf(account).version = value as number
    else if (kind === BACKFILL_KIND) this.backfillChanged(account, name!, value as HeldBackfill)
    else {
      this.setOf(account)
      this.rows.set(account, name!, value as SegmentDef)
    }
  }

  loaded (): void {}

  forget (account: string): void {
    this.rows.forget(account)
    this.sets.delete(account)
  }

  /**
   * Cluster mode: a segment or the account's segments version changed in the replicated configuration.
   * A change is written as its segment's row, then the new version's row (one change, in that order):
   * the version's row tells the listeners, as a write through this node does.
   */
  apply ([account, kind, name]: ConfigKey, value: unknown): void {
    const entry = this.setOf(account)
    if (kind === VERSION_KIND) {
      if (value !== null) this.versionChanged(account, entry, value as number)
      return
    }
    if (kind === BACKFILL_KIND) {
      this.backfillChanged(account, name!, value as HeldBackfill | null)
      return
    }
    if (value === null) this.rows.delete(account, name!)
    else this.rows.set(account, name!, value as SegmentDef)
    entry.compiled = null
  }

  /** Cluster mode: the row of the account's next segments version, written with the change that causes it. */
  versionRow (account: string): RowWrite {
    const version = Math.max((this.sets.get(account)?.version ?? 0) + 1, this.clock.nowMs())
    return { row: { db: 'config', key: [account, VERSION_KIND] }, value: version }
  }

  /** The account's compiled segments (compiled on first use after a change). */
  compiledSet (account: string): SegmentSet {
    const entry = this.sets.get(account)
    if (entry === undefined) return EMPTY_SEGMENTS
    entry.compiled ??= compileSegments(this.rows.of(account) ?? NO_SEGMENTS, entry.version, entry.holds, entry.windows)
    return entry.compiled
  }

  list (account: string, page: PageRequest): Page<{ name: string, segment: SegmentDef }> {
    this.accounts.get(account)
    return this.rows.list(account, page, (name, segment) => ({ name, segment }))
  }

  get (account: string, name: string): SegmentDef {
    this.accounts.get(account)
    return this.rows.get(account, name)
  }

  /**
   * `backfill`: the segment reads windows of its own from then on (keyed by the backfill's id), which
   * count live events from its cut on (the swap, plus `aheadMs`), and its changes are quiet, until the
   * backfill's row ends (or `release`): what the backfill counts from the log is every event before the
   * cut. Resolves with its row, durable. 409 backfill_running while the segment's last backfill runs.
   */
  async put<R extends HeldBackfill> (account: string, name: string, def: SegmentDef, backfill: BackfillStart<R> | null = null): Promise<R | null> {
    let started: R | null = null
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        this.accounts.get(account)
        this.rows.checkLimit(account, name)
        const version = this.versionRow(account)
        const writes = [{ row: this.rows.row(account, name), value: def }, version]
        if (backfill === null) return writes
        this.refuseRunning(account, name)
        const hold = { id: backfill.id, fromMs: this.clock.nowMs() + 1 + backfill.aheadMs, specKeys: this.newSpecKeys(account, def, backfill.id) }
        started = { ...backfill.row(hold, version.value as number), windows: backfill.id }
        // The hold first: no node compiles the segment's new windows without it.
        return [{ row: this.backfillRow(account, name), value: started }, ...writes]
      })
      return started
    }
    this.accounts.get(account)
    if (backfill !== null) this.refuseRunning(account, name)
    const entry = this.setOf(account)
    await this.rows.reserve(account, name, async () => {
      // Against the set as it is before this change.
      const specKeys = backfill === null ? [] : this.newSpecKeys(account, def, backfill.id)
      this.store.config.put(this.rows.key(account, name), def).catch(noop)
      const version = await this.newVersion(account, entry)
      this.rows.set(account, name, def)
      // In the event turn of the swap: an event applied after it is counted live from its own time on,
      // one applied before it has an earlier time (+1: one of this very millisecond is the backfill's).
      if (backfill !== null) {
        started = { ...backfill.row({ id: backfill.id, fromMs: this.clock.nowMs() + 1 + backfill.aheadMs, specKeys }, version), windows: backfill.id }
        this.backfillChanged(account, name, started)
      }
      this.versionChanged(account, entry, version)
    })
    if (started === null) return null
    try {
      await this.saveBackfill(started)
    } catch (error) {
      this.release(account, name)
      throw error
    }
    return started
  }

  /** The segment's last backfill's row (any node's in cluster mode: the rows are replicated). */
  backfillOf (account: string, name: string): HeldBackfill | undefined {
    return this.store.config.get([account, BACKFILL_KIND, name]) as HeldBackfill | undefined
  }

  /** Keep a backfill's row (cluster mode: through the replicated configuration, to every node); resolves once durable. */
  async saveBackfill (row: HeldBackfill): Promise<void> {
    const write = { row: this.backfillRow(row.account, row.segment), value: row }
    if (this.writer !== null) await this.writer.change(row.account, () => [write])
    else await this.store.save(this.store.config, [row.account, BACKFILL_KIND, row.segment], row)
  }

  /** The running backfill of the segment as this node holds it, if any. */
  holdOf (account: string, name: string): BackfillHold | undefined {
    return this.sets.get(account)?.holds.get(name)
  }

  /** The account's segments version on this node. */
  versionOf (account: string): number {
    return this.sets.get(account)?.version ?? 0
  }

  /** The backfill of the segment ended: its windows count every live event again, its changes are heard. */
  release (account: string, name: string): void {
    const entry = this.sets.get(account)
    if (entry === undefined || !entry.holds.delete(name)) return
    entry.compiled = null
  }

  /** A backfill's row loaded, applied or made here: a running one holds its segment (once per backfill), another releases it. */
  private backfillChanged (account: string, name: string, row: HeldBackfill | null): void {
    const entry = this.setOf(account)
    const windows = row?.windows ?? null
    if (windows === null) {
      if (entry.windows.delete(name)) entry.compiled = null
    } else if (entry.windows.get(name) !== windows) {
      entry.windows.set(name, windows)
      entry.compiled = null
    }
    if (row === null || row.state !== 'running') {
      this.release(account, name)
      return
    }
    if (entry.holds.get(name)?.id === row.id) return
    entry.holds.set(name, { id: row.id, fromMs: row.fromMs, specKeys: row.specKeys })
    entry.compiled = null
  }

  private refuseRunning (account: string, name: string): void {
    if (this.backfillOf(account, name)?.state === 'running' || this.holdOf(account, name) !== undefined) throw new ApiError('backfill_running')
  }

  private backfillRow (account: string, name: string): RowWrite['row'] {
    return { db: 'config', key: [account, BACKFILL_KIND, name] }
  }

  /** The window specs of this definition with the backfill's own windows the account's set does not have (their counters start empty). */
  private newSpecKeys (account: string, def: SegmentDef, windows: string): string[] {
    if (def.rule === undefined) return []
    const specs = new Map<string, WindowSpec>()
    compileRule(def.rule, specs, null, windows)
    const known = this.compiledSet(account).specsByKey
    return [...specs.keys()].filter(key => !known.has(key))
  }

  async delete (account: string, name: string): Promise<void> {
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        this.get(account, name)
        return [{ row: this.rows.row(account, name), value: null }, this.versionRow(account)]
      })
      return
    }
    this.get(account, name)
    const entry = this.setOf(account)
    this.store.config.remove(this.rows.key(account, name)).catch(noop)
    const version = await this.newVersion(account, entry)
    this.rows.delete(account, name)
    this.versionChanged(account, entry, version)
  }

  /**
   * Something that decides how entities are filed changed (the segments whose members are indexed): a
   * new segments version makes every entity file itself again, lazily on its next message and in the
   * background pass (which schedules wait for).
   */
  async renumber (account: string): Promise<void> {
    const entry = this.setOf(account)
    this.versionChanged(account, entry, await this.newVersion(account, entry))
  }

  private versionChanged (account: string, entry: AccountSegments, version: number): void {
    entry.version = version
    entry.compiled = null
    for (const changed of this.changed.list) changed(account, version)
  }

  /**
   * Save the account's next segments version; called in the event turn of the configuration write
   * that causes it, both commit together. Entities evaluated under an older version re-evaluate.
   */
  private async newVersion (account: string, entry: AccountSegments): Promise<number> {
    const version = Math.max(entry.version + 1, this.clock.nowMs())
    await this.store.save(this.store.config, [account, VERSION_KIND], version)
    return version
  }

  private setOf (account: string): AccountSegments {
    let entry = this.sets.get(account)
    if (entry === undefined) this.sets.set(account, entry = { version: 0, compiled: null, holds: new Map(), windows: new Map() })
    return entry
  }
}

function noop (): void {}
