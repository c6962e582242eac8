// A Beacon process as a cluster node: joins the cluster's members, holds about P/N partition leases
// through the balancer, and answers Ownership (src/cluster/ownership.ts) for the request path. What a
// node keeps per partition (the entity log) is given as a PartitionKeeper: recovered when the lease is
// gained, before owns() turns true; released before the lease is given back; dropped at once when the
// lease is lost. Its own refusals (a fenced append) give the lease up.
//
// open() checks what must hold before the node serves anything: the cluster's partition count (stored
// on first creation, cluster-meta.ts) and that no live node has this node's id (members.ts join).
// start() joins and starts balancing; close() hands every partition over and leaves.
//
// A takeover: a partition whose lease this node took after it saw an earlier lease of it (another
// node's, or its own) released or lapsed, once it is recovered and owned here (beacon_cluster_takeovers_total
// counts them; a recovery that fails or a lease lost before it finishes is no takeover, the next
// acquisition may be). Timed from when this node saw that earlier lease go to the partition owned here.

import type { NatsConnection } from '@nats-io/transport-node'
import { systemClock, type Clock } from '../clock.js'
import { log } from '../log.js'
import { Balancer, type LossReason } from './balancer.js'
import { settlePartitions } from './cluster-meta.js'
import { LeaseTable } from './leases.js'
import { Members } from './members.js'
import type { Ownership } from './ownership.js'
import { partitionOf } from './partition.js'

/** What the node keeps per partition (the entity log fits). */
export interface PartitionKeeper {
  /** Take the partition over (claim and replay its changelog); the node owns it once this resolves. */
  recover (partition: number): Promise<unknown>
  /** Graceful handover: finish in-flight writes, then drop the partition. */
  release (partition: number): Promise<void>
  /** The lease is gone: stop writing the partition at once. */
  lost (partition: number): void
  /** Entries in the partition's changelog since its last snapshot; null when not held. */
  entriesSinceSnapshot? (partition: number): number | null
}

export interface Takeover {
  partition: number
  /** From the previous lease seen gone to recovered here. */
  takeoverMs: number
  /** The recovery alone (claim, replay, local rewrite). */
  recoveryMs: number
}

export interface ClusterNodeOptions {
  nc: NatsConnection
  cluster: string
  nodeId: string
  partitions: number
  replicas: number
  leaseMs: number
  clock?: Clock
  /** Told of each takeover (above: a partition held before, by any node, now recovered and owned here). */
  onTakeover?: (takeover: Takeover) => void
  /** Told each time a partition becomes owned here (recovered, lease held), takeover or not. */
  onOwned?: (partition: number) => void
}

export interface NodeView {
  id: string
  partitions: number[]
  /** Per partition of `partitions`: ms since its lease was last written, as this node saw it. */
  leaseAgesMs: number[]
}

export interface ClusterStatus {
  cluster: string
  node: string
  partitions: number
  joined: boolean
  /** Partitions this node has recovered and serves. */
  owned: number[]
  /** Per partition of `owned`: changelog entries since its last snapshot (what a takeover would replay after the snapshot). */
  changelogEntries: number[]
  /** Partitions whose lease this node holds and is still recovering. */
  recovering: number[]
  /** Partitions with no live lease as this node sees them. */
  unowned: number[]
  /** The live members, each with the leases it holds. */
  nodes: NodeView[]
}

export function leaseBucket (cluster: string): string {
  return `BEACON_LEASES_${cluster}`
}

export function membersBucket (cluster: string): string {
  return `BEACON_NODES_${cluster}`
}

export class ClusterNode implements Ownership {
  readonly nodeId: string
  readonly partitions: number
  readonly cluster: string
  private readonly balancer: Balancer
  private readonly members: Members
  private readonly clock: Clock
  private readonly onTakeover: (takeover: Takeover) => void
  private readonly onOwned: (partition: number) => void
  private keeper: PartitionKeeper | null = null
  /** Recovered partitions, each with the recovery that made it so (a newer one replaces it). */
  private readonly recovered = new Set<number>()
  private readonly recovering = new Map<number, Promise<void>>()
  private joined = false
  private closing: Promise<void> | null = null

  private constructor (options: ClusterNodeOptions, members: Members, table: LeaseTable) {
    this.nodeId = options.nodeId
    this.partitions = options.partitions
    this.cluster = options.cluster
    this.clock = options.clock ?? systemClock
    this.onTakeover = options.onTakeover ?? (() => {})
    this.onOwned = options.onOwned ?? (() => {})
    this.members = members
    this.balancer = new Balancer({
      table, members, partitions: options.partitions, clock: this.clock,
      onAcquired: (partition, freeSinceMs) => { this.acquired(partition, freeSinceMs) },
      onLost: (partition, reason) => { this.lostLease(partition, reason) },
      onReleasing: partition => this.releasing(partition),
    })
  }

  /**
   * Opens the node's buckets and checks the cluster's partition count and this node's id (refusing
   * with CLUSTER_PARTITIONS_MISMATCH or CLUSTER_NODE_ID_IN_USE). The node is in the members' view
   * from here on; it takes partitions once started.
   */
  static async open (options: ClusterNodeOptions): Promise<ClusterNode> {
    const { nc, cluster, nodeId, partitions, replicas, leaseMs } = options
    await settlePartitions(nc, cluster, partitions, replicas)
    const table = await LeaseTable.open({ nc, bucket: leaseBucket(cluster), leaseMs, replicas, node: nodeId })
    let node: ClusterNode | null = null
    const members = await Members.open({ nc, bucket: membersBucket(cluster), ttlMs: leaseMs, replicas, node: nodeId, clock: options.clock, onChange: () => node?.balancer.tickSoon() })
    await members.join()
    node = new ClusterNode(options, members, table)
    return node
  }

  /** Starts balancing: partitions are taken and recovered through `keeper` from here on. */
  async start (keeper: PartitionKeeper): Promise<void> {
    this.keeper = keeper
    await this.balancer.start()
    this.joined = true
  }

  partitionOf (account: string, id: string): number {
    return partitionOf(account, id, this.partitions)
  }

  owns (partition: number): boolean {
    return this.recovered.has(partition) && this.balancer.holds(partition)
  }

  ownerOf (partition: number): string | null {
    if (this.owns(partition)) return this.nodeId
    return this.balancer.holderOf(partition)?.node ?? null
  }

  async ownerReady (partition: number, timeoutMs: number, notNode?: string): Promise<string | null> {
    const deadline = this.clock.nowMs() + timeoutMs
    for (;;) {
      const owner = this.ownerOf(partition)
      // This node counts once it recovered the partition, not while it merely holds its lease.
      if (owner !== null && owner !== notNode && (owner !== this.nodeId || this.owns(partition))) return owner
      if (this.clock.nowMs() >= deadline) return null
      await new Promise(resolve => setTimeout(resolve, 10))
    }
  }

  /** Joined, and every partition has an owner as this node sees the leases: what /readyz asks. */
  unready (): string | null {
    if (!this.joined || this.closing !== null) return 'This node has not joined the cluster (or is leaving it).'
    let unowned = 0
    for (let partition = 0; partition < this.partitions; partition++) if (this.ownerOf(partition) === null) unowned++
    return unowned === 0 ? null : `${unowned} of ${this.partitions} partitions have no owner yet.`
  }

  /** Publishes where clients reach this node (BEACON_PUBLIC_URL), for the route map; once it listens. */
  publishUrl (url: string): Promise<void> {
    return this.members.publishUrl(url)
  }

  /** A node's published public URL, or null while unknown (route-map.ts). */
  urlOf (node: string): string | null {
    return this.members.urlOf(node)
  }

  /** The live nodes' ids (the members bucket as this node sees it), sorted, this node among them. */
  liveNodes (): string[] {
    return this.members.live()
  }

  /** How many partitions this node serves now (recovered, lease held). */
  ownedCount (): number {
    let count = 0
    for (const partition of this.recovered) if (this.balancer.holds(partition)) count++
    return count
  }

  status (): ClusterStatus {
    const byNode = new Map<string, NodeView>()
    for (const id of this.members.live()) byNode.set(id, { id, partitions: [], leaseAgesMs: [] })
    const unowned: number[] = []
    const recovering: number[] = []
    const owned: number[] = []
    for (let partition = 0; partition < this.partitions; partition++) {
      const holder = this.balancer.holderOf(partition)
      if (holder === null) {
        unowned.push(partition)
        continue
      }
      if (holder.node === this.nodeId) (this.recovered.has(partition) ? owned : recovering).push(partition)
      let view = byNode.get(holder.node)
      if (view === undefined) byNode.set(holder.node, view = { id: holder.node, partitions: [], leaseAgesMs: [] })
      view.partitions.push(partition)
      view.leaseAgesMs.push(Math.round(holder.ageMs))
    }
    return {
      cluster: this.cluster, node: this.nodeId, partitions: this.partitions, joined: this.joined && this.closing === null,
      owned, changelogEntries: owned.map(partition => this.keeper?.entriesSinceSnapshot?.(partition) ?? 0), recovering, unowned, nodes: [...byNode.values()].sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    }
  }

  /** The keeper refused a partition (a fenced or unconfirmed append, `why`): stop serving it and give its lease up. */
  refused (partition: number, why?: unknown): void {
    log.warn({ partition, err: why }, 'partition refused by its changelog (another node claimed it, or an append went unconfirmed): giving its lease up')
    this.recovered.delete(partition)
    void this.balancer.giveUp(partition)
  }

  /** Graceful leave: every partition handed over (keeper's release, then the lease released), then out of the members. */
  close (): Promise<void> {
    this.closing ??= (async () => {
      await this.balancer.close()
      await Promise.all(this.recovering.values())
    })()
    return this.closing
  }

  /** Recovery runs beside the balancer's rounds: a long one must not hold back the renewal of other leases. */
  private acquired (partition: number, freeSinceMs: number | null): void {
    const keeper = this.keeper
    if (keeper === null) throw new Error('a partition was acquired before the node started')
    const startedAtMs = this.clock.nowMs()
    const recovery = keeper.recover(partition).then(() => {
      if (this.recovering.get(partition) !== recovery) return
      this.recovering.delete(partition)
      if (!this.balancer.holds(partition)) return
      this.recovered.add(partition)
      this.onOwned(partition)
      const doneAtMs = this.clock.nowMs()
      if (freeSinceMs !== null) this.onTakeover({ partition, takeoverMs: doneAtMs - Math.min(freeSinceMs, startedAtMs), recoveryMs: doneAtMs - startedAtMs })
      else log.debug({ partition, recoveryMs: doneAtMs - startedAtMs }, 'partition acquired (no earlier lease of it seen here: not counted as a takeover)')
    }, (error: unknown) => {
      if (this.recovering.get(partition) !== recovery) return
      this.recovering.delete(partition)
      // Lost or released meanwhile: nothing to report. Otherwise the lease goes back for another try.
      if (!this.balancer.holds(partition)) return
      log.warn({ err: error, partition }, 'partition recovery failed: giving its lease back')
      void this.balancer.giveUp(partition)
    })
    this.recovering.set(partition, recovery)
  }

  private lostLease (partition: number, reason: LossReason): void {
    this.recovered.delete(partition)
    this.recovering.delete(partition)
    log.warn({ partition, reason }, 'partition lease lost')
    this.keeper?.lost(partition)
  }

  private async releasing (partition: number): Promise<void> {
    this.recovered.delete(partition)
    const recovery = this.recovering.get(partition)
    if (recovery !== undefined) {
      await recovery
      // A recovery that ended meanwhile marked the partition recovered: not any more. Left, owns() was
      // true again the moment this node next acquired the partition, before its recovery, and requests
      // ran on the stale local state (one wrote it over the recovered one once that finished).
      this.recovered.delete(partition)
    }
    await this.keeper?.release(partition)
  }
}
