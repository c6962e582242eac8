// The relay between the outbox and the delivery queue: rows stay until the queue takes their records,
// and a pass the queue refused is tried again without waiting for another row to arrive.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { Registry } from '../../src/store/registry.js'
import { systemClock } from '../../src/clock.js'
import { DeliveryHub, type DeliveryQueue, type DeliveryRecord } from '../../actors/delivery.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { ACCOUNT, config, waitFor } from './helpers.js'

describe('outbox relay', () => {
  it('keeps the rows a refused publish left, and relays them on a later try with no new row', async () => {
    const dir = tempDir()
    const store = new Store({ path: dir, durability: 'flushed' })
    await store.save(store.accounts, ACCOUNT, { account: ACCOUNT, name: 'relay', suspended: false, createdAt: new Date().toISOString() })
    const registry = new Registry(store, systemClock)
    registry.allowPrivateWebhooks = true
    await registry.putWebhook(ACCOUNT, 'orders', config('http://127.0.0.1:9/in', { trigger: { kind: 'event', events: ['purchase'] } }))
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
})
