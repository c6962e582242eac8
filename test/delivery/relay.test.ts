// The relay between the outbox and the delivery queue: rows stay until the queue takes their records,
// and a pass the queue refused is tried again without waiting for another row to arrive.

import { expect } from 'chai'
import { Store, type OutboxAppended } from '../../src/store/store.js'
import { Catalogs } from '../../src/catalog/catalogs.js'
import { Listeners } from '../../src/listeners.js'
import type { WebhookChanged } from '../../src/webhooks/lookup.js'
import { systemClock } from '../../src/clock.js'
import { DeliveryHub, type DeliveryHubOptions } from '../../src/delivery/hub.js'
import { EmbeddedQueue } from '../../src/delivery/embedded-queue.js'
import type { DeliveryQueue } from '../../src/delivery/queue.js'
import type { DeliveryRecord } from '../../src/delivery/record.js'
import { decodeRecord, encodeRow, type OutboxRow } from '../../src/store/record-codec.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { ACCOUNT, config, startReceiver, waitFor, type Receiver } from '../webhooks/helpers.js'

/** Outbox rows appended to the stores these tests open: what the hub hears. */
const outboxAppended = new Listeners<OutboxAppended>()

async function openStore (webhookUrl: string): Promise<{ dir: string, store: Store, catalogs: Catalogs, webhookChanged: Listeners<WebhookChanged> }> {
  const dir = tempDir()
  const store = new Store({ path: dir, durability: 'flushed', outboxAppended })
  await store.save(store.accounts, ACCOUNT, { account: ACCOUNT, name: 'relay', suspended: false, createdAt: new Date().toISOString() })
  const webhookChanged = new Listeners<WebhookChanged>()
  const catalogs = new Catalogs({ store, clock: systemClock, segmentsChanged: new Listeners(), webhookChanged, allowPrivateWebhooks: true })
  await catalogs.webhooks.put(ACCOUNT, 'orders', config(webhookUrl, { trigger: { kind: 'event', events: ['purchase'] } }))
  return { dir, store, catalogs, webhookChanged }
}

/** A hub over a fresh store whose webhook `orders` posts to `webhookUrl`; hub, store and folder go after `body`. */
async function withHub (webhookUrl: string, options: (store: Store) => Partial<DeliveryHubOptions>, body: (hub: DeliveryHub, store: Store) => Promise<void>): Promise<void> {
  const { dir, store, catalogs, webhookChanged } = await openStore(webhookUrl)
  const hub = new DeliveryHub({ store, registry: catalogs.webhooks, webhookChanged, outboxAppended, clock: systemClock, allowPrivate: true, ...options(store) })
  try {
    await body(hub, store)
  } finally {
    await hub.stop()
    await store.close()
    removeDir(dir)
  }
}

/** The same with a local receiver as the webhook's target, closed after `body` too. */
async function withReceiver (options: (store: Store) => Partial<DeliveryHubOptions>, body: (hub: DeliveryHub, store: Store, receiver: Receiver) => Promise<void>): Promise<void> {
  const receiver = await startReceiver()
  try {
    await withHub(`${receiver.url}/in`, options, (hub, store) => body(hub, store, receiver))
  } finally {
    await receiver.close()
  }
}

/** A queue that only publishes, through `publish`. */
function publishingQueue (publish: DeliveryQueue['publish']): DeliveryQueue {
  return { retriesInMemory: true, start: async () => {}, publish, settle: () => {}, stop: async () => {} }
}

const purchase = (i: number, fields: Record<string, unknown> = {}): OutboxRow =>
  ({ kind: 'event', account: ACCOUNT, event: 'purchase', visitorId: `v${i}`, fields, occurredAtMs: Date.now() })

describe('outbox relay', () => {
  it('keeps the rows a refused publish left, and relays them on a later try with no new row', async () => {
    const published: DeliveryRecord[] = []
    let refusals = 1
    const queue = publishingQueue(async records => {
      if (refusals-- > 0) throw new Error('NATS is away')
      published.push(...records)
    })
    await withHub('http://127.0.0.1:9/in', () => ({ queue }), async (hub, store) => {
      await hub.start()
      store.appendOutbox(purchase(0))
      await waitFor(() => refusals === 0, 5000, 'the first, refused publish')
      expect(store.outbox.getCount()).to.equal(1)
      await waitFor(() => published.length === 1, 5000, 'the retried publish')
      await waitFor(() => store.outbox.getCount() === 0, 5000, 'the row removed')
      expect(published[0]!.item.context.event).to.equal('purchase')
    })
  })

  it('relays every row when one of several overlapping passes fails: it and those after it are read again', async () => {
    const published = new Set<number>()
    let calls = 0
    const queue = publishingQueue(async records => {
      // The second pass fails after a while, when the passes after it were published already.
      if (++calls === 2) {
        await new Promise(resolve => setTimeout(resolve, 50))
        throw new Error('NATS is away')
      }
      for (const record of records) published.add(record.seq)
    })
    await withHub('http://127.0.0.1:9/in', () => ({ queue }), async (hub, store) => {
      for (let i = 0; i < 2100; i++) store.appendOutbox(purchase(i))
      await hub.start()
      await waitFor(() => published.size === 2100, 10_000, 'every row published')
      await waitFor(() => store.outbox.getCount() === 0, 5000, 'every row removed')
      expect(calls).to.be.above(5) // the failed pass and those after it were published again
    })
  })

  it('relays rows appended close together in one pass, and at once for a request waiting on its sync webhooks', async () => {
    const passes: number[][] = []
    const queue = publishingQueue(async records => { passes.push(records.map(record => record.seq)) })
    await withHub('http://127.0.0.1:9/in', () => ({ queue, relayDelayMs: 200 }), async (hub, store) => {
      await hub.start()
      for (let i = 0; i < 3; i++) {
        store.appendOutbox(purchase(i))
        await new Promise(resolve => setImmediate(resolve))
      }
      await waitFor(() => passes.flat().length === 3, 5000, 'three rows relayed')
      expect(passes).to.have.length(1)
    })
    await withHub('http://127.0.0.1:9/in', () => ({ queue, relayDelayMs: 60_000 }), async (hub, store) => {
      await hub.start()
      passes.length = 0
      const seq = Number(store.appendOutbox(purchase(3)))
      await store.root.committed
      await hub.awaitSync(ACCOUNT, seq - 1, seq, 10_000)
      expect(passes).to.deep.equal([[seq]])
    })
  })

  it('relays rows of an earlier release (plain msgpack records) and its own alike, and stores each record as it published it', async () => {
    const published: DeliveryRecord[] = []
    const queue = publishingQueue(async records => { published.push(...records) })
    await withHub('http://127.0.0.1:9/in', () => ({ queue, relayDelayMs: 1 }), async (hub, store) => {
      const earlier = store.allocateSeq()
      await store.durable(store.outbox.put(earlier, { kind: 'event', account: ACCOUNT, event: 'purchase', visitorId: 'v-old', fields: { orderId: 'old' }, occurredAtMs: 5 }))
      const stored = Number(store.appendOutbox(purchase(1, { orderId: 'stored' })))
      await store.root.committed
      await hub.start()
      const appended = Number(store.appendOutbox({ kind: 'audience', account: ACCOUNT, segment: 'vip', change: 'enter', profileId: 'p-1', occurredAtMs: 6 }))
      await waitFor(() => published.length === 2, 5000, 'the two purchases relayed')
      await hub.settled()
      await store.root.committed
      expect(published.map(record => record.seq)).to.deep.equal([earlier, stored])
      expect(published[0]!.item.context).to.deep.equal({ account: ACCOUNT, visitorId: 'v-old', event: 'purchase', eventFields: { orderId: 'old' } })
      for (const record of published) {
        expect(decodeRecord(store.deliveries.get([ACCOUNT, 'orders', record.seq]) as Uint8Array)).to.deep.equal(record)
      }
      // The audience row selects no webhook: nothing made of it, and it leaves the outbox all the same.
      expect(store.deliveries.get([ACCOUNT, 'orders', appended])).to.equal(undefined)
      await waitFor(() => store.outbox.getCount() === 0, 5000, 'every row removed')
    })
  })

  it('relays a row resent for another node (cluster mode) under a record of its own whose item carries the first place\'s id, and removes its origin with it', async () => {
    const published: DeliveryRecord[] = []
    const queue = publishingQueue(async records => { published.push(...records) })
    const FIRST = 'a1b2c3d4-0000-4000-8000-000000000001'
    const cluster = (store: Store): Partial<DeliveryHubOptions> => ({
      queue, relayDelayMs: 1,
      cluster: { idOrigin: store.nodeId, schedules: { partitions: 1, partitionOf: () => 0, owns: () => true, claim: async () => true, staleAfterMs: 60_000 } },
    })
    await withHub('http://127.0.0.1:9/in', cluster, async (hub, store) => {
      // One resent row read back from LMDB at start, one appended while running, and a row of this node's own.
      const stored = Number(store.appendOutbox(purchase(1), { node: FIRST, seq: 7 }))
      await store.root.committed
      await hub.start()
      const appended = Number(store.appendOutbox(purchase(2), { node: FIRST, seq: 8 }))
      const own = Number(store.appendOutbox(purchase(3)))
      await waitFor(() => published.length === 3, 5000, 'three rows relayed')
      await hub.settled()
      await store.root.committed
      expect(published.map(record => [record.id, record.item.id, record.item.messageId])).to.deep.equal([
        [`${store.nodeId}:${stored}.orders`, `${store.nodeId}:${stored}.orders`, `${FIRST}:7.orders`],
        [`${store.nodeId}:${appended}.orders`, `${store.nodeId}:${appended}.orders`, `${FIRST}:8.orders`],
        [`${store.nodeId}:${own}.orders`, `${store.nodeId}:${own}.orders`, undefined],
      ])
      for (const record of published) {
        expect(decodeRecord(store.deliveries.get([ACCOUNT, 'orders', record.seq]) as Uint8Array)).to.deep.equal(JSON.parse(JSON.stringify(record)))
      }
      await waitFor(() => store.outbox.getCount() === 0 && store.outboxOrigins.getCount() === 0, 5000, 'rows and origins removed')
    })
  })

  it('takes rows appended while it runs from memory, decodes only those from before its start, and never relays a row LMDB lacks', async () => {
    const published: DeliveryRecord[] = []
    const queue = publishingQueue(async records => { published.push(...records) })
    await withHub('http://127.0.0.1:9/in', () => ({ queue, relayDelayMs: 1 }), async (hub, store) => {
      const before = Number(store.appendOutbox(purchase(0, { orderId: 'before' })))
      let decoded = 0
      // Reads of values (getKeys is a getRange without them).
      const outbox = store.outbox as unknown as { get: (key: number) => unknown, getRange: (options: { values?: boolean }) => unknown }
      const { get, getRange } = outbox
      outbox.get = key => { decoded++; return get.call(store.outbox, key) }
      outbox.getRange = options => { if (options.values !== false) decoded += 1000; return getRange.call(store.outbox, options) }
      await hub.start()
      await waitFor(() => published.length === 1, 5000, 'the row from before the start')
      expect(decoded).to.equal(1)
      // A row whose transaction failed: the hub heard of it, LMDB never had it.
      const lost = store.allocateSeq()
      for (const appended of outboxAppended.list) appended(lost, purchase(1, { orderId: 'lost' }), encodeRow(purchase(1, { orderId: 'lost' })), null)
      const seqs = Array.from({ length: 20 }, (_, i) => Number(store.appendOutbox(purchase(i, { orderId: `o-${i}` }))))
      await waitFor(() => published.length === 21, 5000, 'twenty rows relayed')
      await new Promise(resolve => setTimeout(resolve, 50))
      expect(published.map(record => record.seq)).to.deep.equal([before, ...seqs])
      expect(published.map(record => record.item.context.eventFields!.orderId)).to.deep.equal(['before', ...seqs.map((_, i) => `o-${i}`)])
      expect(decoded).to.equal(1)
    })
  })

  it('writes the outcomes of attempts that end close together in one transaction, and tells the queue once it is committed', async () => {
    const told: { seq: number, outcome: string, rowStatus: string | undefined }[] = []
    let commits = 0
    await withReceiver(store => {
      const embedded = new EmbeddedQueue(store)
      const queue: DeliveryQueue = {
        retriesInMemory: true,
        start: feed => embedded.start(feed),
        publish: records => embedded.publish(records),
        settle (record, outcome) {
          const row = store.deliveries.get([ACCOUNT, 'orders', record.seq, 0]) as Uint8Array | undefined
          told.push({ seq: record.seq, outcome, rowStatus: row === undefined ? undefined : (decodeRecord(row) as DeliveryRecord).status })
        },
        stop: () => embedded.stop(),
      }
      return { queue, writeDelayMs: 60_000 }
    }, async (hub, store, receiver) => {
      await hub.start()
      const seqs = Array.from({ length: 10 }, (_, i) => Number(store.appendOutbox(purchase(i))))
      await waitFor(() => receiver.requests.length === 10, 5000, 'ten delivered')
      await new Promise(resolve => setTimeout(resolve, 50))
      // Delivered, their outcomes not written yet, and the queue not told.
      expect(told).to.deep.equal([])
      for (const seq of seqs) expect(store.deliveries.get([ACCOUNT, 'orders', seq, 0])).to.equal(undefined)
      ;(store.root as unknown as { on: (event: string, listener: () => void) => void }).on('aftercommit', () => { commits++ })
      // A listing writes them first: all ten in one transaction, then the queue hears of each.
      const { deliveries } = await hub.list(ACCOUNT, 'orders', null, 0, 100)
      expect(deliveries.map(record => record.status)).to.deep.equal(Array(10).fill('delivered'))
      expect(commits).to.equal(1)
      await waitFor(() => told.length === 10, 5000, 'the queue told')
      expect(told.map(t => t.seq).sort((a, b) => a - b)).to.deep.equal(seqs)
      for (const t of told) expect(t).to.include({ outcome: 'delivered', rowStatus: 'delivered' })
    })
  })

  it('offers the records a full worker queue refused again once it has room (embedded), never one delivered already', async () => {
    // Outcomes are written only when a refill pass reads (it writes them first), so every record it
    // skips as delivered is one whose outcome it wrote itself.
    await withReceiver(store => ({ queue: new EmbeddedQueue(store), workerQueueItemsMax: 50, writeDelayMs: 60_000 }), async (hub, store, receiver) => {
      await hub.start()
      for (let i = 0; i < 200; i++) store.appendOutbox(purchase(0, { orderId: `o-${i}` }))
      await waitFor(() => receiver.requests.length >= 200, 15_000, `all 200 delivered (${receiver.requests.length})`)
      await new Promise(resolve => setTimeout(resolve, 600))
      const ids = new Set(receiver.requests.map(r => r.headers['webhook-id']))
      expect(ids.size).to.equal(200)
      expect(receiver.requests).to.have.length(200)
    })
  })

  it('writes an attempt\'s outcome as a row of its own next to the record, and reads the two as one', async () => {
    await withReceiver(store => ({ queue: new EmbeddedQueue(store) }), async (hub, store, receiver) => {
      await hub.start()
      const seqs = [1, 2, 3].map(i => Number(store.appendOutbox(purchase(i))))
      await waitFor(async () => (await hub.list(ACCOUNT, 'orders', 'delivered', 0, 10)).deliveries.length === 3, 5000, 'three delivered')
      for (const seq of seqs) {
        // The record as the relay wrote it (the bytes it published too), and what the attempt changed beside it.
        const stored = store.deliveries.get([ACCOUNT, 'orders', seq]) as Uint8Array
        expect(stored).to.be.instanceOf(Uint8Array)
        expect(decodeRecord(stored)).to.include({ status: 'pending', attempt: 1 })
        const outcome = decodeRecord(store.deliveries.get([ACCOUNT, 'orders', seq, 0]) as Uint8Array) as DeliveryRecord
        expect(outcome).to.have.keys('status', 'attempt', 'attempts', 'dueMs', 'updatedAtMs')
        expect(outcome).to.include({ status: 'delivered', attempt: 2 })
      }
      const [first] = (await hub.list(ACCOUNT, 'orders', 'delivered', 0, 1)).deliveries
      expect(first).to.include({ id: `${seqs[0]}.orders`, status: 'delivered', attempt: 2 })
      expect(first!.attempts).to.have.length(1)
      expect(first!.item.context.event).to.equal('purchase')
      expect((await hub.list(ACCOUNT, 'orders', 'pending', 0, 10)).deliveries).to.have.length(0)

      // A record written whole (an earlier release), dead: listed as it is, replayed, delivered.
      const old: DeliveryRecord = {
        ...first!, id: '900.orders', seq: 900, item: { ...first!.item, id: '900.orders' }, status: 'dead', attempt: 3,
        attempts: [{ atMs: 1, status: 500, latencyMs: 1 }, { atMs: 2, status: 500, latencyMs: 1 }], dueMs: 0,
      }
      await store.save(store.deliveries, [ACCOUNT, 'orders', 900], old)
      expect((await hub.list(ACCOUNT, 'orders', 'dead', 0, 10)).deliveries).to.deep.equal([old])
      expect(await hub.replay(ACCOUNT, 'orders', ['900.orders'], 0, 0)).to.equal(1)
      await waitFor(() => receiver.requests.length === 4, 5000, 'the replay delivered')
      await waitFor(async () => (await hub.list(ACCOUNT, 'orders', 'delivered', 0, 10)).deliveries.length === 4, 5000, 'the replay settled')
      const replayed = (await hub.list(ACCOUNT, 'orders', 'delivered', 0, 10)).deliveries[3]!
      expect(replayed).to.include({ id: '900.orders', status: 'delivered', attempt: 2 })
      expect(replayed.attempts).to.have.length(1) // a replay starts again from attempt 1
    })
  })
})
