// Cluster mode's erasure of a person's delivery records (src/delivery/cluster-erasures.ts) against a
// real nats-server and a real hub on a real LMDB: with NATS away the erasure is refused with 503
// `unavailable` and Retry-After before anything is removed, and goes through once NATS is back; a node
// whose consumer is new (a first start, or a fresh data folder) applies the erasures the stream holds.
// The cluster-wide behaviour (three nodes, one SIGKILLed) is test/cluster/erasure-any-node.test.ts.

import { expect } from 'chai'
import { connect } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { Store, type OutboxAppended } from '../../src/store/store.js'
import { Catalogs } from '../../src/catalog/catalogs.js'
import { Listeners } from '../../src/listeners.js'
import type { WebhookChanged } from '../../src/webhooks/lookup.js'
import { systemClock } from '../../src/clock.js'
import { ApiError } from '../../src/errors.js'
import { DeliveryHub } from '../../src/delivery/hub.js'
import { ClusterErasures } from '../../src/delivery/cluster-erasures.js'
import { JetStreamQueue } from '../../src/delivery/jetstream/queue.js'
import { erasureStreamName } from '../../src/delivery/jetstream/erasure-stream.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'
import { until } from '../helpers/until.js'
import { ACCOUNT, config, startReceiver, type Receiver } from '../webhooks/helpers.js'

const quiet = { debug () {}, info () {}, warn () {}, error () {} }
const NO_IDS: ReadonlySet<string> = new Set()

describe('ClusterErasures (real nats-server, real LMDB)', function () {
  this.timeout(60_000)
  let nats: NatsServer
  let receiver: Receiver
  let dir: string
  let store: Store
  let hub: DeliveryHub
  const queues: JetStreamQueue[] = []

  beforeEach(async () => {
    nats = await startNatsServer()
    receiver = await startReceiver()
    dir = tempDir()
    const outboxAppended = new Listeners<OutboxAppended>()
    const webhookChanged = new Listeners<WebhookChanged>()
    store = new Store({ path: dir, durability: 'flushed', outboxAppended })
    await store.save(store.accounts, ACCOUNT, { account: ACCOUNT, name: 'erasures', suspended: false, createdAt: new Date().toISOString() })
    const catalogs = new Catalogs({ store, clock: systemClock, segmentsChanged: new Listeners(), webhookChanged, allowPrivateWebhooks: true })
    await catalogs.webhooks.put(ACCOUNT, 'orders', config(`${receiver.url}/in`))
    hub = new DeliveryHub({ store, registry: catalogs.webhooks, webhookChanged, outboxAppended, clock: systemClock, allowPrivate: true })
    await hub.start()
    for (const visitorId of ['v-erased', 'v-erased', 'v-kept']) {
      store.appendOutbox({ kind: 'event', account: ACCOUNT, event: 'purchase', visitorId, fields: {}, occurredAtMs: Date.now() })
    }
    await until('3 records', async () => (await recordsOf()).length === 3, 5_000, 10)
  })
  afterEach(async () => {
    for (const queue of queues.splice(0)) await queue.stop()
    await hub.stop()
    await store.close()
    removeDir(dir)
    await receiver.close()
    await nats.close()
  })

  /** The visitor ids of the records this node holds. */
  const recordsOf = async (): Promise<string[]> =>
    (await hub.list(ACCOUNT, 'orders', null, 0, 500)).deliveries.map(record => record.item.context.visitorId ?? '')

  /** The erasures of node `node` (a queue of its own on the server, in cluster `c1`). */
  const erasuresOf = async (node: string): Promise<{ queue: JetStreamQueue, erasures: ClusterErasures }> => {
    const queue = await JetStreamQueue.connect({ url: nats.url, log: quiet, erasures: { cluster: 'c1', node, replicas: 1 } })
    queues.push(queue)
    await queue.erasures!.ensure()
    return { queue, erasures: new ClusterErasures({ hub, transport: queue.erasures! }) }
  }

  it('refuses an erasure with 503 unavailable and Retry-After while NATS is away, removing nothing; takes it once NATS is back', async () => {
    const { erasures } = await erasuresOf('node-a')
    await nats.stop()
    const startedMs = Date.now()
    const refused = await erasures.forget(ACCOUNT, NO_IDS, new Set(['v-erased'])).then(() => null, (error: unknown) => error)
    console.log(`      refused after ${Date.now() - startedMs} ms`)
    expect(refused).to.be.instanceOf(ApiError)
    expect((refused as ApiError).status).to.equal(503)
    expect((refused as ApiError).items[0]!.code).to.equal('unavailable')
    expect((refused as ApiError).headers).to.deep.equal({ 'Retry-After': '1' })
    expect((await recordsOf()).sort(), 'nothing removed').to.deep.equal(['v-erased', 'v-erased', 'v-kept'])
    await nats.restart()
    await until('the erasure taken', async () => {
      const answer = await erasures.forget(ACCOUNT, NO_IDS, new Set(['v-erased'])).then(removed => removed, () => null)
      return answer !== null
    }, 20_000, 200)
    expect(await recordsOf()).to.deep.equal(['v-kept'])
  })

  it('applies, on a node whose consumer is new, the erasures the stream holds from before it', async () => {
    const { queue: writer } = await erasuresOf('node-a')
    await writer.erasures!.publish(ACCOUNT, [], ['v-erased'])
    const { erasures } = await erasuresOf('node-b')
    erasures.start()
    await until('the stored erasure applied', async () => (await recordsOf()).length === 1, 10_000, 20)
    expect(await recordsOf()).to.deep.equal(['v-kept'])
    const nc = await connect({ servers: nats.url })
    const info = await (await jetstreamManager(nc)).streams.info(erasureStreamName('c1'))
    await nc.close()
    expect(info.state.messages, 'kept for the other nodes once acked (not a work queue)').to.equal(1)
  })
})
