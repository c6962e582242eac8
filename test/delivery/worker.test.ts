import { expect } from 'chai'
import { Sender, WebhookError, type AttemptRecord, type CompiledWebhook, type DeliveryItem } from '../../src/webhooks/index.js'
import { DeliveryWorker, type DeliveryWorkerOptions, type NextAttempt } from '../../src/delivery/worker.js'
import { ManualClock } from '../helpers/clock.js'
import { compiled, item, ManualScheduler, settle, startReceiver, waitFor, type Receiver, type Responder } from '../webhooks/helpers.js'

interface Recorded {
  delivered: { items: DeliveryItem[], record: AttemptRecord }[]
  retries: { items: DeliveryItem[], delayMs: number, record: AttemptRecord, next: NextAttempt }[]
  dead: { items: DeliveryItem[], attempts: AttemptRecord[] }[]
  errors: unknown[]
}

describe('DeliveryWorker', () => {
  let clock: ManualClock
  let scheduler: ManualScheduler
  let sender: Sender
  let receiver: Receiver | null
  let recorded: Recorded
  /** Clock time at which the receiver saw each request. */
  let seenAtMs: number[]

  beforeEach(() => {
    clock = new ManualClock()
    scheduler = new ManualScheduler(clock)
    sender = new Sender({ allowPrivate: true, clock })
    receiver = null
    recorded = { delivered: [], retries: [], dead: [], errors: [] }
    seenAtMs = []
  })
  afterEach(async () => {
    await sender.close()
    await receiver?.close()
  })

  async function receive (respond: Responder = () => ({ status: 200 })): Promise<Receiver> {
    receiver = await startReceiver((req, i) => {
      seenAtMs.push(clock.ms)
      return respond(req, i)
    })
    return receiver
  }

  function worker (webhook: CompiledWebhook, options: Partial<DeliveryWorkerOptions> = {}): DeliveryWorker {
    return new DeliveryWorker({
      webhook,
      sender,
      clock,
      scheduler,
      random: () => 0,
      onDelivered: (items, record) => recorded.delivered.push({ items, record }),
      onRetry: (items, delayMs, record, next) => recorded.retries.push({ items, delayMs, record, next }),
      onDead: (items, attempts) => recorded.dead.push({ items, attempts }),
      onError: (err) => recorded.errors.push(err),
      ...options,
    })
  }

  const now = (): number => clock.ms

  describe('batching', () => {
    it('sends 50 items enqueued together as one request whose body is a JSON array of 50', async () => {
      const r = await receive()
      const w = worker(compiled(r.url, { delivery: { batchSize: 50 } }))
      const items = Array.from({ length: 50 }, () => item({}, now()))
      w.enqueue(items)
      await waitFor(() => recorded.delivered.length === 1)
      expect(r.requests).to.have.length(1)
      expect(JSON.parse(r.requests[0]!.body)).to.have.length(50)
      expect(recorded.delivered[0]!.items.map(i => i.id)).to.deep.equal(items.map(i => i.id))
    })

    it('splits more items than batchSize into full batches and a remainder', async () => {
      const r = await receive()
      const w = worker(compiled(r.url, { delivery: { batchSize: 50 } }))
      w.enqueue(Array.from({ length: 120 }, () => item({}, now())))
      await waitFor(() => recorded.delivered.length === 3)
      expect(r.requests.map(x => (JSON.parse(x.body) as unknown[]).length).sort()).to.deep.equal([20, 50, 50])
    })

    it('sends one single-object request per item with batchSize 1', async () => {
      const r = await receive()
      const w = worker(compiled(r.url))
      w.enqueue([item({}, now()), item({}, now()), item({}, now())])
      await waitFor(() => recorded.delivered.length === 3)
      expect(r.requests.map(x => typeof JSON.parse(x.body))).to.deep.equal(['object', 'object', 'object'])
      expect(r.requests.every(x => !x.body.startsWith('['))).to.equal(true)
    })
  })

  it('holds an item until occurredAtMs + delayMs', async () => {
    const r = await receive()
    const w = worker(compiled(r.url, { delivery: { delayMs: 60_000 } }))
    w.enqueue([item({}, now())])
    w.enqueue([item({}, now() - 60_000)]) // already past its delay
    await waitFor(() => r.requests.length === 1)
    scheduler.advance(59_999)
    await settle(20)
    expect(r.requests).to.have.length(1)
    scheduler.advance(1)
    await waitFor(() => r.requests.length === 2)
    expect(seenAtMs[1]! - seenAtMs[0]!).to.equal(60_000)
  })

  it('starts no more than ratePerSecond requests a second', async () => {
    const r = await receive()
    const w = worker(compiled(r.url, { delivery: { ratePerSecond: 2 } }))
    const start = now()
    w.enqueue(Array.from({ length: 5 }, () => item({}, now())))
    for (let sent = 1; sent <= 5; sent++) {
      await waitFor(() => r.requests.length === sent && w.inFlight === 0)
      scheduler.advance(499)
      await settle(20)
      expect(r.requests, `499 ms after request ${sent}`).to.have.length(sent)
      scheduler.advance(1)
    }
    expect(seenAtMs.map(t => t - start)).to.deep.equal([0, 500, 1000, 1500, 2000])
  })

  it('keeps at most 4 requests in flight', async () => {
    const r = await receive(() => 'hang')
    const w = worker(compiled(r.url))
    w.enqueue(Array.from({ length: 10 }, () => item({}, now())))
    await waitFor(() => r.requests.length === 4)
    await settle(20)
    expect(r.requests).to.have.length(4)
    expect(w.inFlight).to.equal(4)
    expect(w.queued).to.equal(6)
    while (recorded.delivered.length < 10) {
      r.release()
      await settle(5)
    }
    expect(r.requests).to.have.length(10)
  })

  describe('retries', () => {
    it('retries after failures and delivers on the third attempt, with the same webhook-id every time', async () => {
      const r = await receive((_, i) => i < 2 ? { status: 500, body: 'boom' } : { status: 200 })
      const w = worker(compiled(r.url), { retryInMemory: true })
      const one = item({}, now())
      w.enqueue([one])
      await waitFor(() => recorded.retries.length === 1)
      expect(recorded.retries[0]).to.deep.include({ delayMs: 500 })
      expect(recorded.retries[0]!.next.attempt).to.equal(2)
      expect(w.queued).to.equal(1) // held in memory
      scheduler.advance(499)
      await settle(20)
      expect(r.requests).to.have.length(1)
      scheduler.advance(1)
      await waitFor(() => recorded.retries.length === 2)
      expect(recorded.retries[1]!.delayMs).to.equal(2000)
      scheduler.advance(2000)
      await waitFor(() => recorded.delivered.length === 1)
      expect(r.requests.map(x => x.headers['webhook-id'])).to.deep.equal([one.id, one.id, one.id])
      expect(recorded.retries.map(x => x.record.status)).to.deep.equal([500, 500])
      expect(recorded.retries[0]!.record.error).to.equal('HTTP 500: boom')
      expect(recorded.delivered[0]!.record.status).to.equal(200)
      expect(recorded.dead).to.have.length(0)
    })

    it('retries a batch as the same group: same batch id and body on every attempt', async () => {
      let batchAttempts = 0
      const r = await receive((req) => String(req.headers['webhook-id']).startsWith('batch_') && batchAttempts++ < 2 ? { status: 503 } : { status: 200 })
      const w = worker(compiled(r.url, { delivery: { batchSize: 3 } }), { retryInMemory: true })
      w.enqueue([item({}, now()), item({}, now()), item({}, now())])
      await waitFor(() => recorded.retries.length === 1)
      w.enqueue([item({}, now())]) // a newcomer is not merged into the retry group
      scheduler.advance(500)
      await waitFor(() => recorded.retries.length === 2)
      scheduler.advance(2000)
      await waitFor(() => recorded.delivered.length === 2)
      const retried = r.requests.filter(x => String(x.headers['webhook-id']).startsWith('batch_'))
      expect(retried).to.have.length(3)
      expect(new Set(retried.map(x => x.headers['webhook-id'])).size).to.equal(1)
      expect(new Set(retried.map(x => x.body)).size).to.equal(1)
    })

    it('leaves retries to the caller by default: onRetry gives the delay and the next attempt to enqueue', async () => {
      const r = await receive((_, i) => i < 2 ? { status: 502 } : { status: 200 })
      const w = worker(compiled(r.url))
      const one = item({}, now())
      w.enqueue([one])
      for (let n = 1; n <= 2; n++) {
        await waitFor(() => recorded.retries.length === n)
        expect(w.queued).to.equal(0) // the worker holds nothing
        expect(scheduler.pending).to.equal(0)
        const { items, next } = recorded.retries[n - 1]!
        expect(next.attempt).to.equal(n + 1)
        expect(next.history).to.have.length(n)
        w.enqueue(items, next.attempt, next.history)
      }
      await waitFor(() => recorded.delivered.length === 1)
      expect(r.requests.map(x => x.headers['webhook-id'])).to.deep.equal([one.id, one.id, one.id])
    })

    it('honours Retry-After on a 429 instead of the backoff', async () => {
      const r = await receive((_, i) => i === 0 ? { status: 429, headers: { 'retry-after': '30' } } : { status: 200 })
      const w = worker(compiled(r.url), { retryInMemory: true })
      w.enqueue([item({}, now())])
      await waitFor(() => recorded.retries.length === 1)
      expect(recorded.retries[0]!.delayMs).to.equal(30_000)
      scheduler.advance(29_999)
      await settle(20)
      expect(r.requests).to.have.length(1)
      scheduler.advance(1)
      await waitFor(() => recorded.delivered.length === 1)
      expect(seenAtMs[1]! - seenAtMs[0]!).to.equal(30_000)
    })

    it('dead-letters a terminal 4xx after one attempt', async () => {
      const r = await receive(() => ({ status: 422, body: 'bad payload' }))
      const w = worker(compiled(r.url), { retryInMemory: true })
      const one = item({}, now())
      w.enqueue([one])
      await waitFor(() => recorded.dead.length === 1)
      expect(recorded.dead[0]!.items).to.deep.equal([one])
      expect(recorded.dead[0]!.attempts).to.have.length(1)
      expect(recorded.dead[0]!.attempts[0]).to.include({ status: 422, error: 'HTTP 422: bad payload', atMs: now() })
      expect(recorded.retries).to.have.length(0)
      expect(r.requests).to.have.length(1)
      expect(w.queued).to.equal(0)
    })

    it('dead-letters after maxAttempts with every attempt record (time, status, latency, error)', async () => {
      const r = await receive(() => ({ status: 503, body: 'down' }))
      const w = worker(compiled(r.url, { delivery: { maxAttempts: 4 } }), { retryInMemory: true })
      const start = now()
      w.enqueue([item({}, now())])
      for (let n = 1; n < 4; n++) {
        await waitFor(() => recorded.retries.length === n)
        scheduler.advance(recorded.retries[n - 1]!.delayMs)
      }
      await waitFor(() => recorded.dead.length === 1)
      const attempts = recorded.dead[0]!.attempts
      expect(attempts.map(a => a.atMs - start)).to.deep.equal([0, 500, 2500, 10_500])
      for (const a of attempts) {
        expect(a).to.include({ status: 503, error: 'HTTP 503: down' })
        expect(a.latencyMs).to.be.a('number').at.least(0)
      }
      expect(r.requests).to.have.length(4)
      expect(scheduler.pending).to.equal(0)
    })
  })

  describe('limits and lifecycle', () => {
    it('refuses items beyond the queue limit with webhook_queue_full and queues none of them', async () => {
      const r = await receive()
      const w = worker(compiled(r.url, { delivery: { delayMs: 60_000 } }), { queueItemsMax: 5 })
      w.enqueue([item({}, now()), item({}, now()), item({}, now())])
      expect(() => w.enqueue([item({}, now()), item({}, now()), item({}, now())]))
        .to.throw(WebhookError).with.property('code', 'webhook_queue_full')
      expect(w.queued).to.equal(3)
      expect(w.capacity).to.equal(2)
    })

    it('refuses a retry group larger than the batch size', async () => {
      const r = await receive()
      const w = worker(compiled(r.url, { delivery: { batchSize: 2 } }))
      expect(() => w.enqueue([item(), item(), item()], 2, [])).to.throw(WebhookError).with.property('code', 'webhook_invalid_batch')
    })

    it('stop lets the request in flight finish and returns what was not sent; enqueue afterwards is refused', async () => {
      const r = await receive(() => 'hang')
      const w = worker(compiled(r.url))
      const sent = item({}, now())
      const later = [item({}, now() + 10_000), item({}, now() + 20_000)]
      w.enqueue([sent, ...later])
      await waitFor(() => r.requests.length === 1)
      let stopped = false
      const stopping = w.stop().then(rest => { stopped = true; return rest })
      await settle(20)
      expect(stopped).to.equal(false)
      r.release()
      const rest = await stopping
      expect(recorded.delivered.map(d => d.items[0]!.id)).to.deep.equal([sent.id])
      expect(rest).to.deep.equal([{ items: later, attempt: 1, history: [] }])
      expect(scheduler.pending).to.equal(0)
      expect(() => w.enqueue([item()])).to.throw(WebhookError).with.property('code', 'webhook_worker_stopped')
    })

    it('returns in-memory retries from stop with their attempt number and history', async () => {
      const r = await receive(() => ({ status: 500 }))
      const w = worker(compiled(r.url), { retryInMemory: true })
      const one = item({}, now())
      w.enqueue([one])
      await waitFor(() => recorded.retries.length === 1)
      const rest = await w.stop()
      expect(rest).to.have.length(1)
      expect(rest[0]).to.deep.include({ items: [one], attempt: 2 })
      expect(rest[0]!.history.map(h => h.status)).to.deep.equal([500])
    })

    it('keeps delivering when a callback throws, and reports the error', async () => {
      const r = await receive()
      const w = worker(compiled(r.url), { onDelivered: () => { throw new Error('callback broke') } })
      w.enqueue([item({}, now())])
      await waitFor(() => recorded.errors.length === 1)
      w.enqueue([item({}, now())])
      await waitFor(() => recorded.errors.length === 2)
      expect(r.requests).to.have.length(2)
      expect((recorded.errors[0] as Error).message).to.equal('callback broke')
    })
  })
})
