// deliverSync: the call of a "sync" webhook, made while the triggering request is handled. It never
// throws and never takes longer than timeoutMs (plus a few ms): the triggering request must not fail
// or stall because a receiver does. The caller then:
// - 'delivered': done;
// - 'retry': hands the same items to async delivery as attempt 2, with [attemptRecord(result)] as
//   history, not before retryAfterMs ?? retryDelayMs(1, random) from now:
//   worker.enqueue(items, 2, [attemptRecord(result)], nowMs + delayMs) (or a nak with that delay);
// - 'terminal': dead-letters them with that one attempt record.

import { systemClock, type Clock } from '../clock.js'
import type { CompiledWebhook } from './compile.js'
import { DELIVERY_LIMITS } from './limits.js'
import type { AttemptSender } from './worker.js'
import type { DeliveryItem, SendResult } from './types.js'
import { batchIdOf } from './batch-id.js'

export async function deliverSync (sender: AttemptSender, webhook: CompiledWebhook, items: readonly DeliveryItem[],
  timeoutMs: number = webhook.timeoutMs, clock: Clock = systemClock): Promise<SendResult> {
  const atMs = clock.nowMs()
  const boundMs = Math.max(1, Math.min(timeoutMs, webhook.timeoutMs))
  let timer: NodeJS.Timeout | undefined
  try {
    if (items.length === 0 || items.length > webhook.batchSize) {
      return { outcome: 'terminal', deliveryId: '', atMs, latencyMs: 0, errorCode: 'invalid_request', error: `A sync call carries 1 to ${webhook.batchSize} items, not ${items.length}.` }
    }
    // The request itself is bounded by its own timer; the race also bounds what runs before it
    // (the DNS check of a target behind a proxy).
    const late = new Promise<SendResult>(resolve => {
      timer = setTimeout(resolve, boundMs + DELIVERY_LIMITS.syncGraceMs, lateResult(items, atMs, boundMs))
    })
    return await Promise.race([sender.sendOnce(webhook, items, boundMs), late])
  } catch (err) {
    return { outcome: 'retry', deliveryId: '', atMs, latencyMs: clock.nowMs() - atMs, errorCode: 'connection', error: String(err).slice(0, DELIVERY_LIMITS.errorExcerptLengthMax) }
  } finally {
    clearTimeout(timer)
  }
}

function lateResult (items: readonly DeliveryItem[], atMs: number, boundMs: number): SendResult {
  return { outcome: 'retry', deliveryId: batchIdOf(items), atMs, latencyMs: boundMs, errorCode: 'timeout', error: `timed out after ${boundMs} ms` }
}
