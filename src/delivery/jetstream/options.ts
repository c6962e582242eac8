// The settings of the JetStream transport, and their defaults.

import type { Clock } from '../../clock.js'

/** What the queue logs through (pino's shape). */
export interface QueueLogger {
  debug (obj: object, msg?: string): void
  info (obj: object, msg?: string): void
  warn (obj: object, msg?: string): void
  error (obj: object, msg?: string): void
}

import type { NatsAuth } from '../../config.js'

export interface JetStreamQueueOptions {
  /** One or more nats:// or tls:// URLs, comma-separated. */
  url: string
  /** Credentials and TLS files (BEACON_NATS_USER …); default: none beyond the URL's. */
  access?: NatsAuth
  streamName?: string
  subjectPrefix?: string
  /** The durable consumer every node pulls from. */
  consumerName?: string
  /** The stream's duplicate window: re-publishes within it are absorbed. Default 2 minutes. */
  duplicateWindowMs?: number
  /** Unacked records of a node that stopped heartbeating come back after this. Default 30 s. */
  ackWaitMs?: number
  /** Messages handed out and not yet acked, over every node (the main consumer's max_ack_pending). */
  ackPendingMax?: number
  /** Messages one pull asks for (the local buffer). */
  pullMessagesMax?: number
  /** PubAcks awaited at once. */
  publishInFlightMax?: number
  /** A publish without a PubAck after this is sent again (same message id). */
  publishTimeoutMs?: number
  /** publish() rejects when its records are not all stored after this long (NATS away). */
  publishGiveUpMs?: number
  /** A record the local workers could not take now (feed answered 'busy') comes back after this. */
  feedRetryDelayMs?: number
  /**
   * A record of a webhook this node does not know (feed answered 'gone': deleted, or not yet known
   * here) is handed out again this many times, feedRetryDelayMs × delivery count apart, then dropped
   * from the stream (the record stays in its node's store, replayable).
   */
  goneRetriesMax?: number
  /** Records of messages this node published and did not consume yet, kept to feed without decoding. */
  publishedCacheRecordsMax?: number
  /**
   * Prefixed to message ids, for clusters where record ids are per node (an outbox seq): each node's
   * ids must not absorb another's. Empty (default): the record id alone.
   */
  nodeId?: string
  /**
   * Cluster mode: the outcome stream of the cluster (outcome-stream.ts), where attempts' outcomes are
   * stored for the node holding their records, and this node reads those of its own records.
   */
  outcomes?: { cluster: string, holder: string, replicas: number } | null
  /**
   * Cluster mode: the erasure stream of the cluster (erasure-stream.ts), where an erasure of a person's
   * delivery records is stored for every node, read by this node through its consumer `node`.
   */
  erasures?: { cluster: string, node: string, replicas: number } | null
  /** The NATS connection name (monitoring). */
  name?: string
  /** Told when the connection goes down or comes back (readiness, metrics); told `true` at start. */
  onConnection?: (connected: boolean) => void
  log?: QueueLogger
  /** Epoch time: due times travel between nodes in a header. Default the system clock. */
  clock?: Clock
}

export const JETSTREAM_DEFAULTS = {
  streamName: 'BEACON_DELIVERIES',
  subjectPrefix: 'beacon.deliveries',
  consumerName: 'beacon-delivery',
  duplicateWindowMs: 120_000,
  ackWaitMs: 30_000,
  // Messages, not records: with messages of up to PUBLISH_RECORDS_MAX records, a node can be handed
  // more than a worker holds (DELIVERY_LIMITS.queueItemsMaxDefault); those are handed back one by one
  // (docs/webhooks.md, known limit).
  ackPendingMax: 10_000,
  pullMessagesMax: 1_000,
  publishInFlightMax: 4_096,
  publishTimeoutMs: 5_000,
  publishGiveUpMs: 30_000,
  feedRetryDelayMs: 5_000,
  goneRetriesMax: 5,
  publishedCacheRecordsMax: 20_000,
} as const
