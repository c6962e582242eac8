// Schedule runs in cluster mode (src/delivery/schedules.ts): two nodes' delivery hubs over real LMDB
// stores, claiming parts of runs in a real KV bucket (src/cluster/schedule-claims.ts on a real
// nats-server), with the partitions' owners set by the test and time by a manual clock. A partition
// with no owner when a run came (mid-takeover) gets its part of that run from the node that takes it
// next; a part its previous owner made is not made again by the node it moves to.

import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Store } from '../../src/store/store.js'
import { Catalogs } from '../../src/catalog/catalogs.js'
import { Listeners } from '../../src/listeners.js'
import type { WebhookChanged } from '../../src/webhooks/lookup.js'
import type { Clock } from '../../src/clock.js'
import { DeliveryHub } from '../../src/delivery/hub.js'
import type { DeliveryRecord } from '../../src/delivery/record.js'
import { ScheduleClaims } from '../../src/cluster/schedule-claims.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { ACCOUNT, config } from '../webhooks/helpers.js'

const EVERY_MS = 10_000
const RUN_MS = 1_800_000_010_000
/** Two members in each of two partitions: a visitor's partition is the digit after its `v`. */
const MEMBERS = ['v0-a', 'v0-b', 'v1-a', 'v1-b']
const partitionOf = (_account: string, id: string): number => Number(id[1])

interface Node {
  hub: DeliveryHub
  store: Store
  dir: string
  sent: DeliveryRecord[]
}

describe('schedule runs in cluster mode (two hubs, real claims on a real nats-server)', function () {
  this.timeout(60_000)
  let nats: NatsServer
  let nc: NatsConnection
  let nowMs = RUN_MS - 5_000
  const clock: Clock = { nowMs: () => nowMs }
  /** Each partition's owner now: a node's name, or null while it changes hands. */
  const owners = new Map<number, string | null>()
  const nodes = new Map<string, Node>()

  async function startNode (name: string, claims: ScheduleClaims): Promise<Node> {
    const dir = tempDir()
    const store = new Store({ path: dir, durability: 'flushed' })
    await store.save(store.accounts, ACCOUNT, { account: ACCOUNT, name: 'schedules', suspended: false, createdAt: new Date().toISOString() })
    const webhookChanged = new Listeners<WebhookChanged>()
    const catalogs = new Catalogs({ store, clock, segmentsChanged: new Listeners(), webhookChanged, allowPrivateWebhooks: true })
    await catalogs.segments.put(ACCOUNT, 'vip', {})
    await catalogs.webhooks.put(ACCOUNT, 'members', config('http://127.0.0.1:9/members', { trigger: { kind: 'schedule', every: '10s', segments: ['vip'] } }))
    // Both nodes hold every member's row, as a node does after it owned a partition once.
    for (const id of MEMBERS) await store.durable(store.members.put([ACCOUNT, 'vip', 'visitor', id], null))
    const sent: DeliveryRecord[] = []
    const hub = new DeliveryHub({
      store, registry: catalogs.webhooks, webhookChanged, outboxAppended: new Listeners(), clock, allowPrivate: true,
      queue: { retriesInMemory: true, start: async () => {}, publish: async records => { sent.push(...records) }, settle: () => {}, stop: async () => {} },
      cluster: {
        idOrigin: store.nodeId,
        schedules: {
          partitions: 2,
          partitionOf,
          owns: partition => owners.get(partition) === name,
          claim: (account, webhookId, runMs, part) => claims.claim(account, webhookId, runMs, part, name),
          staleAfterMs: claims.ttlMs / 2,
        },
      },
    })
    const node = { hub, store, dir, sent }
    nodes.set(name, node)
    return node
  }

  const membersSent = (node: Node): string[] => node.sent.map(record => {
    expect(record.item.occurredAtMs).to.equal(RUN_MS)
    return record.item.context.visitorId!
  }).sort()

  before(async () => {
    nats = await startNatsServer()
    nc = await connect({ servers: nats.url })
    const claims = await ScheduleClaims.open({ nc, cluster: 'schedules', replicas: 1 })
    await startNode('a', claims)
    await startNode('b', claims)
  })
  after(async () => {
    for (const { hub, store, dir } of nodes.values()) {
      await hub.stop()
      await store.close()
      removeDir(dir)
    }
    await nc?.close()
    await nats?.close()
  })

  it('makes the part of a partition taken after the run at its new owner, and a part made before it moved nowhere else', async () => {
    const a = nodes.get('a')!
    const b = nodes.get('b')!
    for (const node of nodes.values()) expect(await node.hub.runSchedules()).to.equal(0)
    // The run comes while partition 0 is a's and partition 1 has no owner (its takeover under way).
    owners.set(0, 'a').set(1, null)
    nowMs = RUN_MS + 1
    for (const node of nodes.values()) expect(await node.hub.runSchedules()).to.equal(1)
    expect(membersSent(a)).to.deep.equal(['v0-a', 'v0-b'])
    expect(membersSent(b)).to.deep.equal([])
    // b takes partition 1: at its next check, it makes that partition's part of the run, once.
    owners.set(1, 'b')
    nowMs += 1000
    await b.hub.runSchedules()
    await b.hub.runSchedules()
    expect(membersSent(b)).to.deep.equal(['v1-a', 'v1-b'])
    // Partition 0 moves to b too: a made its part of the run, so b does not make it again.
    owners.set(0, 'b')
    nowMs += 1000
    await b.hub.runSchedules()
    await a.hub.runSchedules()
    expect(membersSent(a)).to.deep.equal(['v0-a', 'v0-b'])
    expect(membersSent(b)).to.deep.equal(['v1-a', 'v1-b'])
    // The next run is b's alone.
    nowMs = RUN_MS + EVERY_MS + 1
    for (const node of nodes.values()) await node.hub.runSchedules()
    expect(a.sent).to.have.length(2)
    expect(b.sent.filter(record => record.item.occurredAtMs === RUN_MS + EVERY_MS).map(record => record.item.context.visitorId).sort()).to.deep.equal(MEMBERS)
  })
})
