// The relay between the outbox and the delivery queue: rows stay until the queue takes their records,
// and a pass the queue refused is tried again without waiting for another row to arrive.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { Registry } from '../../src/store/registry.js'
import { systemClock } from '../../src/clock.js'
import { DeliveryHub, EmbeddedQueue, type DeliveryQueue, type DeliveryRecord } from '../../actors/delivery.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { ACCOUNT, config, startReceiver, waitFor } from './helpers.js'

async function openStore (webhookUrl: string): Promise<{ dir: string, store: Store, registry: Registry }> {
  const dir = tempDir()
  const store = new Store({ path: dir, durability: 'flushed' })
  await store.save(store.accounts, ACCOUNT, { account: ACCOUNT, name: 'relay', suspended: false, createdAt: new Date().toISOString() })
  const registry = new Registry(store, systemClock)
  registry.allowPrivateWebhooks = true
  await registry.putWebhook(ACCOUNT, 'orders', config(webhookUrl, { trigger: { kind: 'event', events: ['purchase'] } }))
  return { dir, store, registry }
}

describe('outbox relay', () => {
  it('keeps the rows a refused publish left, and relays them on a later try with no new row', async () => {
    const { dir, store, registry } = await openStore('http://127.0.0.1:9/in')
    const published: DeliveryRecord[] = []
    let refusals = 1
    const queue: DeliveryQueue = {
      retriesInMemory: true,
      start: async () => {},
      publish: async records => {
        if (refusals-- > 0) throw new Error('NATS is away')
        published.push(...records)
      },
      settle: () => {},
      stop: async () => {},
    }
    const hub = new DeliveryHub({ store, registry, clock: systemClock, allowPrivate: true, queue })
    try {
      await hub.start()
      store.appendOutbox({ kind: 'event', account: ACCOUNT, event: 'purchase', visitorId: 'v', fields: {}, occurredAtMs: Date.now() })
      await waitFor(() => refusals === 0, 5000, 'the first, refused publish')
      expect(store.outbox.getCount()).to.equal(1)
      await waitFor(() => published.length === 1, 5000, 'the retried publish')
      await waitFor(() => store.outbox.getCount() === 0, 5000, 'the row removed')
      expect(published[0]!.item.context.event).to.equal('purchase')
    } finally {
      await hub.stop()
      await store.close()
      removeDir(dir)
    }
  })

  it('offers the records a full worker queue refused again once it has room (embedded)', async () => {
    const receiver = await startReceiver()
    const { dir, store, registry } = await openStore(`${receiver.url}/in`)
    const hub = new DeliveryHub({ store, registry, clock: systemClock, allowPrivate: true, queue: new EmbeddedQueue(store), workerQueueItemsMax: 50 })
    try {
      await hub.start()
      for (let i = 0; i < 200; i++) store.appendOutbox({ kind: 'event', account: ACCOUNT, event: 'purchase', visitorId: 'v', fields: { orderId: `o-${i}` }, occurredAtMs: Date.now() })
      await waitFor(() => receiver.requests.length >= 200, 15_000, 'all 200 delivered')
      const ids = new Set(receiver.requests.map(r => r.headers['webhook-id']))
      expect(ids.size).to.equal(200)
    } finally {
      await hub.stop()
      await store.close()
      await receiver.close()
      removeDir(dir)
    }
  })
})
