// What a JetStream message's reply subject tells, read without building the whole DeliveryInfo:
// `$JS.ACK.<stream>.<consumer>.<count>.<stream seq>.…` (9 tokens) or
// `$JS.ACK.<domain>.<hash>.<stream>.<consumer>.<count>.<stream seq>.…` (11 or 12 tokens).

import type { JsMsg } from '@nats-io/jetstream'

/** The delivery count of a JetStream message. */
export function deliveryCountOf (msg: JsMsg): number {
  return ackToken(msg, 0) || msg.info.deliveryCount
}

/** The stream sequence of a JetStream message (0 when the reply subject is not one). */
export function streamSeqOf (msg: JsMsg): number {
  return ackToken(msg, 1)
}

/** The positive whole number at `offset` tokens after the delivery count in the reply subject, or 0. */
function ackToken (msg: JsMsg, offset: number): number {
  // JsMsg does not declare it; the message nats.js hands out has it.
  const reply = (msg as unknown as { reply?: unknown }).reply
  if (typeof reply !== 'string') return 0
  let dots = 0
  for (let i = reply.indexOf('.'); i !== -1; i = reply.indexOf('.', i + 1)) dots++
  const index = dots === 8 ? 4 : dots === 10 || dots === 11 ? 6 : -1
  if (index === -1) return 0
  let start = 0
  for (let i = 0; i < index + offset; i++) start = reply.indexOf('.', start) + 1
  const value = Number(reply.slice(start, reply.indexOf('.', start)))
  return Number.isInteger(value) && value > 0 ? value : 0
}
