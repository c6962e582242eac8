// The retention of inactive anonymous visitors (BEACON_VISITOR_RETENTION_DAYS): every
// BEACON_VISITOR_RETENTION_SWEEP_MS a pass walks the visitors db in key order, a bounded batch at a time
// with the event loop free between batches, as account deletion does (src/jobs/account-deletion.ts).
// What a row tells picks the candidates: linked to no profile, and last active (VisitorState.activeMs,
// written with the writes it dates: no read writes) before the pass's cutoff. Each is erased through its
// actor (`erase`), which checks again after every message queued before it: a visitor active since, or
// linked to a profile meanwhile, is kept. The erase removes the row, its segment and expiry indexes and
// member counts; then the outbox rows and delivery records carrying the erased ids go (`forget`, for up
// to RETENTION_FORGET_MAX erasures at once: it reads all of the account's records). A visitor
// linked to a profile is never erased here: it goes only with its profile (src/jobs/erasure.ts), and an
// anonymous one has no links rows (a visitor's profileId never returns to null but by its erasure).
//
// The pass's record (in meta) carries its cursor, the batch under way and the erased ids not yet
// forgotten: written before the batch's erases, it lets a restart finish the batch, forget the delivery
// records of those erased, and resume after it.
//
// Cluster mode (`owns`): a node erases only the visitors of partitions it owns, through their actors, so
// the partition's changelog records the erasure and no recovery brings them back. Rows of partitions
// owned elsewhere are stale copies: left as they are (their owner decides, and a recovery here replays
// its decision). Delivery records are forgotten on every node (src/delivery/cluster-erasures.ts).

import type { Key, Store } from '../store/store.js'
import type { Clock } from '../clock.js'
import { lastActiveMs, type VisitorErased, type VisitorState } from '../../actors/visitor.js'
import { log } from '../log.js'

/** Visitor rows read per batch. */
export const RETENTION_BATCH_MAX = 1000
/**
 * Erased visitors whose delivery records are forgotten together: forgetting reads every outbox row and
 * every delivery record of the account (they are not indexed by visitor), so it runs once for this many
 * erasures (and at the pass's end), not once a batch.
 */
export const RETENTION_FORGET_MAX = 4000
/** Erases sent at once (each its own actor message and write). */
const ERASE_CONCURRENCY = 32

export interface VisitorRetentionDeps {
  store: Store
  clock: Clock
  /** Inactive this long: erased (BEACON_VISITOR_RETENTION_DAYS); 0: the job never runs. */
  retentionMs: number
  /** How often a pass starts (BEACON_VISITOR_RETENTION_SWEEP_MS). */
  sweepMs: number
  /** Erases the visitor through its actor if it is still anonymous and inactive since before `idleBefore`. */
  erase: (account: string, id: string, idleBefore: number) => Promise<VisitorErased>
  /** Removes the outbox rows and delivery records carrying these visitor ids (every node's in cluster mode). */
  forget: (account: string, visitorIds: ReadonlySet<string>) => Promise<number>
  /** Cluster mode: whether this node owns (account, id)'s partition now; null in embedded mode (every key). */
  owns: ((account: string, id: string) => boolean) | null
  /** Told of each visitor erased (metrics); absent: nobody. */
  onErased?: ((count: number) => void) | null
}

/** The pass under way, as kept in meta. */
export interface RetentionPass {
  /** Visitors last active before this were inactive long enough (set when the pass starts). */
  cutoffMs: number
  startedAtMs: number
  /** The last key read. */
  after: Key | null
  /** The batch being erased: [account, visitorId] pairs (a restart erases them again). */
  batch: Array<[string, string]>
  /** Visitors erased whose outbox rows and delivery records are not forgotten yet (a restart forgets them). */
  unforgotten: Array<[string, string]>
  erased: number
  deliveries: number
}

export interface RetentionOutcome {
  erased: number
  deliveries: number
}

export class VisitorRetention {
  private readonly deps: VisitorRetentionDeps
  private timer: NodeJS.Timeout | null = null
  private running: Promise<RetentionOutcome> | null = null
  private stopped = false

  constructor (deps: VisitorRetentionDeps) {
    this.deps = deps
  }

  get enabled (): boolean { return this.deps.retentionMs > 0 }

  /** Resumes a pass a stop or a crash interrupted, then sweeps every sweepMs. Nothing without a retention. */
  start (): void {
    if (!this.enabled) return
    if (this.deps.store.meta.get(PASS_KEY) !== undefined) this.launch()
    this.timer = setInterval(() => this.launch(), this.deps.sweepMs)
    this.timer.unref()
  }

  /** One whole pass begun now (after the one under way, if any): what it erased. */
  async sweep (): Promise<RetentionOutcome> {
    if (!this.enabled) return { erased: 0, deliveries: 0 }
    while (this.running !== null) await this.running.catch(noop)
    return this.launch()
  }

  async stop (): Promise<void> {
    this.stopped = true
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
    await this.running?.catch(() => {})
  }

  private launch (): Promise<RetentionOutcome> {
    if (this.running !== null) return this.running
    const run = this.pass().finally(() => { this.running = null })
    run.catch((error: unknown) => log.error({ err: error }, 'visitor retention pass stopped; the next resumes it'))
    this.running = run
    return run
  }

  private async pass (): Promise<RetentionOutcome> {
    const { store, clock, retentionMs } = this.deps
    let pass = store.meta.get(PASS_KEY) as RetentionPass | undefined
    if (pass === undefined) {
      const nowMs = clock.nowMs()
      pass = { cutoffMs: nowMs - retentionMs, startedAtMs: nowMs, after: null, batch: [], unforgotten: [], erased: 0, deliveries: 0 }
    }
    pass.unforgotten ??= []
    // A batch a restart interrupted: its erases again (done ones find nothing; their ids are kept to forget).
    if (pass.batch.length > 0) await this.eraseBatch(pass)
    while (!this.stopped) {
      const { candidates, cursor, exhausted } = this.read(pass)
      pass.after = cursor
      pass.batch = candidates
      // The batch and the cursor past it are recorded before anything of it is erased.
      if (candidates.length > 0) {
        await store.save(store.meta, PASS_KEY, pass)
        await this.eraseBatch(pass)
      }
      if (exhausted || pass.unforgotten.length >= RETENTION_FORGET_MAX) await this.forget(pass)
      if (exhausted) {
        await store.durable(store.meta.remove(PASS_KEY))
        if (pass.erased > 0) log.info({ erased: pass.erased, deliveries: pass.deliveries, cutoff: new Date(pass.cutoffMs).toISOString() }, 'inactive anonymous visitors erased')
        return { erased: pass.erased, deliveries: pass.deliveries }
      }
      await store.save(store.meta, PASS_KEY, pass)
      await new Promise(resolve => setImmediate(resolve))
    }
    return { erased: pass.erased, deliveries: pass.deliveries }
  }

  /**
   * The next batch: at most RETENTION_BATCH_MAX rows read after the cursor, those that are candidates
   * (owned here, anonymous, dated and inactive since before the cutoff), and the last key read.
   */
  private read (pass: RetentionPass): { candidates: Array<[string, string]>, cursor: Key | null, exhausted: boolean } {
    const { store, owns } = this.deps
    const candidates: Array<[string, string]> = []
    let cursor = pass.after
    let read = 0
    const range = pass.after === null ? {} : { start: pass.after }
    for (const { key, value } of store.visitors.getRange(range as { start?: Key }) as Iterable<{ key: Key, value: Partial<VisitorState> }>) {
      if (pass.after !== null && sameKey(key, pass.after)) continue
      cursor = key
      const [account, id] = key as [string, string]
      if ((value.profileId ?? null) === null) {
        const activeMs = lastActiveMs(value as VisitorState)
        if (activeMs !== 0 && activeMs < pass.cutoffMs && (owns === null || owns(account, id))) candidates.push([account, id])
      }
      if (++read === RETENTION_BATCH_MAX) break
    }
    return { candidates, cursor, exhausted: read < RETENTION_BATCH_MAX }
  }

  /** Erases the batch's visitors (those still inactive); those erased are to be forgotten. */
  private async eraseBatch (pass: RetentionPass): Promise<void> {
    const { erase } = this.deps
    for (let i = 0; i < pass.batch.length; i += ERASE_CONCURRENCY) {
      await Promise.all(pass.batch.slice(i, i + ERASE_CONCURRENCY).map(async ([account, id]) => {
        try {
          const result = await erase(account, id, pass.cutoffMs)
          if (result.kept) return
          if (result.existed) {
            pass.erased++
            this.deps.onErased?.(1)
          }
          pass.unforgotten.push([account, id])
        } catch (error) {
          // Refused (cluster mode: the partition moved meanwhile): its owner's pass decides.
          log.warn({ err: error, account }, 'erasing an inactive visitor failed')
        }
      }))
    }
    pass.batch = []
  }

  /** Removes the outbox rows and delivery records of the visitors erased so far, once per account. */
  private async forget (pass: RetentionPass): Promise<void> {
    const byAccount = new Map<string, Set<string>>()
    for (const [account, id] of pass.unforgotten) {
      let ids = byAccount.get(account)
      if (ids === undefined) byAccount.set(account, ids = new Set())
      ids.add(id)
    }
    for (const [account, ids] of byAccount) pass.deliveries += await this.deps.forget(account, ids)
    pass.unforgotten = []
  }
}

const PASS_KEY = 'visitor-retention'

function noop (): void {}

function sameKey (a: Key, b: Key): boolean {
  return JSON.stringify(a) === JSON.stringify(b)
}
