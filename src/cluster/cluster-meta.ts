// What is fixed for a cluster's whole life, kept in a KV bucket `BEACON_CLUSTER_<cluster>` (no TTL):
// the number of partitions. The first node that starts writes it (create-only); every later node
// compares its own setting with it and refuses to start on a difference, since keys would be placed
// in other partitions than the ones their data is in.

import type { NatsConnection } from '@nats-io/transport-node'
import { Kvm } from '@nats-io/kv'
import { CLUSTER_ERRORS, ClusterError, positiveInteger } from './errors.js'
import { retryWhileElecting } from './retry.js'

const PARTITIONS_KEY = 'partitions'

export function clusterMetaBucket (cluster: string): string {
  return `BEACON_CLUSTER_${cluster}`
}

/**
 * Stores `partitions` as the cluster's if it has none yet, else checks that it is the cluster's:
 * throws CLUSTER_PARTITIONS_MISMATCH otherwise.
 */
export async function settlePartitions (nc: NatsConnection, cluster: string, partitions: number, replicas: number): Promise<void> {
  positiveInteger('partitions', partitions)
  const kv = await retryWhileElecting(() => new Kvm(nc).create(clusterMetaBucket(cluster), { history: 1, replicas }))
  const stored = await retryWhileElecting(async () => {
    try {
      await kv.create(PARTITIONS_KEY, String(partitions))
      return partitions
    } catch (error) {
      const entry = await kv.get(PARTITIONS_KEY)
      if (entry === null || entry.operation !== 'PUT') throw error
      return Number(entry.string())
    }
  })
  if (stored !== partitions) {
    throw new ClusterError(CLUSTER_ERRORS.CLUSTER_PARTITIONS_MISMATCH,
      `the cluster ${cluster} was created with ${stored} partitions; this node has BEACON_PARTITIONS=${partitions} (set it to ${stored}: the number of partitions cannot change)`)
  }
}
