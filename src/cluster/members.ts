// Which nodes are alive: each node rewrites its key `n.<node>` in a KV bucket whose TTL is the lease
// time, and watches the bucket. A node that stops beating drops out of everyone's view after the TTL;
// one that leaves deletes its key and drops out at once. A node joins by creating its key (join): while
// another live node beats under the same id, the key exists and the join is refused.
//
// A node's public URL (BEACON_PUBLIC_URL: where clients reach it, for the route map) rides in a key of its
// own, `u.<node>`, written with each beat once the node listens (publishUrl): the value of `n.<node>`
// stays the bare id that nodes of earlier versions read, so a rolling upgrade mixes versions safely.

import type { NatsConnection } from '@nats-io/transport-node'
import { Kvm, type KV } from '@nats-io/kv'
import { systemClock, type Clock } from '../clock.js'
import { CLUSTER_ERRORS, ClusterError, invalidArgument, isCompareAndSetRefusal, positiveInteger } from './errors.js'
import { KvView } from './kv-view.js'
import { isTransient, retryWhileElecting } from './retry.js'

export interface MembersOptions {
  nc: NatsConnection
  /** The KV bucket's name, e.g. `BEACON_NODES_<cluster>`. */
  bucket: string
  /** A node not heard of for this long counts as gone. */
  ttlMs: number
  replicas: number
  node: string
  clock?: Clock
  /**
   * Called when a node appears (a new key, or one written again after it lapsed) or leaves (its key
   * deleted); not when it merely lapses: that is seen at the next look.
   */
  onChange?: () => void
}

export class Members {
  readonly node: string
  private readonly ttlMs: number
  private readonly view: KvView
  /** This node's public URL once it listens (publishUrl); beaten with the membership from then on. */
  private url: string | null = null

  private constructor (private readonly kv: KV, options: MembersOptions) {
    this.node = options.node
    this.ttlMs = options.ttlMs
    const onChange = options.onChange ?? (() => {})
    this.view = new KvView(kv, options.ttlMs, options.clock ?? systemClock, (key, entry, before) => {
      // Heartbeats rewrite the same keys all the time: only a node appearing or leaving is news. A key
      // that lapsed (a SIGKILLed node: no delete is ever seen) and is written again is a node appearing,
      // as a node restarted under the same id is.
      if (!key.startsWith(MEMBER_PREFIX)) return
      const wasLive = before !== undefined && before.value !== null && entry.seenAtMs - before.seenAtMs < this.ttlMs
      if ((entry.value !== null) !== wasLive) onChange()
    })
  }

  static async open (options: MembersOptions): Promise<Members> {
    positiveInteger('ttlMs', options.ttlMs)
    positiveInteger('replicas', options.replicas)
    if (!/^[A-Za-z0-9_-]+$/.test(options.node)) throw invalidArgument('node', 'must be letters, digits, - or _')
    const kv = await retryWhileElecting(() => new Kvm(options.nc).create(options.bucket, { history: 1, ttl: options.ttlMs, replicas: options.replicas }))
    const members = new Members(kv, options)
    // Both kinds of key: memberships (n.) and public URLs (u.).
    await retryWhileElecting(() => members.view.start('>'))
    return members
  }

  /** Restarts the watch if it went quiet (a server lost): heartbeats arrive every round when all is well. */
  refresh (): Promise<void> {
    return this.view.restartIfQuiet(this.ttlMs)
  }

  /**
   * Announces this node for the first time: creates its key, which must not exist. A key left by an
   * earlier run of this node that stopped without leaving (SIGKILL) lapses within the TTL: the join
   * tries again for up to `waitMs` (default: the TTL and a half), then refuses with CLUSTER_NODE_ID_IN_USE.
   */
  async join (waitMs = Math.ceil(this.ttlMs * 1.5)): Promise<void> {
    const deadline = Date.now() + waitMs
    // A bucket just created (or a server lost) may be electing its leader: such failures are retried longer.
    const electionDeadline = Date.now() + 30_000
    for (;;) {
      try {
        await this.kv.create(`n.${this.node}`, this.node)
        return
      } catch (error) {
        // Not refused because the key exists (a compare-and-set on "no such key").
        if (!isCompareAndSetRefusal(error)) {
          if (!isTransient(error) || Date.now() >= electionDeadline) throw error
          await new Promise(resolve => setTimeout(resolve, 100))
          continue
        }
        if (Date.now() >= deadline) {
          throw new ClusterError(CLUSTER_ERRORS.CLUSTER_NODE_ID_IN_USE, `another live node of this cluster has the node id ${this.node} (BEACON_NODE_ID): each node needs its own`)
        }
        await new Promise(resolve => setTimeout(resolve, 100))
      }
    }
  }

  /** Announces this node (again), with its public URL once known. */
  async beat (): Promise<void> {
    await this.kv.put(`n.${this.node}`, this.node)
    if (this.url !== null) await this.kv.put(`${URL_PREFIX}${this.node}`, this.url)
  }

  /** Publishes where clients reach this node (once it listens); rewritten with every beat from then on. */
  async publishUrl (url: string): Promise<void> {
    this.url = url
    await this.kv.put(`${URL_PREFIX}${this.node}`, url)
  }

  /** The live nodes' ids, sorted, this node always among them. */
  live (): string[] {
    const nodes = new Set<string>([this.node])
    for (const [key, entry] of this.view.liveEntries()) if (entry.value !== null && key.startsWith(MEMBER_PREFIX)) nodes.add(entry.value)
    return [...nodes].sort()
  }

  /** The public URL of a node as last published (this node's own once published); null while unknown or lapsed. */
  urlOf (node: string): string | null {
    if (node === this.node && this.url !== null) return this.url
    return this.view.live(`${URL_PREFIX}${node}`)?.value ?? null
  }

  /** Leaves the cluster view at once (the keys are deleted) and stops watching. */
  async leave (): Promise<void> {
    this.view.stop()
    await this.kv.delete(`n.${this.node}`)
    if (this.url !== null) await this.kv.delete(`${URL_PREFIX}${this.node}`).catch(() => {})
  }
}

const MEMBER_PREFIX = 'n.'
const URL_PREFIX = 'u.'
