// The contract between the hub and the place delivery records wait between the relay and the
// delivery workers: in-process (embedded-queue.ts: the deliveries db is the queue) or a JetStream
// stream shared by every node (jetstream/queue.ts).

import type { DeliveryOutcome, DeliveryRecord } from './record.js'

/**
 * What feeding a record to the local workers answers: 'taken' (a worker has it), 'busy' (its worker
 * is full: hand it out again later) or 'gone' (no such webhook here).
 */
export type FeedAnswer = 'taken' | 'busy' | 'gone'
export type Feed = (record: DeliveryRecord) => FeedAnswer

export interface DeliveryQueue {
  /**
   * Whether the workers keep their retries (the group of a batch together, so its webhook-id stays
   * the same on every attempt), or the queue hands each retried record back when its delay has passed.
   */
  readonly retriesInMemory: boolean
  /** Start handing records to `feed` (the local workers): those waiting from before, then new ones. */
  start (feed: Feed): Promise<void>
  /**
   * Durably take new records; the relay removes their outbox rows once this resolves. `encoded`, when
   * given, holds each record's bytes (encodeRecord): a queue that sends bytes need not encode again.
   */
  publish (records: readonly DeliveryRecord[], encoded?: readonly Uint8Array[]): Promise<void>
  /**
   * An attempt of a record fed earlier ended: let it go, or keep it for another attempt after delayMs.
   * For a retry, `record` is as settled (its next attempt and history); otherwise as it was fed.
   */
  settle (record: DeliveryRecord, outcome: DeliveryOutcome, delayMs: number): void
  stop (): Promise<void>
}
