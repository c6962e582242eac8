// Cluster mode: the stream that carries the erasure of a person's delivery records to every node
// (cluster-erasures.ts says when it is written and how a node applies it). One stream per cluster,
// `BEACON_ERASURES_<cluster>`, file storage, BEACON_REPLICAS replicas, one subject:
// `beacon.<cluster>.erasure`; a message is one erasure (account, profile ids, visitor ids, and the
// process that wrote it), at most ERASURE_VISITORS_MAX visitor ids (a person with more goes as several).
//
// Fan-out, not a work queue: limits retention, so a message stays for every node to read, whoever
// acked it. Bounded: an erasure older than ERASURES_MAX_AGE_MS (30 days) goes (a node away for longer
// never gets it), and past ERASURES_MAX_BYTES (256 MiB) the oldest go first. Each node reads it through
// its own durable consumer named by its data folder id (node-stream.ts), from the stream's first
// message when the consumer is new: what is stored while it is down waits for it.

import { RetentionPolicy } from '@nats-io/jetstream'
import { nuid } from '@nats-io/transport-node'
import { Packr } from 'msgpackr'
import {
  ERASURE_VISITORS_MAX, ERASURES_ACK_PENDING_MAX, ERASURES_ACK_WAIT_MS, ERASURES_APPLY_MESSAGES_MAX, ERASURES_MAX_AGE_MS, ERASURES_MAX_BYTES,
} from '../limits.js'
import { NodeStream, type NodeStreamOptions } from './node-stream.js'

/** One erasure as it travels. */
export interface ErasureMessage {
  account: string
  profileIds: string[]
  visitorIds: string[]
  /** The process (an id per run) that wrote it, and applied it before its request was answered. */
  origin: string
}

const packr = new Packr({ useRecords: false })

export function erasureStreamName (cluster: string): string {
  return `BEACON_ERASURES_${cluster}`
}

export class ErasureStream extends NodeStream {
  /** This process's id: the `origin` of what it writes. */
  readonly origin = nuid.next()
  private readonly subject: string
  private written = 0

  constructor (options: NodeStreamOptions) {
    const subject = `beacon.${options.cluster}.erasure`
    super(options, {
      streamName: erasureStreamName(options.cluster),
      subjects: [subject],
      filterSubject: subject,
      // Every node reads every message: kept by age and size, not by acks.
      retention: RetentionPolicy.Limits,
      maxAgeMs: ERASURES_MAX_AGE_MS,
      maxBytes: ERASURES_MAX_BYTES,
      ackWaitMs: ERASURES_ACK_WAIT_MS,
      ackPendingMax: ERASURES_ACK_PENDING_MAX,
      applyMessagesMax: ERASURES_APPLY_MESSAGES_MAX,
      what: 'erasure',
    })
    this.subject = subject
  }

  /** Stores the erasure (as messages of at most ERASURE_VISITORS_MAX visitor ids): resolves once JetStream stored all of it. */
  async publish (account: string, profileIds: readonly string[], visitorIds: readonly string[]): Promise<void> {
    const parts: Array<Promise<void>> = []
    for (let i = 0; i === 0 || i < visitorIds.length; i += ERASURE_VISITORS_MAX) {
      const message: ErasureMessage = { account, profileIds: [...profileIds], visitorIds: visitorIds.slice(i, i + ERASURE_VISITORS_MAX), origin: this.origin }
      parts.push(this.publishTo(this.subject, packr.pack(message), `${this.origin}.${(this.written++).toString(36)}`, 'an erasure was not stored by JetStream'))
    }
    await Promise.all(parts)
  }
}

/** The erasure a message carries, or null for one that is not. */
export function decodeErasure (data: Uint8Array): ErasureMessage | null {
  let value: unknown
  try {
    value = packr.unpack(data)
  } catch {
    return null
  }
  const m = value as ErasureMessage | null
  const strings = (list: unknown): boolean => Array.isArray(list) && list.every(item => typeof item === 'string')
  return typeof m === 'object' && m !== null && typeof m.account === 'string' && typeof m.origin === 'string' && strings(m.profileIds) && strings(m.visitorIds) ? m : null
}
