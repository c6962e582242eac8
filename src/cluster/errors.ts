// Errors of the cluster building blocks, one class per stable code; callers switch on `err.code`.
// None of them reaches an HTTP client as such: the routing layer turns a lost partition into a retry at
// the new owner or a 503 `unavailable`.

import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream'

export const CLUSTER_ERRORS = {
  /** The partition's changelog moved past this writer: another node owns it now. Stop writing it. */
  CLUSTER_FENCED: 'CLUSTER_FENCED',
  /** JetStream did not confirm the append within the time limit; its outcome is unknown. Drop the partition. */
  CLUSTER_CHANGELOG_UNAVAILABLE: 'CLUSTER_CHANGELOG_UNAVAILABLE',
  /** This node holds no claim on the partition's changelog (never claimed, or dropped). */
  CLUSTER_NOT_CLAIMED: 'CLUSTER_NOT_CLAIMED',
  /** One entry, or one snapshot, is larger than a changelog message may be. */
  CLUSTER_ENTRY_TOO_LARGE: 'CLUSTER_ENTRY_TOO_LARGE',
  /** The lease's compare-and-set was refused or the lease ran out: another node may hold it now. */
  CLUSTER_LEASE_LOST: 'CLUSTER_LEASE_LOST',
  /** Another live node has this node's id (its heartbeat key exists): this one must not start. */
  CLUSTER_NODE_ID_IN_USE: 'CLUSTER_NODE_ID_IN_USE',
  /** The cluster was created with another number of partitions than this node was started with. */
  CLUSTER_PARTITIONS_MISMATCH: 'CLUSTER_PARTITIONS_MISMATCH',
  /** None of this node's BEACON_SECRETS_KEY keys is the cluster's (its fingerprint in the cluster meta bucket). */
  CLUSTER_SECRETS_KEY_MISMATCH: 'CLUSTER_SECRETS_KEY_MISMATCH',
  /** A constructor or function got an option it cannot work with. */
  CLUSTER_INVALID_ARGUMENT: 'CLUSTER_INVALID_ARGUMENT',
} as const

export type ClusterErrorCode = typeof CLUSTER_ERRORS[keyof typeof CLUSTER_ERRORS]

export class ClusterError extends Error {
  readonly code: ClusterErrorCode
  readonly partition: number | null

  constructor (code: ClusterErrorCode, message: string, partition: number | null = null, options?: ErrorOptions) {
    super(message, options)
    this.name = 'ClusterError'
    this.code = code
    this.partition = partition
  }
}

/** A refused append or snapshot: the owner must drop the partition at once. */
export class Fenced extends ClusterError {
  /** The partition's last sequence as the server reported it when refusing, if it did. */
  readonly actualSeq: number | null

  constructor (partition: number, message: string, actualSeq: number | null = null, options?: ErrorOptions) {
    super(CLUSTER_ERRORS.CLUSTER_FENCED, message, partition, options)
    this.name = 'Fenced'
    this.actualSeq = actualSeq
  }
}

export function invalidArgument (name: string, why: string): ClusterError {
  return new ClusterError(CLUSTER_ERRORS.CLUSTER_INVALID_ARGUMENT, `${name} ${why}`)
}

export function positiveInteger (name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw invalidArgument(name, `must be a positive integer (got ${String(value)})`)
  return value
}

/**
 * A put expecting a key's last sequence (a compare-and-set: `previousSeq`, 0 for "no such key") refused
 * because the key moved on: JetStream's "wrong last sequence", as an API error or, from the KV client,
 * as a plain error carrying that text.
 */
export function isCompareAndSetRefusal (error: unknown): boolean {
  if (error instanceof JetStreamApiError) {
    return error.code === JetStreamApiCodes.StreamWrongLastSequence || error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown
  }
  return error instanceof Error && /wrong last sequence/.test(error.message)
}
