// Cluster mode's write path for visitors and profiles: each entity write (its state put or delete, with
// the outbox rows issued with it) becomes one entry of its partition's replicated changelog
// (src/cluster/changelog.ts), and the actor's write is acknowledged once JetStream acknowledged that
// append (a quorum with BEACON_REPLICAS=3). LMDB is the owner's local cache: written in the same event
// turn, waited for until committed, never until synced to disk (BEACON_DURABILITY does not apply).
//
// Fencing: an append the changelog refuses (another node claimed the partition) fails the write with 503
// `partition_moved` (nothing stored: the request path retries at the new owner); one it cannot confirm
// (it may be stored) with 503 `write_unconfirmed` (never retried elsewhere: that could apply it twice).
// Either way `refused` listeners hear of it once: the node must drop the partition. A write's outbox rows are held from the
// relay until its append is acknowledged (src/delivery/relay-gate.ts); those of a refused write are
// taken back from the local outbox first, so its webhooks never go out.
//
// Compaction: after ENTITY_LOG_ENTRIES_MAX entries a partition is snapshotted (entity-snapshot.ts) and
// its changelog purged up to the snapshot. Recovery by a new owner: entity-recovery.ts.

import type { Database } from 'lmdb'
import { ApiError } from '../src/errors.js'
import { CLUSTER_ERRORS, ClusterError } from '../src/cluster/errors.js'
import type { PartitionChangelog } from '../src/cluster/changelog.js'
import type { Ownership } from '../src/cluster/ownership.js'
import type { Listeners } from '../src/listeners.js'
import type { OutboxAppended, Store } from '../src/store/store.js'
import type { RelayGate } from '../src/delivery/relay-gate.js'
import { log } from '../src/log.js'
import type { ActorRuntime } from './runtime.js'
import type { EntityKindName, EntityWrites } from './entity-writes.js'
import type { IdempotentWrite } from './idempotent.js'
import { entityOfScope, type IdempotencySwept } from '../src/store/idempotency.js'
import { outboxPart, partitionIndex, tagOf, type OutboxPart, type PartitionLog, type WriteEntry } from './entity-log-format.js'
import { writeSnapshot, type SnapshotReport } from './entity-snapshot.js'
import { recoverPartition, type RecoveryReport } from './entity-recovery.js'

/** Entries a partition's changelog takes after its snapshot before the next snapshot starts. */
export const ENTITY_LOG_ENTRIES_MAX = 10_000
/** The most bytes of entity states in one snapshot chunk (a changelog message holds at most 512 KiB). */
export const SNAPSHOT_CHUNK_MAX_BYTES = 256 * 1024

/** Told when a partition's append was refused or not confirmed: drop the partition (stop serving it, release its lease). */
export type PartitionRefused = (partition: number, error: ClusterError) => void

export interface EntityLogOptions {
  store: Store
  changelog: PartitionChangelog
  ownership: Pick<Ownership, 'partitionOf'>
  /** The store's list of outbox listeners: the log collects the rows each write issued. */
  outboxAppended: Listeners<OutboxAppended>
  /** The highest local outbox seq handed to the delivery stream (the delivery hub's relay); 0 if unknown. */
  relayedThrough: () => number
  /** Who hears of a refused append (the cluster node drops the partition). */
  refused: Listeners<PartitionRefused>
  /** Resident actors of a recovered or dropped partition are evicted from it; absent in tools. */
  runtime?: ActorRuntime | null
  /** Resolves once every outbox row appended so far was relayed (the delivery hub); used on release. */
  relaySettled?: () => Promise<void>
  /** What holds a write's outbox rows from the relay until its append is acknowledged; absent in tools. */
  gate?: RelayGate | null
  /** Told when a background snapshot fails (the partition's log then grows until the next one succeeds). */
  onSnapshotError?: (partition: number, error: unknown) => void
  entriesMax?: number
  chunkMaxBytes?: number
  /** The Idempotency-Key sweep's removals (src/store/idempotency.ts): the log forgets them in its partition index. */
  idempotencySwept?: Listeners<IdempotencySwept> | null
}

interface PartitionState {
  /** Entries since the last snapshot (or since recovery, counting the replayed ones). */
  entries: number
  snapshot: Promise<SnapshotReport> | null
  recovering: boolean
}

export class EntityLog implements EntityWrites, PartitionLog {
  readonly store: Store
  readonly changelog: PartitionChangelog
  readonly index: Database
  readonly node: string
  private readonly partitionOf: (account: string, id: string) => number
  private readonly relayedThrough: () => number
  private readonly refusedListeners: Listeners<PartitionRefused>
  private readonly outboxAppended: Listeners<OutboxAppended>
  private readonly runtime: ActorRuntime | null
  private readonly relaySettled: (() => Promise<void>) | null
  private readonly gate: RelayGate | null
  private readonly onSnapshotError: (partition: number, error: unknown) => void
  private readonly entriesMax: number
  readonly chunkMaxBytes: number
  private readonly partitions = new Map<number, PartitionState>()
  /** Outbox rows appended since the last write took them (same event turn). */
  private rows: OutboxPart[] = []
  /** Off while a recovery appends the rows it resends: they belong to no write. */
  private collecting = true
  private readonly collect: OutboxAppended = (seq, _row, bytes, origin) => {
    if (!this.collecting) return
    if (this.rows.length === 0) queueMicrotask(this.dropStray)
    this.rows.push(outboxPart(seq, bytes, origin))
    this.gate?.hold(seq)
  }

  /**
   * Rows and their write are issued in one synchronous run (a handler throwing between them is a bug):
   * rows no write took by the end of it are dropped here, so they never ride with another key's write.
   */
  private readonly dropStray = (): void => {
    if (this.rows.length === 0) return
    log.warn({ rows: this.rows.length }, 'outbox rows appended without an entity write: not in the changelog')
    this.letGo(this.rows)
    this.rows = []
  }

  constructor (options: EntityLogOptions) {
    this.store = options.store
    this.changelog = options.changelog
    this.index = partitionIndex(options.store)
    this.node = options.changelog.owner
    this.partitionOf = (account, id) => options.ownership.partitionOf(account, id)
    this.relayedThrough = options.relayedThrough
    this.refusedListeners = options.refused
    this.runtime = options.runtime ?? null
    this.relaySettled = options.relaySettled ?? null
    this.gate = options.gate ?? null
    this.onSnapshotError = options.onSnapshotError ?? noop
    this.entriesMax = options.entriesMax ?? ENTITY_LOG_ENTRIES_MAX
    this.chunkMaxBytes = options.chunkMaxBytes ?? SNAPSHOT_CHUNK_MAX_BYTES
    this.outboxAppended = options.outboxAppended
    options.outboxAppended.add(this.collect)
    this.idempotencySwept = options.idempotencySwept ?? null
    this.idempotencySwept?.add(this.forgetSwept)
  }

  private readonly idempotencySwept: Listeners<IdempotencySwept> | null
  /** An expired Idempotency-Key record swept from LMDB leaves the partition index too (same event turn). */
  private readonly forgetSwept: IdempotencySwept = (account, scope) => {
    this.store.ignoreFailure(this.index.remove([this.partitionOf(account, entityOfScope(scope)), 'q', account, scope]))
  }

  /**
   * At start, before the delivery hub relays: removes the rows this node's previous run left in its
   * outbox. Those of acknowledged writes are in their partitions' changelogs (an entry, or a snapshot
   * chunk) above this node's watermark there, so the next recovery of each partition resends them, under
   * their first webhook-id; the others belong to writes whose append was never acknowledged (the node
   * died while it flew, or before a refused write's rows were taken back) and must never go out: relayed
   * from here, one was delivered, and the caller's retry, applied as a new write, delivered it again
   * under another webhook-id. Resolves with the count once the removal is committed.
   */
  async forgetLeftoverRows (): Promise<number> {
    let removed = 0
    let last: Promise<boolean> | null = null
    for (const seq of this.store.outbox.getKeys({}) as Iterable<number>) {
      last = this.store.removeOutbox(seq, this.store.outboxOrigin(seq) !== null)
      this.store.ignoreFailure(last)
      removed++
    }
    if (last !== null) await last
    return removed
  }

  /** The partitions this node writes (recovered and not dropped). */
  get held (): number[] {
    const out: number[] = []
    for (const [partition, state] of this.partitions) if (!state.recovering) out.push(partition)
    return out
  }

  /** Entries appended to the partition's changelog since its last snapshot (what a takeover replays after it); null if not held. */
  entriesSinceSnapshot (partition: number): number | null {
    const state = this.partitions.get(partition)
    return state === undefined || state.recovering ? null : state.entries
  }

  write (kind: EntityKindName, account: string, id: string, state: object | null, idem: IdempotentWrite | null = null): Promise<void> {
    const partition = this.partitionOf(account, id)
    const rows = this.takeRows()
    const held = this.partitions.get(partition)
    if (held === undefined || held.recovering || !this.changelog.holds(partition)) {
      this.takeBack(rows)
      return Promise.reject(moved(partition))
    }
    const tag = tagOf(kind)
    const entry: WriteEntry = { t: 'e', k: tag, a: account, i: id, s: state as Record<string, unknown> | null, n: this.node, w: this.relayedThrough() }
    if (rows.length > 0) {
      entry.o = rows
      // The rows' first place, whichever node relays them: their deliveries' webhook-id names it.
      entry.d = this.store.nodeId
    }
    if (idem !== null) {
      // Its record was put by the actor in this event turn; indexed in the partition (a put every time: a
      // sweep's removal of an expired record under the same scope may not be committed yet).
      entry.q = [idem.scope, idem.record]
      this.store.ignoreFailure(this.index.put([partition, 'q', account, idem.scope], null))
    }
    const db = tag === 'v' ? this.store.visitors : this.store.profiles
    const indexKey = [partition, tag, account, id]
    let put: Promise<boolean>
    if (state === null) {
      this.store.ignoreFailure(this.index.remove(indexKey))
      put = db.remove([account, id])
    } else {
      if (!this.index.doesExist(indexKey)) this.store.ignoreFailure(this.index.put(indexKey, null))
      put = db.put([account, id], state)
    }
    const appended = this.changelog.append(partition, [entry])
    if (++held.entries >= this.entriesMax && held.snapshot === null) this.snapshotInBackground(partition, held)
    return Promise.all([put, appended]).then(() => { this.letGo(rows) }, (error: unknown) => this.failed(partition, rows, error))
  }

  refuse (account: string, id: string): Promise<void> {
    this.takeBack(this.takeRows())
    return Promise.reject(moved(this.partitionOf(account, id)))
  }

  /**
   * Takes the partition over before this node serves it: claims its changelog (fencing the previous
   * owner), replaces what the local LMDB holds for its keys by the snapshot plus the entries after it,
   * resends the outbox rows that may not have reached the delivery stream, and evicts resident actors
   * of the partition. Writes to it are refused until this resolves.
   */
  async recover (partition: number): Promise<RecoveryReport> {
    const state: PartitionState = { entries: 0, snapshot: null, recovering: true }
    this.partitions.set(partition, state)
    try {
      const report = await recoverPartition(this, partition, resend => {
        this.collecting = false
        try { resend() } finally { this.collecting = true }
      })
      this.evict(partition)
      // Lost or released while recovering: the node no longer wants it.
      if (this.partitions.get(partition) !== state) throw notHeld(partition)
      state.entries = report.entriesReplayed
      state.recovering = false
      // A snapshot now makes this node answerable for the rows it resent (they are in its own outbox),
      // and shortens the next recovery.
      if (report.entriesReplayed > 0 || report.rowsResent > 0) this.snapshotInBackground(partition, state)
      return report
    } catch (error) {
      if (this.partitions.get(partition) === state) this.partitions.delete(partition)
      // Unless a recovery started since holds it now.
      if (!this.partitions.has(partition)) this.changelog.drop(partition)
      throw error
    }
  }

  /**
   * Snapshot the partition, covering every write acknowledged before this call, and purge its changelog
   * up to it (also run by itself every entriesMax entries). One under way is waited for first.
   */
  async snapshot (partition: number): Promise<SnapshotReport> {
    const state = this.partitions.get(partition)
    if (state === undefined || state.recovering) throw notHeld(partition)
    if (state.snapshot !== null) await state.snapshot.catch(noop)
    if (this.partitions.get(partition) !== state) throw notHeld(partition)
    // One started meanwhile (by a write) started after this call: it covers what this one would.
    return await (state.snapshot ?? this.snapshotInBackground(partition, state))
  }

  /**
   * Graceful handover (the node is releasing the lease): waits for the snapshot under way and for the
   * relay, then records how far this node's outbox was relayed, so the next owner resends nothing that
   * went out already; then drops the partition.
   */
  async release (partition: number): Promise<void> {
    const state = this.partitions.get(partition)
    if (state === undefined) return
    await state.snapshot?.catch(noop)
    await this.relaySettled?.().catch(noop)
    if (this.changelog.holds(partition)) await this.changelog.append(partition, [{ t: 'w', n: this.node, w: this.relayedThrough() }]).catch(noop)
    this.lost(partition)
  }

  /** The partition is no longer this node's (lease lost, or refused): forget the claim, evict its actors. */
  lost (partition: number): void {
    this.partitions.delete(partition)
    this.changelog.drop(partition)
    this.evict(partition)
  }

  close (): void {
    this.outboxAppended.delete(this.collect)
    this.idempotencySwept?.delete(this.forgetSwept)
    for (const partition of [...this.partitions.keys()]) this.lost(partition)
  }

  /** The relayed-through watermark as the snapshot and recovery read it. */
  watermark (): number {
    return this.relayedThrough()
  }

  /** Whether the partition's key is this partition (for scans of the local outbox). */
  partitionOfKey (account: string, id: string): number {
    return this.partitionOf(account, id)
  }

  private snapshotInBackground (partition: number, state: PartitionState): Promise<SnapshotReport> {
    state.entries = 0
    const running = writeSnapshot(this, partition).finally(() => {
      if (state.snapshot === running) state.snapshot = null
    })
    state.snapshot = running
    running.catch((error: unknown) => {
      // A fenced chunk or marker: the partition is another node's now, as for a write.
      if (this.refusedBy(partition, error)) return
      // Dropped on purpose while it ran (lost, released, closed): nothing to report.
      if (this.partitions.get(partition) !== state && error instanceof ClusterError && error.code === CLUSTER_ERRORS.CLUSTER_NOT_CLAIMED) return
      this.onSnapshotError(partition, error)
    })
    return running
  }

  private takeRows (): OutboxPart[] {
    if (this.rows.length === 0) return NO_ROWS
    const rows = this.rows
    this.rows = []
    return rows
  }

  /** The relay may take the rows of a write (acknowledged, or taken back from the outbox). */
  private letGo (rows: readonly OutboxPart[]): void {
    if (this.gate !== null && rows.length !== 0) this.gate.letGo(rows)
  }

  /**
   * A write that will not be acknowledged: its rows leave the outbox, and are let go once that removal
   * committed (the relay, which reads committed rows, never sees them then).
   */
  private takeBack (rows: readonly OutboxPart[]): void {
    if (rows.length === 0) return
    const removed = rows.map(([seq, , origin]) => this.store.removeOutbox(seq, origin !== undefined))
    for (const removal of removed) this.store.ignoreFailure(removal)
    void Promise.allSettled(removed).then(() => { this.letGo(rows) })
  }

  private failed (partition: number, rows: readonly OutboxPart[], error: unknown): never {
    if (!(error instanceof ClusterError)) {
      // Not the append's refusal (LMDB failed, say): whether the entry is in the changelog is not known,
      // so the rows stay and go out, as the entry's rows would from a new owner.
      this.letGo(rows)
      throw error
    }
    if (error.code === CLUSTER_ERRORS.CLUSTER_ENTRY_TOO_LARGE) {
      this.takeBack(rows)
      throw new ApiError('entity_full', 'This visitor or profile is too large to be written in cluster mode.')
    }
    // Its rows leave the outbox either way: if the entry was stored, the partition's next recovery resends them.
    this.takeBack(rows)
    this.refusedBy(partition, error)
    // Fenced or never sent: not stored, the new owner may apply it. Unconfirmed: it may be stored, so it
    // must not be applied again elsewhere (run 1 of docs/internals/cluster.md's history checks).
    if (error.code === CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE) throw unconfirmed(partition, error)
    throw moved(partition, error)
  }

  /**
   * Fenced, or not confirmed: the partition is dropped and the node told, once (every write of the
   * partition in flight fails the same way). Whether the error was such a refusal.
   */
  private refusedBy (partition: number, error: unknown): boolean {
    if (!(error instanceof ClusterError) || (error.code !== CLUSTER_ERRORS.CLUSTER_FENCED && error.code !== CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE)) return false
    if (this.partitions.get(partition)?.recovering === false) {
      this.lost(partition)
      for (const listener of this.refusedListeners.list) listener(partition, error)
    }
    return true
  }

  private evict (partition: number): void {
    this.runtime?.evict((account, id) => this.partitionOf(account, id) === partition)
  }
}

const NO_ROWS: OutboxPart[] = []

function moved (partition: number, cause?: unknown): ApiError {
  const error = new ApiError('partition_moved', `The partition of this visitor or profile (${partition}) is not served by this node now; retry.`, undefined, { 'Retry-After': '1' })
  if (cause !== undefined) error.cause = cause
  return error
}

function unconfirmed (partition: number, cause: unknown): ApiError {
  const error = new ApiError('write_unconfirmed', `This write was sent, but whether partition ${partition}'s changelog stored it could not be confirmed: it may have been applied. Retry with the same Idempotency-Key.`, undefined, { 'Retry-After': '1' })
  error.cause = cause
  return error
}

function notHeld (partition: number): ClusterError {
  return new ClusterError(CLUSTER_ERRORS.CLUSTER_NOT_CLAIMED, `partition ${partition} is not held by this entity log`, partition)
}

function noop (): void {}
