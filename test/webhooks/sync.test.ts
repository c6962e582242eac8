import { expect } from 'chai'
import {
  attemptRecord, deliverSync, DeliveryWorker, retryDelayMs, Sender, type AttemptRecord, type DeliveryItem,
} from '../../src/webhooks/index.js'
import { compiled, item, ManualClock, ManualScheduler, settle, startReceiver, waitFor, type Receiver } from './helpers.js'

describe('deliverSync', () => {
  let sender: Sender
  let receiver: Receiver | null = null
  beforeEach(() => { sender = new Sender({ allowPrivate: true }) })
  afterEach(async () => {
    await sender.close()
    await receiver?.close()
    receiver = null
  })

  it('makes the call right away and reports it delivered', async () => {
    receiver = await startReceiver()
    const one = item()
    const result = await deliverSync(sender, compiled(receiver.url, { delivery: { mode: 'sync' } }), [one])
    expect(result).to.include({ outcome: 'delivered', status: 200, deliveryId: one.id })
    expect(receiver.requests).to.have.length(1)
  })

  it('never throws and answers within about timeoutMs when the receiver hangs; async retry then delivers with the same webhook-id', async () => {
    let hang = true
    receiver = await startReceiver(() => hang ? 'hang' : { status: 200 })
    const hook = compiled(receiver.url, { delivery: { mode: 'sync', timeoutMs: 5000 } })
    const one = item()
    const started = Date.now()
    const result = await deliverSync(sender, hook, [one], 250)
    expect(Date.now() - started).to.be.below(1000)
    expect(result).to.include({ outcome: 'retry', errorCode: 'timeout', deliveryId: one.id })

    // The fallback: hand the items to async delivery as attempt 2 with the sync attempt as history.
    hang = false
    const clock = new ManualClock()
    const dead: { items: DeliveryItem[], attempts: AttemptRecord[] }[] = []
    const delivered: DeliveryItem[][] = []
    const scheduler = new ManualScheduler(clock)
    const worker = new DeliveryWorker({
      webhook: hook,
      sender,
      clock,
      scheduler,
      onDelivered: (items) => delivered.push(items),
      onRetry: () => {},
      onDead: (items, attempts) => dead.push({ items, attempts }),
    })
    const delayMs = result.retryAfterMs ?? retryDelayMs(1, 0.5)
    worker.enqueue([one], 2, [attemptRecord(result)], clock.nowMs() + delayMs)
    await settle(20)
    expect(receiver.requests).to.have.length(1)
    scheduler.advance(delayMs)
    await waitFor(() => delivered.length === 1)
    expect(dead).to.have.length(0)
    expect(receiver.requests.map(r => r.headers['webhook-id'])).to.deep.equal([one.id, one.id])
  })

  it('reports a 4xx as terminal without throwing', async () => {
    receiver = await startReceiver(() => ({ status: 401, body: 'who are you' }))
    const result = await deliverSync(sender, compiled(receiver.url, { delivery: { mode: 'sync' } }), [item()])
    expect(result).to.include({ outcome: 'terminal', status: 401, error: 'HTTP 401: who are you' })
  })

  it('reports a call with no items or too many as terminal without sending', async () => {
    receiver = await startReceiver()
    const hook = compiled(receiver.url, { delivery: { mode: 'sync' } })
    expect(await deliverSync(sender, hook, [])).to.include({ outcome: 'terminal', errorCode: 'invalid_request' })
    expect(await deliverSync(sender, hook, [item(), item()])).to.include({ outcome: 'terminal', errorCode: 'invalid_request' })
    expect(receiver.requests).to.have.length(0)
  })
})
