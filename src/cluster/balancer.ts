// Spreads P partitions over the live nodes: each node holds at most ceil(P / N) leases (N = live nodes),
// renews them every tick, takes free ones while below that share and gives back its extra ones when a
// node joins. Free means: no lease key, a released one, or one not renewed within the lease time.
// A partition given back is handed over beside the rounds (onReleasing, then the release), as a gained
// one is recovered beside them: the lease stays held and renewed until the handover is done, and a slow
// handover never holds back the renewal of the other leases or the heartbeat (which would cost the node
// every lease and its place among the members, and leave another node holding every partition). A
// handover still unfinished after `handoverLimitMs` is cut short: the partition is dropped here (onLost,
// reason 'handover') and its lease released, so a joining node is not kept below its share for as long
// as a release hangs; the new owner's claim of the changelog fences anything the old release still sends.
// Among free partitions a node prefers those it ranks highest by rendezvous hashing (hash of node and
// partition), so nodes starting together mostly reach for different ones.
//
// Losing a lease (a refused renew, or no successful renew within the lease time measured from when the
// last successful renew was sent) calls onLost at once: the node must stop writing that partition.
// holds() makes the same time check synchronously for the write path.
//
// Time is injected: `clock` for lease ages, `timers` for the ticks (tests freeze a node's timers to
// play a paused process).

import { systemClock, type Clock } from '../clock.js'
import { CLUSTER_ERRORS, ClusterError, positiveInteger } from './errors.js'
import { LeaseTable, type Lease } from './leases.js'
import { KvView } from './kv-view.js'
import type { Members } from './members.js'
import { partitionOf } from './partition.js'
import { log } from '../log.js'

export interface Timers {
  setTimeout (fn: () => void, ms: number): unknown
  clearTimeout (handle: unknown): void
}

export const systemTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: handle => clearTimeout(handle as NodeJS.Timeout),
}

export type LossReason = 'refused' | 'expired' | 'handover'

export interface BalancerOptions {
  table: LeaseTable
  members: Members
  partitions: number
  /** Between two rounds of renewals and balancing. Default: a third of the lease time. */
  tickMs?: number
  /** How long a handover may take before it is cut short (see above). Default: 10 lease times, at least 30 s. */
  handoverLimitMs?: number
  clock?: Clock
  timers?: Timers
  /**
   * This node now holds the partition (recover it before serving). A throw gives the lease back.
   * `freeSinceMs`: when the partition's last lease seen here (another node's, or this node's own) was
   * seen released or lapsed, on this node's clock; null when this node never saw a lease of it (a new
   * cluster's first leases).
   */
  onAcquired: (partition: number, freeSinceMs: number | null) => Promise<void> | void
  /** The lease is gone: stop writing the partition at once. */
  onLost: (partition: number, reason: LossReason) => void
  /** About to give the partition back (a node joined, or close()): finish in-flight writes first. */
  onReleasing?: (partition: number) => Promise<void> | void
}

interface Held {
  lease: Lease
  /** When the last successful renew (or the acquire) was sent. */
  renewedAtMs: number
  /** The renew under way, if any (a release waits for it: it moves the lease's revision). */
  renewing: Promise<void> | null
  /** The handover under way (onReleasing, then the release), if any: still held, not counted in the share. */
  handover: Promise<void> | null
}

export class Balancer {
  readonly partitions: number
  private readonly table: LeaseTable
  private readonly members: Members
  private readonly tickMs: number
  private readonly clock: Clock
  private readonly timers: Timers
  private readonly options: BalancerOptions
  private readonly held = new Map<number, Held>()
  /**
   * Handovers under way, by partition, until the lease is released (also when the lease was lost
   * meanwhile, or the handover cut short). close() waits for them all.
   */
  private readonly handovers = new Map<number, Promise<void>>()
  /**
   * Partitions whose onReleasing has not returned yet (a handover cut short included): not taken again
   * before (a late release must never drop a newer recovery of the partition).
   */
  private readonly releasing = new Set<number>()
  private readonly handoverLimitMs: number
  private readonly view: KvView
  private timer: unknown = null
  private soon: unknown = null
  private retry: unknown = null
  private running: Promise<void> | null = null
  private again = false
  /** The live members at the last round, as logged. */
  private lastLive = ''
  private closed = false

  constructor (options: BalancerOptions) {
    this.options = options
    this.table = options.table
    this.members = options.members
    this.partitions = positiveInteger('partitions', options.partitions)
    this.tickMs = positiveInteger('tickMs', options.tickMs ?? Math.max(1, Math.floor(options.table.leaseMs / 3)))
    this.handoverLimitMs = positiveInteger('handoverLimitMs', options.handoverLimitMs ?? Math.max(30_000, 10 * options.table.leaseMs))
    this.clock = options.clock ?? systemClock
    this.timers = options.timers ?? systemTimers
    // A released lease is free at once: look again soon rather than at the next tick.
    this.view = new KvView(options.table.kv, options.table.leaseMs, this.clock, (_key, entry) => {
      if (entry.value === null) this.tickSoon()
    })
  }

  async start (): Promise<void> {
    await this.view.start('p.>')
    this.schedule()
    await this.tick()
  }

  /** The partitions this node holds right now, sorted (those whose time ran out are dropped first). */
  owned (): number[] {
    return [...this.held.keys()].filter(partition => this.holds(partition)).sort((a, b) => a - b)
  }

  /** Does this node still hold the partition's lease right now? (Drops it if its time ran out.) */
  holds (partition: number): boolean {
    const held = this.held.get(partition)
    if (held === undefined) return false
    if (this.clock.nowMs() - held.renewedAtMs < this.table.leaseMs) return true
    this.lose(partition, 'expired')
    return false
  }

  /** Each held lease and its age (ms since its last renew was sent). */
  status (): Array<{ partition: number, revision: number, ageMs: number }> {
    const now = this.clock.nowMs()
    return [...this.held.values()].map(held => ({ partition: held.lease.partition, revision: held.lease.revision, ageMs: now - held.renewedAtMs }))
  }

  /**
   * Who holds the partition's lease as this node sees it, and how long ago that lease was last written
   * (for a lease of this node: since its last renew was sent); null while none is live.
   */
  holderOf (partition: number): { node: string, ageMs: number } | null {
    const now = this.clock.nowMs()
    const held = this.held.get(partition)
    if (held !== undefined && now - held.renewedAtMs < this.table.leaseMs) return { node: this.table.node, ageMs: now - held.renewedAtMs }
    const entry = this.view.live(LeaseTable.key(partition))
    // An empty value: a key this node was refused and counts as held for a while, holder unknown.
    if (entry === null || entry.value === null || entry.value === '' || entry.value === this.table.node) return null
    return { node: entry.value, ageMs: now - entry.seenAtMs }
  }

  /**
   * Gives up a partition this node can no longer write (its changelog append was refused): forgets it
   * and releases the lease if it is still this node's. No onReleasing: the partition is already dropped.
   */
  async giveUp (partition: number): Promise<void> {
    const held = this.held.get(partition)
    if (held === undefined) return
    this.held.delete(partition)
    await this.releaseLease(held)
  }

  /** Called by the node's members watcher when a node joins or leaves. */
  tickSoon (): void {
    if (this.closed || this.soon !== null) return
    this.soon = this.timers.setTimeout(() => {
      this.soon = null
      void this.tick()
    }, 0)
  }

  /** Stops balancing, hands every partition back (onReleasing, then release) and leaves. */
  async close (): Promise<void> {
    this.closed = true
    if (this.timer !== null) this.timers.clearTimeout(this.timer)
    if (this.soon !== null) this.timers.clearTimeout(this.soon)
    if (this.retry !== null) this.timers.clearTimeout(this.retry)
    await this.running
    this.view.stop()
    for (const partition of this.owned()) this.handOver(partition)
    await Promise.all(this.handovers.values())
    await this.members.leave()
  }

  private schedule (): void {
    if (this.closed) return
    this.timer = this.timers.setTimeout(() => {
      this.timer = null
      this.schedule()
      void this.tick()
    }, this.tickMs)
  }

  /** One round at a time; a round asked for while one runs runs right after it. */
  private tick (): Promise<void> {
    if (this.running !== null) {
      this.again = true
      return this.running
    }
    this.running = (async () => {
      do {
        this.again = false
        await this.round().catch(() => {})
      } while (this.again && !this.closed)
      this.running = null
    })()
    return this.running
  }

  private async round (): Promise<void> {
    if (this.closed) return
    // The next round (renewals, heartbeat) waits for this one: one that outlasts the lease time costs
    // this node its leases and its place among the members. Said in the log, with what it waits for.
    const pending = new Set<string>()
    const step = <T>(name: string, work: Promise<T>): Promise<T> => {
      pending.add(name)
      return work.finally(() => { pending.delete(name) })
    }
    const slow = this.timers.setTimeout(() => {
      log.warn({ waitingFor: [...pending], leaseMs: this.table.leaseMs }, 'balancer round still running after the lease time: this node\'s leases and members key may lapse')
    }, this.table.leaseMs)
    try {
      // Renewals first in importance: none of them waits for the heartbeat or a watch restart.
      await Promise.all([
        step('renewals', Promise.all(this.owned().map(partition => this.renew(partition)))),
        step('heartbeat', this.members.beat().catch(() => {})),
        step('members watch', this.members.refresh().catch(() => {})),
        step('lease watch', this.view.restartIfQuiet(this.table.leaseMs).catch(() => {})),
      ])
      if (this.closed) return
      const live = this.members.live()
      const share = Math.ceil(this.partitions / live.length)
      if (live.join(',') !== this.lastLive) {
        this.lastLive = live.join(',')
        log.info({ live, share, held: this.held.size }, 'balancer: live members changed')
      }
      // Those being handed over are still held (and renewed) but no longer counted as kept.
      const kept = this.owned().filter(partition => this.held.get(partition)?.handover === null)
      if (kept.length > share) for (const partition of this.ranked(kept).slice(share)) this.handOver(partition)
      else if (this.held.size < share) await step('acquire', this.acquire(share - this.held.size))
    } finally {
      this.timers.clearTimeout(slow)
    }
  }

  private async renew (partition: number): Promise<void> {
    const held = this.held.get(partition)
    if (held === undefined) return
    const sentAtMs = this.clock.nowMs()
    if (sentAtMs - held.renewedAtMs >= this.table.leaseMs) {
      this.lose(partition, 'expired')
      return
    }
    const renewing = (async () => {
      try {
        // Kept even when the partition was given up meanwhile: its release needs the latest revision.
        held.lease = await this.table.renew(held.lease)
        held.renewedAtMs = sentAtMs
      } catch (error) {
        if (this.held.get(partition) !== held) return
        if (error instanceof ClusterError && error.code === CLUSTER_ERRORS.CLUSTER_LEASE_LOST) this.lose(partition, 'refused')
        else if (this.clock.nowMs() - held.renewedAtMs >= this.table.leaseMs) this.lose(partition, 'expired')
      }
    })()
    held.renewing = renewing
    await renewing
    if (held.renewing === renewing) held.renewing = null
  }

  private async acquire (wanted: number): Promise<void> {
    const free: number[] = []
    for (let partition = 0; partition < this.partitions; partition++) {
      if (!this.held.has(partition) && !this.handovers.has(partition) && !this.releasing.has(partition) && this.view.live(LeaseTable.key(partition)) === null) free.push(partition)
    }
    const tries = this.ranked(free).slice(0, wanted)
    let refused = false
    await Promise.all(tries.map(async partition => {
      const freeSinceMs = this.freeSince(partition)
      const sentAtMs = this.clock.nowMs()
      const lease = await this.table.acquire(partition).catch(() => null)
      if (lease === null) {
        // Held after all (this node's view is behind, e.g. its watch is being recreated after a server
        // loss): skip it for a lease time so the next round tries other partitions.
        this.view.touch(LeaseTable.key(partition))
        refused = true
        return
      }
      if (this.closed) {
        await this.table.release(lease).catch(() => {})
        return
      }
      const held: Held = { lease, renewedAtMs: sentAtMs, renewing: null, handover: null }
      this.held.set(partition, held)
      try {
        await this.options.onAcquired(partition, freeSinceMs)
      } catch {
        if (this.held.get(partition) === held) {
          this.held.delete(partition)
          await this.releaseLease(held)
        }
      }
    }))
    // A lease being released shows its delete marker a moment before its key is empty: look again shortly.
    if (refused) this.retrySoon()
  }

  /**
   * When this node saw the partition's last lease go (its delete, or its lapse: the last write seen plus
   * the lease time), whoever held it; null when it never saw a lease of it. A refused acquire in between
   * (view.touch) changes neither.
   */
  private freeSince (partition: number): number | null {
    const last = this.view.last(LeaseTable.key(partition))
    if (last === undefined || last.lastPut === null) return null
    return last.deletedAtMs ?? last.lastPut.seenAtMs + this.table.leaseMs
  }

  private retrySoon (): void {
    if (this.closed || this.retry !== null) return
    this.retry = this.timers.setTimeout(() => {
      this.retry = null
      void this.tick()
    }, Math.max(1, Math.floor(this.tickMs / 6)))
  }

  /**
   * Starts handing the partition over, beside the rounds: onReleasing (in-flight writes finished) while
   * the rounds keep renewing its lease, then the lease released; after handoverLimitMs without the end
   * of onReleasing, the partition is dropped (onLost) and its lease released. Not awaited by the round.
   */
  private handOver (partition: number): void {
    const held = this.held.get(partition)
    if (held === undefined || held.handover !== null) return
    this.releasing.add(partition)
    const released = (async () => { await this.options.onReleasing?.(partition) })()
      .catch(() => {})
      .finally(() => { this.releasing.delete(partition) })
    const handover = (async () => {
      let limit: unknown = null
      const finished = await Promise.race([
        released.then(() => true),
        new Promise<boolean>(resolve => { limit = this.timers.setTimeout(() => resolve(false), this.handoverLimitMs) }),
      ])
      this.timers.clearTimeout(limit)
      // Lost meanwhile (onLost was called): nothing to release.
      if (this.held.get(partition) !== held) return
      if (finished) {
        // Not ours any more from here on: holds() is false and renewals skip it.
        this.held.delete(partition)
      } else {
        log.warn({ partition, handoverLimitMs: this.handoverLimitMs }, 'handover not finished in time: the partition is dropped and its lease released')
        this.lose(partition, 'handover')
      }
      await this.releaseLease(held)
    })().finally(() => { this.handovers.delete(partition) })
    held.handover = handover
    this.handovers.set(partition, handover)
  }

  /** Releases a lease no longer in `held`, after a renew of it still under way (which moves its revision). */
  private async releaseLease (held: Held): Promise<void> {
    await held.renewing
    await this.table.release(held.lease).catch(() => {})
  }

  private lose (partition: number, reason: LossReason): void {
    if (!this.held.delete(partition)) return
    this.options.onLost(partition, reason)
  }

  /** Partitions ordered by this node's rendezvous preference, highest first. */
  private ranked (partitions: number[]): number[] {
    const node = this.table.node
    const score = (partition: number): number => partitionOf(node, String(partition), 0x1_0000_0000)
    return partitions.map(partition => [score(partition), partition] as const)
      .sort((a, b) => b[0] - a[0])
      .map(([, partition]) => partition)
  }
}
