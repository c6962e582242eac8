// Cluster mode: the stream that carries attempts' outcomes to the node holding their records
// (holder-outcomes.ts says what travels and how a holder applies it). One stream per cluster,
// `BEACON_OUTCOMES_<cluster>`, file storage, BEACON_REPLICAS replicas, one subject per holder:
// `beacon.<cluster>.outcome.<holder>` (the holder's data folder id, the record's `node`).
//
// A work queue: a message goes once its holder acked it (after its LMDB commit), so the stream holds
// only outcomes not applied yet. Bounded: an outcome older than OUTCOMES_MAX_AGE_MS (7 days) goes (a
// holder gone for longer never gets it), and past OUTCOMES_MAX_BYTES (1 GiB, every holder together) the
// oldest go first. Each holder consumes its own subject through a durable consumer named by its data
// folder id (node-stream.ts): what is sent while it is down waits there, and it gets all of it when it
// is back.

import { RetentionPolicy } from '@nats-io/jetstream'
import type { OutcomeTransport } from '../holder-outcomes.js'
import { OUTCOMES_ACK_PENDING_MAX, OUTCOMES_ACK_WAIT_MS, OUTCOMES_APPLY_MESSAGES_MAX, OUTCOMES_MAX_AGE_MS, OUTCOMES_MAX_BYTES } from '../limits.js'
import { isToken, NodeStream, type NodeStreamOptions } from './node-stream.js'

export interface OutcomeStreamOptions extends Omit<NodeStreamOptions, 'node'> {
  /** This node's data folder id: the subject it consumes, its consumer's name. */
  holder: string
}

export function outcomeStreamName (cluster: string): string {
  return `BEACON_OUTCOMES_${cluster}`
}

export class OutcomeStream extends NodeStream implements OutcomeTransport {
  private readonly subjectPrefix: string

  constructor (options: OutcomeStreamOptions) {
    const subjectPrefix = `beacon.${options.cluster}.outcome`
    super({ ...options, node: options.holder }, {
      streamName: outcomeStreamName(options.cluster),
      subjects: [`${subjectPrefix}.*`],
      filterSubject: `${subjectPrefix}.${options.holder}`,
      // A work queue: a message goes once its holder acked it.
      retention: RetentionPolicy.Workqueue,
      maxAgeMs: OUTCOMES_MAX_AGE_MS,
      maxBytes: OUTCOMES_MAX_BYTES,
      ackWaitMs: OUTCOMES_ACK_WAIT_MS,
      ackPendingMax: OUTCOMES_ACK_PENDING_MAX,
      applyMessagesMax: OUTCOMES_APPLY_MESSAGES_MAX,
      what: 'outcome',
    })
    this.subjectPrefix = subjectPrefix
  }

  subjectOf (holder: string): string {
    return `${this.subjectPrefix}.${holder}`
  }

  /** Stores one message of outcomes for `holder`: resolves once JetStream stored it; `id` makes a resend a duplicate. */
  publish (holder: string, data: Uint8Array, id: string): Promise<void> {
    if (!isToken(holder)) return Promise.reject(new Error(`not a holder id: ${JSON.stringify(holder)}`))
    return this.publishTo(this.subjectOf(holder), data, id, `outcomes for ${holder} were not stored by JetStream`)
  }
}
