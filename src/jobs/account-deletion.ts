// Deleting an account: at once it is no longer served (its row goes with the job's record, in one
// transaction), then everything keyed by it is removed in the background, one db after the other, a
// bounded batch a transaction with the event loop free between batches. The job's record (in meta)
// carries its cursor and counts, written with each batch, so a restart resumes where it stood.
// Cluster mode (`cluster`): every node runs the job on its own store, started by the request on the node
// that took it and, on every other node, by the account's record leaving the replicated configuration
// (`deletedElsewhere`). Visitors and profiles of partitions this node owns are erased through their
// actors, so the partition's changelog records the deletion and no recovery brings them back; rows of
// partitions owned elsewhere are stale copies, removed here only. A partition this node gains later is
// searched for every deleted account's keys (`partitionOwned`), which are erased the same way. Images
// live in the cluster's media bucket: the `media` phase deletes them there first (`removeMedia`); its
// events in the cluster's event log stream: the `events` phase purges them first (`removeEvents`).

import { KEY_PART_MAX, type Key, type Store } from '../store/store.js'
import type { Catalogs } from '../catalog/catalogs.js'
import type { Clock } from '../clock.js'
import type { Database } from 'lmdb'
import { ApiError } from '../errors.js'
import { decodeRow, type OutboxRow } from '../store/record-codec.js'
import { log } from '../log.js'

/** Keys removed per transaction. */
export const DELETION_BATCH_MAX = 1000

/** The dbs emptied of the account, in order: indexes before the entities they point at. */
export const DELETION_PHASES = ['expiries', 'members', 'config', 'tokens', 'outbox', 'deliveries', 'links', 'visitors', 'profiles', 'audit', 'media', 'reports', 'events'] as const
export type DeletionPhase = typeof DELETION_PHASES[number]

export interface DeletionJob {
  account: string
  name: string
  state: 'running' | 'done'
  startedAtMs: number
  finishedAtMs: number | null
  /** The phase under way (index in DELETION_PHASES) and the last key it handled. */
  phase: number
  after: Key | null
  removed: Record<DeletionPhase, number>
}

/** What GET …/deletion shows. */
export interface DeletionView {
  account: string
  name: string
  state: 'running' | 'done'
  startedAt: string
  finishedAt: string | null
  phase: DeletionPhase | null
  removed: Record<DeletionPhase, number>
}

export interface AccountDeletionsDeps {
  store: Store
  catalogs: Catalogs
  clock: Clock
  /** Resolves once no background segment pass writes the account's entities (it stops, seeing the account gone). */
  entitiesIdle: (account: string) => Promise<void>
  /** Removes the account's panel users and ends their sessions (they are not keyed by account). */
  forgetUsers: (account: string) => Promise<unknown>
  /** Cluster mode: erasing through the partitions' owners; null in embedded mode. */
  cluster?: DeletionCluster | null
  /**
   * Cluster mode: deletes the account's images from the cluster's media bucket (every node's job calls
   * it; the first finds them). The `media` phase then removes this node's copies. Null in embedded mode.
   */
  removeMedia?: ((account: string) => Promise<number>) | null
  /** Cluster mode: purges the account's events from the cluster's event log stream (every node's job calls it). Null otherwise. */
  removeEvents?: ((account: string) => Promise<number>) | null
}

/** What a cluster node gives the deletions. */
export interface DeletionCluster {
  /** Whether this node owns (account, id)'s partition now. */
  owns: (account: string, id: string) => boolean
  /** Erases the entity through its actor (its write goes through the partition's changelog). */
  erase: (kind: 'visitors' | 'profiles', account: string, id: string) => Promise<unknown>
  /** The ids of the account's visitors and profiles this node's store lists in a partition. */
  keysIn: (partition: number, account: string) => Iterable<{ kind: 'visitors' | 'profiles', id: string }>
}

export class AccountDeletions {
  private readonly deps: AccountDeletionsDeps
  private readonly running = new Map<string, Promise<void>>()
  /** Accounts whose deletion this node's `delete` is starting (its own config change comes back meanwhile). */
  private readonly deleting = new Set<string>()
  private stopped = false

  constructor (deps: AccountDeletionsDeps) {
    this.deps = deps
  }

  /** Resume the deletions a stop or a crash interrupted. */
  start (): void {
    for (const { value } of this.deps.store.meta.getRange({ start: [JOB_PREFIX], end: [JOB_PREFIX, KEY_PART_MAX] })) {
      const job = value as DeletionJob
      if (job.state === 'running') this.run(job)
    }
  }

  /** Stop serving the account and start removing its data; the job as it is now. Again: the job. */
  async delete (account: string): Promise<DeletionView> {
    const existing = this.job(account)
    if (existing !== undefined) return view(existing)
    const { name } = this.deps.catalogs.accounts.get(account)
    const job = this.newJob(account, name)
    this.deleting.add(account)
    try {
      await this.deps.catalogs.forgetAccount(account, jobKey(account), job)
    } finally {
      this.deleting.delete(account)
    }
    this.run(job)
    return view(job)
  }

  /**
   * Cluster mode: the account's record left the replicated configuration (deleted through another node,
   * or while this node was away): this node's share of the deletion starts, unless it runs already.
   */
  deletedElsewhere (account: string, name: string): void {
    if (this.deleting.has(account) || this.job(account) !== undefined || this.stopped) return
    const job = this.newJob(account, name)
    this.deps.store.save(this.deps.store.meta, jobKey(account), job).then(() => this.run(job), (error: unknown) => {
      log.error({ err: error, account }, 'account deletion could not start here')
    })
  }

  /**
   * Cluster mode: a partition is owned here from now on (recovered): the keys of deleted accounts its
   * changelog still held (their owner went before erasing them) are erased through their actors.
   */
  async partitionOwned (partition: number): Promise<number> {
    const cluster = this.deps.cluster
    if (cluster === null || cluster === undefined) return 0
    let erased = 0
    for (const { value } of this.deps.store.meta.getRange({ start: [JOB_PREFIX], end: [JOB_PREFIX, KEY_PART_MAX] })) {
      const { account } = value as DeletionJob
      const keys = [...cluster.keysIn(partition, account)]
      if (keys.length === 0) continue
      await Promise.all(keys.map(({ kind, id }) => cluster.erase(kind, account, id).catch(eraseFailed)))
      erased += keys.length
    }
    if (erased > 0) log.info({ partition, erased }, 'entities of deleted accounts erased in a partition taken over')
    return erased
  }

  private newJob (account: string, name: string): DeletionJob {
    return { account, name, state: 'running', startedAtMs: this.deps.clock.nowMs(), finishedAtMs: null, phase: 0, after: null, removed: zeroCounts() }
  }

  /** The deletion's progress; 404 when the account was never deleted (or never existed). */
  progress (account: string): DeletionView {
    const job = this.job(account)
    if (job === undefined) {
      this.deps.catalogs.accounts.get(account)
      throw new ApiError('deletion_not_found')
    }
    return view(job)
  }

  /** Resolves when the deletions under way have paused (stop) or finished (tests). */
  async settled (): Promise<void> {
    while (this.running.size > 0) await Promise.all(this.running.values())
  }

  async stop (): Promise<void> {
    this.stopped = true
    await this.settled()
  }

  private job (account: string): DeletionJob | undefined {
    return this.deps.store.meta.get(jobKey(account)) as DeletionJob | undefined
  }

  private run (job: DeletionJob): void {
    if (this.running.has(job.account)) return
    const done = this.steps(job).catch((error: unknown) => {
      log.error({ err: error, account: job.account }, 'account deletion stopped; it resumes at the next start')
    }).finally(() => { this.running.delete(job.account) })
    this.running.set(job.account, done)
  }

  private async steps (job: DeletionJob): Promise<void> {
    const { store, clock } = this.deps
    // First of all (again after a restart: it is idempotent): nobody signs in to a deleted account.
    await this.deps.forgetUsers(job.account)
    while (job.phase < DELETION_PHASES.length && !this.stopped) {
      const phase = DELETION_PHASES[job.phase]!
      if (phase === 'visitors' && job.after === null) await this.deps.entitiesIdle(job.account)
      if (phase === 'media' && job.after === null) await this.deps.removeMedia?.(job.account)
      if (phase === 'events' && job.after === null) await this.deps.removeEvents?.(job.account)
      const db = dbOf(store, phase)
      const { remove, cursor, exhausted } = this.batch(phase, db, job.account, job.after)
      const cluster = this.deps.cluster
      if (cluster !== null && cluster !== undefined && (phase === 'visitors' || phase === 'profiles')) {
        // Owned here: erased through the actor, so the changelog knows. Elsewhere: a stale copy.
        await Promise.all(remove.map(async key => {
          const id = (key as [string, string])[1]
          if (cluster.owns(job.account, id)) await cluster.erase(phase, job.account, id).catch(eraseFailed)
          else store.ignoreFailure(db.remove(key))
        }))
      } else if (phase === 'outbox') {
        // A row resent for another node goes with its origin.
        for (const key of remove) store.ignoreFailure(store.removeOutbox(key as unknown as number, true))
      } else {
        for (const key of remove) store.ignoreFailure(db.remove(key))
      }
      // A job started by an earlier release has no count yet for the phases added since.
      job.removed[phase] = (job.removed[phase] ?? 0) + remove.length
      job.after = exhausted ? null : cursor
      if (exhausted) job.phase++
      if (job.phase === DELETION_PHASES.length) {
        job.state = 'done'
        job.finishedAtMs = clock.nowMs()
      }
      // The batch and the cursor past it commit together.
      await store.save(store.meta, jobKey(job.account), job)
      await new Promise(resolve => setImmediate(resolve))
    }
  }

  /**
   * The next batch: at most DELETION_BATCH_MAX keys read after `after`, those of the account to
   * remove, and the last key read (the cursor). Dbs keyed by account first are read in its range
   * only; the others (expiries by time, tokens by id, the outbox by sequence) are read whole, in order.
   */
  private batch (phase: DeletionPhase, db: Database, account: string, after: Key | null): { remove: Key[], cursor: Key | null, exhausted: boolean } {
    const prefixed = PREFIXED.has(phase)
    // No end key for a prefix: ids after the account (profile ids) may hold any character.
    const range = prefixed ? { start: after ?? [account] } : after === null ? {} : { start: after }
    const remove: Key[] = []
    let cursor: Key | null = null
    let read = 0
    for (const { key, value } of db.getRange(range as { start?: Key }) as Iterable<{ key: Key, value: unknown }>) {
      if (prefixed && (key as unknown[])[0] !== account) return { remove, cursor, exhausted: true }
      if (after !== null && sameKey(key, after)) continue
      cursor = key
      if (prefixed || ownerOf(phase, key, value) === account) remove.push(key)
      if (++read === DELETION_BATCH_MAX) break
    }
    return { remove, cursor, exhausted: read < DELETION_BATCH_MAX }
  }
}

/** Phases whose db keys start with the account. */
const PREFIXED: ReadonlySet<DeletionPhase> = new Set(['members', 'config', 'deliveries', 'links', 'visitors', 'profiles', 'audit', 'media', 'reports', 'events'])

const JOB_PREFIX = 'account-deletion'

function jobKey (account: string): Key {
  return [JOB_PREFIX, account]
}

function dbOf (store: Store, phase: DeletionPhase): Database {
  return store[phase]
}

function ownerOf (phase: DeletionPhase, key: Key, value: unknown): string | undefined {
  if (phase === 'expiries') return (key as unknown[])[1] as string
  if (phase === 'tokens') return (value as { account: string }).account
  if (phase === 'outbox') return (value instanceof Uint8Array ? decodeRow(value) : value as OutboxRow).account
  return undefined
}

function eraseFailed (error: unknown): void {
  // Refused (the partition moved meanwhile): its next owner erases it when it takes it (partitionOwned).
  log.warn({ err: error }, 'erasing an entity of a deleted account failed')
}

function sameKey (a: Key, b: Key): boolean {
  return JSON.stringify(a) === JSON.stringify(b)
}

function zeroCounts (): Record<DeletionPhase, number> {
  return Object.fromEntries(DELETION_PHASES.map(phase => [phase, 0])) as Record<DeletionPhase, number>
}

function view (job: DeletionJob): DeletionView {
  return {
    account: job.account,
    name: job.name,
    state: job.state,
    startedAt: new Date(job.startedAtMs).toISOString(),
    finishedAt: job.finishedAtMs === null ? null : new Date(job.finishedAtMs).toISOString(),
    phase: job.state === 'done' ? null : DELETION_PHASES[job.phase]!,
    removed: { ...zeroCounts(), ...job.removed },
  }
}
