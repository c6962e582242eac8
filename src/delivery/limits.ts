// The limits of delivery (the hub and the JetStream transport), each a named constant: the noun
// first, then MAX or MIN, then the unit. The worker's and sender's own limits are DELIVERY_LIMITS
// (src/webhooks/limits.ts), next to the configuration limits they are checked against.

/** Outbox rows relayed per pass. */
export const RELAY_BATCH_MAX = 500
/** Relay passes under way at once (waiting for their commit and publish while the next one builds). */
export const RELAY_PASSES_MAX = 4
/** Records listed per page at most, and removed per page by an erasure. */
export const LIST_PAGE_MAX = 500
/** Cluster mode: a node's page of a cluster-wide listing (256 KiB), and a listing's cursor (4,096 characters). */
export { CLUSTER_CURSOR_LENGTH_MAX, CLUSTER_PAGE_SIZE_MAX_BYTES } from '../cluster/node-listing.js'
/**
 * Cluster mode: outcomes of records another node holds are stored for it in the outcome stream
 * (jetstream/outcome-stream.ts) in messages of at most this many (and CLUSTER_PAGE_SIZE_MAX_BYTES),
 * gathered for HOLDER_OUTCOMES_DELAY_MS after the first: one JetStream publish for a batch, not one per outcome.
 */
export const HOLDER_OUTCOMES_BATCH_MAX = 200
export const HOLDER_OUTCOMES_DELAY_MS = 20
/** Cluster mode: a batch JetStream did not store (NATS away) is published again after 1 s, then 2, 4, up to 5 s, until the node stops. */
export const HOLDER_OUTCOMES_RETRY_DELAY_MIN_MS = 1000
export const HOLDER_OUTCOMES_RETRY_DELAY_MAX_MS = 5000
/** Stopping waits this long at most for the outcomes gathered so far to be stored (their deliveries are acked then; the others are attempted again). */
export const STOP_OUTCOMES_WAIT_MAX_MS = 5000
/**
 * Cluster mode: the outcome stream keeps an outcome its holder has not taken for this long at most (a
 * holder gone for longer loses it: its record stays as it was there), and this many bytes at most
 * over every holder (past it the oldest go first).
 */
export const OUTCOMES_MAX_AGE_MS = 7 * 86_400_000
export const OUTCOMES_MAX_BYTES = 1024 * 1024 * 1024
/** Cluster mode: a holder's outcome messages handed out and not yet acked (each up to HOLDER_OUTCOMES_BATCH_MAX outcomes), and how long before they come back. */
export const OUTCOMES_ACK_PENDING_MAX = 1000
export const OUTCOMES_ACK_WAIT_MS = 10_000
/** Cluster mode: a holder applies at most this many outcome messages in one write transaction. */
export const OUTCOMES_APPLY_MESSAGES_MAX = 50
/**
 * Cluster mode: the erasure stream (jetstream/erasure-stream.ts) keeps an erasure for this long (a node
 * away for longer misses it: its records of that person stay), and this many bytes at most (past it
 * the oldest go first, whatever their age).
 */
export const ERASURES_MAX_AGE_MS = 30 * 86_400_000
export const ERASURES_MAX_BYTES = 256 * 1024 * 1024
/**
 * Cluster mode: a node's erasure messages handed out and not yet acked, how long before they come back
 * (each is a scan of the account's records), and how many one apply takes.
 */
export const ERASURES_ACK_PENDING_MAX = 100
export const ERASURES_ACK_WAIT_MS = 60_000
export const ERASURES_APPLY_MESSAGES_MAX = 10
/** Cluster mode: visitor ids per erasure message at most (ids are up to 256 characters: under 1 MB, NATS's default max payload). */
export const ERASURE_VISITORS_MAX = 2000
/** Cluster mode: an erase request waits this long at most for its erasure to be stored, then answers 503 unavailable. */
export const ERASURE_STORE_WAIT_MAX_MS = 5000
/** Schedule runs create their records in pages of this many members. */
export const SCHEDULE_PAGE_MAX = 1000
/** A failed relay pass (the queue refused: NATS away) is tried again after 1 s, then 2, 4, … up to 30 s. */
export const RELAY_RETRY_DELAY_MIN_MS = 1000
export const RELAY_RETRY_DELAY_MAX_MS = 30_000
/** How often delivered records past their retention are deleted, and how many at most a pass. */
export const PRUNE_INTERVAL_MS = 60_000
export const PRUNE_BATCH_MAX = 10_000
/** Delivered records older than this (by their last update) are deleted, unless configured otherwise. */
export const RETENTION_DEFAULT_MS = 7 * 86_400_000
/**
 * The hub's own writes (outcome rows, and the removal of relayed outbox rows) wait at most this long
 * to go to LMDB together, in one transaction, or go with the next relay pass's. Every commit costs a
 * sync of ten or so pages: at batchSize 1, one a millisecond took a third of the node's CPU.
 */
export const HUB_WRITE_DELAY_MS = 20
/**
 * Appended outbox rows wait this long for more before the relay reads them (one pass, one commit, for
 * all). Rows whose sync webhooks a request waits for are relayed at once.
 */
export const RELAY_DELAY_MS = 10
/** Appended outbox rows kept in memory for the relay at most (past that, it decodes them from LMDB). */
export const APPENDED_ROWS_MAX = 5000
/** A full worker queue (embedded) is offered its records left pending again after this. */
export const REFILL_DELAY_MS = 250
/** How often due schedules are looked for. */
export const SCHEDULE_INTERVAL_MS = 1000

// The JetStream transport (jetstream/). Its configurable settings and their defaults are
// JETSTREAM_DEFAULTS (jetstream/options.ts).

/** A message carries at most this many records, and this many bytes of them (max_payload is 1 MiB by default). */
export const PUBLISH_RECORDS_MAX = 100
export const PUBLISH_SIZE_MAX_BYTES = 256 * 1024
/** Subjects of webhooks kept worked out at most (the cache is cleared past it). */
export const SUBJECTS_CACHED_MAX = 10_000
/**
 * What a stopping node hands back is nak'd with this delay: a plain nak is redelivered at once, and
 * the server may hand it straight back to this node's pull request that is still open while the
 * connection drains, where it would wait out ack_wait. Measured: 1 record in ~320 took 30 s to come
 * back to the next start with a plain nak (test/ops/shutdown.test.ts).
 */
export const STOP_NAK_DELAY_MS = 2_000
/** A PubAck at most this long is read without a JSON parse. */
export const PUBACK_SIZE_MAX_BYTES = 512
/** A publish the server answered with an error is sent again after this at most (or half the publish timeout). */
export const PUBACK_RESEND_DELAY_MAX_MS = 1000
/** The queue's tick (resends, heartbeats) runs a quarter of the publish timeout or of ack_wait apart, within these. */
export const TICK_INTERVAL_MIN_MS = 50
export const TICK_INTERVAL_MAX_MS = 1000
/**
 * A record's retry state (as last settled, and the hand-outs given back untried) is forgotten this
 * long after it could last come back (its delay plus twice ack_wait).
 */
export const RETRY_STATE_MARGIN_MS = 60_000
/** A consume loop that ended starts again after 100 ms, doubling up to 5 s; one that ran 30 s starts over from 100 ms. */
export const CONSUME_RESTART_DELAY_MIN_MS = 100
export const CONSUME_RESTART_DELAY_MAX_MS = 5_000
export const CONSUME_RUN_RESET_MS = 30_000
/** Checking the stream and consumers in the background: tried again after 250 ms, doubling up to 5 s; at most once a second. */
export const ENSURE_RETRY_DELAY_MIN_MS = 250
export const ENSURE_RETRY_DELAY_MAX_MS = 5_000
export const ENSURE_INTERVAL_MIN_MS = 1000
/** How long a start asks again when the delivery stream's setup times out (StreamSetup.ensureAtStart). */
export const ENSURE_AT_START_MAX_MS = 30_000
/**
 * Stopping waits this long at most for the consumes to close, for a stream check under way to end,
 * for the connection to drain, for its status loop to end.
 */
export const STOP_CONSUMES_WAIT_MAX_MS = 2_000
export const STOP_ENSURE_WAIT_MAX_MS = 2_000
export const STOP_DRAIN_WAIT_MAX_MS = 5_000
export const STOP_STATUS_WAIT_MAX_MS = 1_000
/** The NATS connection: reconnect forever, 250 ms apart plus up to 250 ms; ping every 10 s, give up after 3 unanswered. */
export const NATS_RECONNECT_DELAY_MS = 250
export const NATS_RECONNECT_JITTER_MS = 250
export const NATS_PING_INTERVAL_MS = 10_000
export const NATS_PINGS_OUT_MAX = 3
