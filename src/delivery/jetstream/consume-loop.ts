// A durable pull consumer consumed for as long as its owner runs: the delivery consumers (consumer.ts)
// and a node's consumers of the cluster's node streams (node-stream.ts: outcomes, erasures). A consume that ends (an error, a lost consumer)
// starts again, pausing 100 ms doubling to 5 s (from 100 ms again after a run of 30 s); a stream or
// consumer found missing (a server back without its store) is created again by `ensureSoon`.

import type { ConsumerMessages, JetStreamClient, JsMsg } from '@nats-io/jetstream'
import type { Clock } from '../../clock.js'
import { CONSUME_RESTART_DELAY_MAX_MS, CONSUME_RESTART_DELAY_MIN_MS, CONSUME_RUN_RESET_MS } from '../limits.js'
import type { QueueLogger } from './options.js'
import { apiErrorCode, CONSUMER_NOT_FOUND, STREAM_NOT_FOUND } from './stream-setup.js'
import { sleep } from './wait.js'

export interface ConsumeLoop {
  js: JetStreamClient
  clock: Clock
  log: QueueLogger
  stream: string
  consumer: string
  pullMessagesMax: number
  /** Names the consumer in log lines ('delivery', 'outcome', 'erasure'). */
  what: string
  /** The consumes running now: the owner closes them to stop. */
  running: Set<ConsumerMessages>
  stopped: () => boolean
  /** The stream or the consumer is missing: create them again, in the background. */
  ensureSoon: () => void
  onMessage: (msg: JsMsg) => void
}

/** Pull until `loop.stopped()`: resolves once it is and the running consume ended. */
export async function consumeForever (loop: ConsumeLoop): Promise<void> {
  let backoffMs = CONSUME_RESTART_DELAY_MIN_MS
  while (!loop.stopped()) {
    const startedMs = loop.clock.nowMs()
    let running: ConsumerMessages | null = null
    try {
      const consumer = await loop.js.consumers.get(loop.stream, loop.consumer)
      if (loop.stopped()) break
      const messages = await consumer.consume({ max_messages: loop.pullMessagesMax, callback: loop.onMessage })
      running = messages
      loop.running.add(messages)
      void watchConsumer(loop, messages)
      const ended = await messages.closed()
      if (loop.stopped()) break
      if (ended instanceof Error) loop.log.warn({ err: ended }, `the JetStream ${loop.what} consumer stopped; restarting it`)
      else loop.log.warn({}, `the JetStream ${loop.what} consumer ended; restarting it`)
    } catch (error) {
      if (loop.stopped()) break
      loop.log.warn({ err: error }, `could not pull from the JetStream ${loop.what} consumer; retrying`)
      if (apiErrorCode(error) === STREAM_NOT_FOUND || apiErrorCode(error) === CONSUMER_NOT_FOUND) loop.ensureSoon()
    } finally {
      if (running !== null) loop.running.delete(running)
    }
    if (loop.clock.nowMs() - startedMs > CONSUME_RUN_RESET_MS) backoffMs = CONSUME_RESTART_DELAY_MIN_MS
    await sleep(backoffMs)
    backoffMs = Math.min(backoffMs * 2, CONSUME_RESTART_DELAY_MAX_MS)
  }
}

/** A consumer or stream that vanished (a server that lost its store) is created again. */
async function watchConsumer (loop: ConsumeLoop, messages: ConsumerMessages): Promise<void> {
  try {
    for await (const status of messages.status()) {
      if (status.type === 'consumer_not_found' || status.type === 'stream_not_found' || status.type === 'consumer_deleted') {
        loop.log.warn({ status: status.type }, `the JetStream ${loop.what} consumer is missing; creating it again`)
        loop.ensureSoon()
      }
    }
  } catch {}
}
