// Partition leases in a JetStream KV bucket: key `p.<partition>`, value the holder's node id. The
// bucket's TTL (max age) is the lease time: a lease not renewed within it disappears.
//   acquire: put expecting the key's subject to be empty (expected last subject sequence 0),
//   renew:   update on the known revision (compare-and-set; refused once anyone else wrote the key, or
//            once it expired),
//   release: a delete marker on the known revision (watchers see the lease go at once), then that marker
//            deleted (the bucket keeps one message a key), so the subject is empty again and a lease
//            taken meanwhile by another node (after the marker lapsed) is left alone. Not a purge of the
//            subject: before nats-server 2.9.18 a restarted server replays that as a purge of the whole
//            bucket (server-version.ts).
// A refused renew means the lease is lost: the holder must stop writing that partition at once.
//
// Why never acquire over a delete marker (what KV create does): before nats-server 2.9.21 a replicated
// stream checks an expected last subject sequence > 0 only before proposing (server-version.ts), so two
// nodes taking a released lease at once could both succeed; an expected sequence of 0 is checked when
// the message is applied, exactly, on every version. Seen on 2.9.10: two holders of one partition.

import { Empty, headers, type NatsConnection } from '@nats-io/transport-node'
import { JetStreamApiCodes, JetStreamApiError, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream'
import { Kvm, type KV } from '@nats-io/kv'
import { assert } from '../assert.js'
import { CLUSTER_ERRORS, ClusterError, invalidArgument, isCompareAndSetRefusal, positiveInteger } from './errors.js'
import { retryWhileElecting } from './retry.js'

export interface Lease {
  partition: number
  /** The KV revision of this holder's last write of the key: the compare-and-set token. */
  revision: number
}

export interface LeaseTableOptions {
  nc: NatsConnection
  /** The KV bucket's name, e.g. `BEACON_LEASES_<cluster>`. */
  bucket: string
  /** How long a lease lasts without renewal (the bucket's TTL). */
  leaseMs: number
  replicas: number
  /** This node's id, the leases' value. */
  node: string
}

export class LeaseTable {
  readonly node: string
  readonly leaseMs: number

  private readonly stream: string
  private readonly subjectPrefix: string

  private constructor (readonly kv: KV, private readonly js: JetStreamClient, private readonly jsm: JetStreamManager, options: LeaseTableOptions) {
    this.node = options.node
    this.leaseMs = options.leaseMs
    // The KV bucket's stream and subjects, as the KV clients of every language name them.
    this.stream = `KV_${options.bucket}`
    this.subjectPrefix = `$KV.${options.bucket}.`
  }

  static async open (options: LeaseTableOptions): Promise<LeaseTable> {
    positiveInteger('leaseMs', options.leaseMs)
    positiveInteger('replicas', options.replicas)
    if (!/^[A-Za-z0-9_-]+$/.test(options.node)) throw invalidArgument('node', 'must be letters, digits, - or _')
    // No direct get: a read of a lease (kv.get) is answered by the stream leader, never by a lagging replica.
    const kv = await retryWhileElecting(() => new Kvm(options.nc).create(options.bucket, { history: 1, ttl: options.leaseMs, replicas: options.replicas, allow_direct: false }))
    return new LeaseTable(kv, jetstream(options.nc), await retryWhileElecting(() => jetstreamManager(options.nc)), options)
  }

  static key (partition: number): string {
    assert(Number.isInteger(partition) && partition >= 0, 'a partition is a non-negative integer', { partition })
    return `p.${partition}`
  }

  /** Takes the partition's lease if its key is empty; null if somebody holds it (or is releasing it). */
  async acquire (partition: number): Promise<Lease | null> {
    try {
      const revision = await this.kv.put(LeaseTable.key(partition), this.node, { previousSeq: 0 })
      assert(revision > 0, 'an acquired lease has a revision', { partition, revision })
      return { partition, revision }
    } catch (error) {
      if (isCompareAndSetRefusal(error)) return null
      throw error
    }
  }

  /**
   * Takes the lease, retrying while somebody holds it (pauses from 1 ms doubling up to 20 ms); null once
   * `waitMs` passed without it. What a lock serialising a scope's changes across nodes waits with.
   */
  async acquireWithin (partition: number, waitMs: number): Promise<Lease | null> {
    const deadline = performance.now() + waitMs
    let pauseMs = 1
    for (;;) {
      const lease = await this.acquire(partition)
      if (lease !== null) return lease
      if (performance.now() > deadline) return null
      await new Promise(resolve => setTimeout(resolve, pauseMs))
      pauseMs = Math.min(pauseMs * 2, 20)
    }
  }

  /** Extends the lease; throws CLUSTER_LEASE_LOST when the compare-and-set is refused. */
  async renew (lease: Lease): Promise<Lease> {
    try {
      const revision = await this.kv.update(LeaseTable.key(lease.partition), this.node, lease.revision)
      // The compare-and-set passed on lease.revision, so the key's next write is later in the stream.
      assert(revision > lease.revision, 'a renewed lease has a later revision', { partition: lease.partition, before: lease.revision, after: revision })
      return { partition: lease.partition, revision }
    } catch (error) {
      if (isCompareAndSetRefusal(error)) {
        throw new ClusterError(CLUSTER_ERRORS.CLUSTER_LEASE_LOST, `the lease of partition ${lease.partition} was lost (${(error as Error).message})`, lease.partition, { cause: error })
      }
      throw error
    }
  }

  /** Gives the lease back at once; a lease already lost is left as it is. */
  async release (lease: Lease): Promise<void> {
    const subject = this.subjectPrefix + LeaseTable.key(lease.partition)
    const h = headers()
    h.set('KV-Operation', 'DEL')
    let marker: number
    try {
      marker = (await this.js.publish(subject, Empty, { headers: h, expect: { lastSubjectSequence: lease.revision } })).seq
    } catch (error) {
      if (isCompareAndSetRefusal(error)) return
      throw error
    }
    // The marker only, nothing after it (a lease another node took since); gone already when it lapsed.
    await this.jsm.streams.deleteMessage(this.stream, marker, false).catch((error: unknown) => {
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.NoMessageFound)) throw error
    })
  }
}
