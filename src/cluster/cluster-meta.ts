// What is fixed for a cluster's whole life, kept in a KV bucket `BEACON_CLUSTER_<cluster>` (no TTL):
// the number of partitions. The first node that starts writes it (create-only); every later node
// compares its own setting with it and refuses to start on a difference, since keys would be placed
// in other partitions than the ones their data is in.
//
// And the fingerprint of the cluster's BEACON_SECRETS_KEY (key `secrets-key`: an HKDF of the key with
// its own purpose label, which tells nothing of the key): every node must seal, open and sign with the
// same key, so a node none of whose keys has that fingerprint refuses to start, at once, rather than
// at its first restart (a sealed secret it cannot open) or silently (entries it cannot verify). A node
// whose first key differs but lists the cluster's (a rotation, "new,old") is accepted and records its
// first key as the cluster's from then on (a compare-and-set): nodes that know only the old key are
// refused from then on.
//
// And the number of changelog streams (key `changelog-streams`, settleChangelogStreams): chosen by the
// first node (BEACON_CHANGELOG_STREAMS), one for a cluster created before the setting existed.

import type { NatsConnection } from '@nats-io/transport-node'
import { Kvm, type KV } from '@nats-io/kv'
import { hkdfSync } from 'node:crypto'
import { CLUSTER_ERRORS, ClusterError, isCompareAndSetRefusal, positiveInteger } from './errors.js'
import { retryWhileElecting } from './retry.js'

const PARTITIONS_KEY = 'partitions'
const CHANGELOG_STREAMS_KEY = 'changelog-streams'
const SECRETS_KEY_KEY = 'secrets-key'
const FINGERPRINT_PURPOSE = 'beacon secrets key fingerprint v1'

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
  const stored = await retryWhileElecting(() => createOrStored(kv, PARTITIONS_KEY, partitions))
  if (stored !== partitions) {
    throw new ClusterError(CLUSTER_ERRORS.CLUSTER_PARTITIONS_MISMATCH,
      `the cluster ${cluster} was created with ${stored} partitions; this node has BEACON_PARTITIONS=${partitions} (set it to ${stored}: the number of partitions cannot change)`)
  }
}

/**
 * The number of changelog streams the cluster spreads its partitions over: the one it recorded, else
 * `wanted` recorded now (create-only: nodes started together agree on the first), except that a cluster
 * whose changelog exists from before the setting (`existing`: its first stream is there, no record) is
 * recorded and kept at one stream. Never changes after: a partition's history is in its stream.
 */
export async function settleChangelogStreams (nc: NatsConnection, cluster: string, wanted: number, existing: () => Promise<boolean>, replicas: number): Promise<number> {
  positiveInteger('changelog streams', wanted)
  const kv = await retryWhileElecting(() => new Kvm(nc).create(clusterMetaBucket(cluster), { history: 1, replicas }))
  return await retryWhileElecting(async () => {
    const entry = await kv.get(CHANGELOG_STREAMS_KEY)
    if (entry !== null && entry.operation === 'PUT') return Number(entry.string())
    return await createOrStored(kv, CHANGELOG_STREAMS_KEY, await existing() ? 1 : wanted)
  })
}

/** Stores `value` under `key` if the key has none (create-only), and returns the value the key holds. */
async function createOrStored (kv: KV, key: string, value: number): Promise<number> {
  try {
    await kv.create(key, String(value))
    return value
  } catch (error) {
    const entry = await kv.get(key)
    if (entry === null || entry.operation !== 'PUT') throw error
    return Number(entry.string())
  }
}

/** A key's fingerprint as the cluster keeps it: 16 bytes of HKDF-SHA256 with a purpose of its own, hex. */
export function secretsKeyFingerprint (key: Buffer): string {
  return Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), FINGERPRINT_PURPOSE, 16)).toString('hex')
}

/**
 * Stores the fingerprint of `keys[0]` as the cluster's if it has none yet; else checks that one of
 * `keys` has the cluster's fingerprint (throws CLUSTER_SECRETS_KEY_MISMATCH otherwise) and, when it is
 * not the first, records the first as the cluster's (a rotation).
 */
export async function settleSecretsKey (nc: NatsConnection, cluster: string, keys: readonly Buffer[], replicas: number): Promise<void> {
  const mine = keys.map(secretsKeyFingerprint)
  const kv = await retryWhileElecting(() => new Kvm(nc).create(clusterMetaBucket(cluster), { history: 1, replicas }))
  for (;;) {
    const stored = await retryWhileElecting(() => storedFingerprint(kv, mine[0]!))
    if (stored.fingerprint === mine[0]) return
    if (!mine.includes(stored.fingerprint)) {
      throw new ClusterError(CLUSTER_ERRORS.CLUSTER_SECRETS_KEY_MISMATCH,
        `BEACON_SECRETS_KEY of this node is not the cluster ${cluster}'s (every node must have the same; the cluster's key has the fingerprint ${stored.fingerprint}, this node's ${mine.join(', ')})`)
    }
    try {
      await kv.update(SECRETS_KEY_KEY, mine[0]!, stored.revision)
      return
    } catch (error) {
      if (!isCompareAndSetRefusal(error)) throw error
    }
  }
}

/** The cluster's fingerprint and its revision; `first` becomes it when there is none. */
async function storedFingerprint (kv: KV, first: string): Promise<{ fingerprint: string, revision: number }> {
  try {
    return { fingerprint: first, revision: await kv.create(SECRETS_KEY_KEY, first) }
  } catch (error) {
    const entry = await kv.get(SECRETS_KEY_KEY)
    if (entry === null || entry.operation !== 'PUT') throw error
    return { fingerprint: entry.string(), revision: entry.revision }
  }
}
