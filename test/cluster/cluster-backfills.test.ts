// The cluster's side of a segment backfill (src/jobs/cluster-backfills.ts), in process: two nodes, each
// with its own LMDB store and catalogs, calling each other over a real nats-server. The job goes on only
// when every live node said it holds the backfill before the cut; a node that does not hold it, or does
// not answer, cancels it at the cut, never earlier. The end waits for every node's re-evaluation pass.
// (The whole backfill across three real Beacon processes: backfill-any-node.test.ts.)

import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Catalogs } from '../../src/catalog/catalogs.js'
import { NodeCalls } from '../../src/cluster/node-calls.js'
import { systemClock } from '../../src/clock.js'
import { Listeners } from '../../src/listeners.js'
import { Store } from '../../src/store/store.js'
import { BACKFILL_CUT_AHEAD_MS, ClusterBackfillNodes } from '../../src/jobs/cluster-backfills.js'
import type { BackfillRow } from '../../src/jobs/segment-backfill.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'

interface Node { id: string, dir: string, store: Store, catalogs: Catalogs, calls: NodeCalls, nodes: ClusterBackfillNodes, nc: NatsConnection, idle: Promise<void> }

// Every node of a cluster shares BEACON_SECRETS_KEY (the account's identity secret is sealed with it).
const SECRETS_KEY = randomBytes(32).toString('base64')
const RULE = { fact: 'count', event: 'purchase', within: '30d', op: 'gte', value: 2 } as const

describe('ClusterBackfillNodes: every node holds a backfill before its cut, or it is cancelled (real nats-server, real LMDB)', function () {
  this.timeout(60_000)
  let server: NatsServer
  const nodes: Node[] = []
  let account: string
  let releaseIdle: () => void = () => {}

  before(async () => {
    server = await startNatsServer()
    for (const id of ['a', 'b']) {
      const dir = tempDir('beacon-cluster-backfills-')
      const store = new Store({ path: dir, durability: 'committed', secretsKey: SECRETS_KEY })
      // Both nodes know the same account (as the replicated configuration would have it).
      if (id === 'b') await store.save(store.accounts, account, nodes[0]!.store.accounts.get(account))
      const catalogs = new Catalogs({ store, clock: systemClock, segmentsChanged: new Listeners(), webhookChanged: new Listeners(), allowPrivateWebhooks: true })
      if (id === 'a') account = (await catalogs.accounts.create('backfills')).account.account
      const nc = await connect({ servers: server.url })
      const calls = new NodeCalls({ nc, cluster: 'backfills', nodeId: id, live: () => ['a', 'b'], budgetMs: 2000 })
      // Node b's pass of the account runs until the test lets it end.
      const idle = id === 'a' ? Promise.resolve() : new Promise<void>(resolve => { releaseIdle = resolve })
      const node: Node = { id, dir, store, catalogs, calls, nc, idle, nodes: null! }
      node.nodes = new ClusterBackfillNodes({ calls, nodeId: id, segments: catalogs.segments, clock: systemClock, entitiesIdle: async () => await node.idle })
      nodes.push(node)
    }
  })
  after(async () => {
    for (const node of nodes) {
      await node.calls.close()
      await node.nc.close()
      await node.store.close()
      removeDir(node.dir)
    }
    await server?.close()
  })

  /** Saves segment `name` with a backfill (id fixed by the caller) on the given nodes; answers the row. */
  async function hold (name: string, id: string, on: Node[]): Promise<BackfillRow> {
    let saved: BackfillRow | null = null as BackfillRow | null
    for (const node of on) {
      const row = await node.catalogs.segments.put(account, name, { rule: RULE }, {
        id,
        aheadMs: BACKFILL_CUT_AHEAD_MS,
        row: (held, version): BackfillRow => saved ?? {
          id, account, segment: name, state: 'running', fromMs: held.fromMs, specKeys: [...held.specKeys], rule: JSON.stringify(RULE),
          cursor: null, walked: false, events: 0, visitors: 0, version, held: false, createdAtMs: 0, updatedAtMs: 0, finishedAtMs: null, error: null,
        },
      })
      saved ??= row as BackfillRow
    }
    return saved!
  }

  it('goes on once every live node holds it, before its cut', async () => {
    const [a] = nodes as [Node, Node]
    const row = await hold('both', 'a:00000000-0000-4000-8000-000000000001', nodes)
    expect(a.nodes.runsHere(row)).to.equal(true)
    expect(nodes[1]!.nodes.runsHere(row)).to.equal(false)
    expect(await a.nodes.held(row)).to.equal(null)
  })

  it('is cancelled at the cut, not before, when a node does not hold it', async () => {
    const [a] = nodes as [Node, Node]
    const row = await hold('only-a', 'a:00000000-0000-4000-8000-000000000002', [a])
    const why = await a.nodes.held(row)
    expect(Date.now()).to.be.at.least(row.fromMs)
    expect(why).to.equal('Not every node of the cluster held the backfill before its cut (not held by b); save the segment with backfill again.')
  })

  it('is cancelled at the cut when a node does not answer', async () => {
    const [a, b] = nodes as [Node, Node]
    const row = await hold('silent', 'a:00000000-0000-4000-8000-000000000003', nodes)
    await b.calls.close()
    const why = await a.nodes.held(row)
    expect(Date.now()).to.be.at.least(row.fromMs)
    expect(why).to.match(/^Not every node of the cluster held the backfill before its cut \(a node did not answer\)/)
  })

  it('ends only once every node\'s re-evaluation pass did', async () => {
    const [a] = nodes as [Node, Node]
    // Node b answers again (its calls were closed by the test before).
    nodes[1]!.calls = new NodeCalls({ nc: nodes[1]!.nc, cluster: 'backfills', nodeId: 'b', live: () => ['a', 'b'], budgetMs: 2000 })
    nodes[1]!.nodes = new ClusterBackfillNodes({ calls: nodes[1]!.calls, nodeId: 'b', segments: nodes[1]!.catalogs.segments, clock: systemClock, entitiesIdle: async () => await nodes[1]!.idle })
    let ended = false
    const idle = a.nodes.idle(account).then(() => { ended = true })
    await new Promise(resolve => setTimeout(resolve, 1500))
    expect(ended, 'ended while node b\'s pass runs').to.equal(false)
    releaseIdle()
    await idle
    expect(ended).to.equal(true)
  })
})
