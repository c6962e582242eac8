// The records of messages this node published, by stream sequence: when this node's consumer gets
// the message, it feeds them as they are instead of decoding the bytes (most messages are consumed
// where they were published). They are fed only for a message of the very same bytes, so a sequence
// number given again (a stream made again) cannot feed them for another message. At most
// recordsMax records are kept, the oldest going first (with several nodes, the messages another
// node consumed); a message not kept, or delivered before its PubAck came, is decoded.

import type { JsMsg } from '@nats-io/jetstream'
import type { DeliveryRecord } from '../record.js'
import { streamSeqOf } from './ack-reply.js'
import { pubAckSeqOf, type OutgoingMessage } from './publisher.js'

interface Published {
  data: Uint8Array
  records: DeliveryRecord[]
}

export class PublishedCache {
  private readonly recordsMax: number
  private readonly published = new Map<number, Published>()
  private records = 0

  constructor (recordsMax: number) {
    this.recordsMax = recordsMax
  }

  get size (): number {
    return this.published.size
  }

  /** Keep what a stored message carried, under the stream sequence its PubAck names. */
  keep (pubAck: Uint8Array, message: OutgoingMessage): void {
    // A handed-back record waits in the retry consumer (often long): not kept, it would push out fresh
    // ones. A message of no records (delivery outcomes for their holder: outcome-stream.ts) is not for the consumer.
    if (message.dueAtMs > 0 || message.records.length === 0) return
    const seq = pubAckSeqOf(pubAck)
    if (seq === 0 || this.published.has(seq) || message.records.length > this.recordsMax) return
    while (this.records + message.records.length > this.recordsMax) {
      const [oldest, kept] = this.published.entries().next().value as [number, Published]
      this.published.delete(oldest)
      this.records -= kept.records.length
    }
    this.published.set(seq, { data: message.data, records: message.records })
    this.records += message.records.length
  }

  /** The records of a message as published here, or undefined. */
  take (msg: JsMsg): DeliveryRecord[] | undefined {
    const seq = streamSeqOf(msg)
    const kept = seq === 0 ? undefined : this.published.get(seq)
    if (kept === undefined) return undefined
    this.published.delete(seq)
    this.records -= kept.records.length
    return Buffer.from(kept.data.buffer, kept.data.byteOffset, kept.data.byteLength).equals(msg.data) ? kept.records : undefined
  }

  /** A stream made again (a server back without its store) numbers its messages from 1 again. */
  clear (): void {
    this.published.clear()
    this.records = 0
  }
}
