// Keeping computed segments true without new events:
// - expiry: every entity with window counters has its next expiry in the expiries index; a periodic
//   sweep sends each due entity an `evaluate` message, so a visitor who stops qualifying because time
//   passed leaves the segment (and one who starts qualifying enters it) on time;
// - rule changes: entities re-evaluate lazily on their next message, and a background pass walks the
//   account's visitors and profiles in key order, a bounded batch at a time, with its cursor saved so a
//   restart resumes it.
// In cluster mode both touch only keys of partitions this node owns (`owns`): another partition's keys
// are its owner's to evaluate, and a due expiry row of one is a stale local row (left by a partition
// that moved away), removed without a message.

import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'
import type { Catalogs } from '../catalog/catalogs.js'
import type { ActorRuntime } from '../../actors/runtime.js'
import type { VisitorKind } from '../../actors/visitor.js'
import type { ProfileKind } from '../../actors/profile.js'
import { log } from '../log.js'

export const SWEEP_BATCH_MAX = 500
export const PASS_BATCH_MAX = 200

interface PassCursor {
  version: number
  kind: 'visitor' | 'profile'
  after: string | null
}

export interface MaintenanceDeps {
  store: Store
  catalogs: Catalogs
  runtime: ActorRuntime
  visitors: VisitorKind
  profiles: ProfileKind
  clock: Clock
  sweepMs: number
  /**
   * Cluster mode: whether this node owns the partition of (account, id) now (recovered, lease held).
   * Null in embedded mode: every key is this node's.
   */
  owns: ((account: string, id: string) => boolean) | null
}

export class SegmentMaintenance {
  private readonly deps: MaintenanceDeps
  private timer: NodeJS.Timeout | null = null
  private sweeping: Promise<number> | null = null
  /** Running passes by account, with the version each works for. */
  private readonly passes = new Map<string, number>()
  /** Who waits for an account's pass to end (schedules, before they read the members index). */
  private readonly idleWaiters = new Map<string, (() => void)[]>()
  private stopped = false

  constructor (deps: MaintenanceDeps) {
    this.deps = deps
  }

  start (): void {
    this.timer = setInterval(() => { this.sweep().catch(logFailure) }, this.deps.sweepMs)
    this.timer.unref()
    for (const { key, value } of this.deps.store.config.getRange()) {
      const [account, kind] = key as [string, string]
      const cursor = value as PassCursor
      if (kind === 'segments-pass' && this.deps.catalogs.accounts.knows(account) && cursor.version === this.deps.catalogs.segments.compiledSet(account).version) this.runPass(account, cursor)
    }
  }

  /** Evaluate every entity whose windows expired by now; resolves with how many were. */
  sweep (): Promise<number> {
    this.sweeping ??= this.sweepOnce().finally(() => { this.sweeping = null })
    return this.sweeping
  }

  private async sweepOnce (): Promise<number> {
    const { store, runtime, visitors, profiles, clock } = this.deps
    const nowMs = clock.nowMs()
    let done = 0
    for (;;) {
      const due = [...store.expiries.getKeys({ end: [nowMs + 1], limit: SWEEP_BATCH_MAX })] as [number, string, string, string][]
      if (due.length === 0 || this.stopped) return done
      await Promise.all(due.map(async key => {
        const [, account, kind, id] = key
        // An account being deleted: its entities must not be written again.
        if (!this.deps.catalogs.accounts.knows(account)) return store.expiries.remove(key)
        // Another node's partition: its owner sweeps it (from its own rows); this row is stale here.
        if (this.deps.owns !== null && !this.deps.owns(account, id)) return store.expiries.remove(key)
        const message = { type: 'evaluate', nowMs } as const
        await (kind === 'visitor' ? runtime.send(visitors, account, id, message) : runtime.send(profiles, account, id, message))
          .catch(logFailure)
        // The actor removed this key and scheduled its next one; a stale key must not be swept forever.
        await store.expiries.remove(key)
      }))
      done += due.length
    }
  }

  /** Start (or restart, for a newer version) the background re-evaluation of an account. */
  startPass (account: string, version: number): void {
    this.runPass(account, { version, kind: 'visitor', after: null })
  }

  private runPass (account: string, cursor: PassCursor): void {
    const running = this.passes.get(account)
    this.passes.set(account, cursor.version)
    if (running === undefined) {
      this.passStep(account, cursor).catch((error: unknown) => {
        logFailure(error)
        this.passes.delete(account)
      }).finally(() => { if (!this.passes.has(account)) this.wake(account) })
    }
  }

  /** Resolves once no background pass runs for the account (at once when none does, or once stopped). */
  idle (account: string): Promise<void> {
    if (!this.passes.has(account) || this.stopped) return Promise.resolve()
    return new Promise(resolve => {
      const waiters = this.idleWaiters.get(account) ?? []
      waiters.push(resolve)
      this.idleWaiters.set(account, waiters)
    })
  }

  private wake (account: string): void {
    const waiters = this.idleWaiters.get(account)
    this.idleWaiters.delete(account)
    for (const resolve of waiters ?? []) resolve()
  }

  private async passStep (account: string, cursor: PassCursor): Promise<void> {
    const { store, runtime, visitors, profiles, clock } = this.deps
    for (;;) {
      if (this.stopped) return
      // A deleted account: its entities must not be written again.
      if (!this.deps.catalogs.accounts.knows(account)) {
        this.passes.delete(account)
        return
      }
      const wanted = this.passes.get(account)!
      if (wanted !== cursor.version) cursor = { version: wanted, kind: 'visitor', after: null }
      const db = cursor.kind === 'visitor' ? store.visitors : store.profiles
      const ids: string[] = []
      for (const key of db.getKeys({ start: [account, cursor.after ?? ''] })) {
        const [owner, id] = key as [string, string]
        if (owner !== account) break
        if (id === cursor.after) continue
        ids.push(id)
        if (ids.length === PASS_BATCH_MAX) break
      }
      const message = { type: 'evaluate', nowMs: clock.nowMs() } as const
      const owns = this.deps.owns
      await Promise.all((owns === null ? ids : ids.filter(id => owns(account, id))).map(id => (cursor.kind === 'visitor'
        ? runtime.send(visitors, account, id, message)
        : runtime.send(profiles, account, id, message)).catch(logFailure)))
      if (ids.length < PASS_BATCH_MAX) {
        if (cursor.kind === 'visitor') cursor = { ...cursor, kind: 'profile', after: null }
        else if (this.passes.get(account) === cursor.version) {
          this.passes.delete(account)
          await store.durable(store.config.remove([account, 'segments-pass']))
          return
        }
      } else {
        cursor = { ...cursor, after: ids[ids.length - 1]! }
      }
      await store.save(store.config, [account, 'segments-pass'], cursor)
      // Let requests in between batches: the pass is background work.
      await new Promise(resolve => setImmediate(resolve))
    }
  }

  stop (): void {
    this.stopped = true
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
    for (const account of [...this.idleWaiters.keys()]) this.wake(account)
  }
}

function logFailure (error: unknown): void {
  log.error({ err: error }, 'segment maintenance failed')
}
