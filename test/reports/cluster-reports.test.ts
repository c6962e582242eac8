// Reports of a cluster merged from its nodes' shares, in process: two nodes, each with its own LMDB
// store and report counters, calling each other over a real nats-server (src/cluster/node-calls.ts).
// A 31-day hour report with visitors in every hour is about 1.6 MB of buckets per node: each node's
// share comes in several answers of at most about 256 KiB, and the merged rows are exact (counts added,
// the visitors' estimate that of one sketch of both nodes' visitors), folded and unfolded counts alike.
// Member counts: signed shares added, the sum floored at zero.

import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { NodeCalls } from '../../src/cluster/node-calls.js'
import { Store } from '../../src/store/store.js'
import { ReportCounters, DAY_MS, HOUR_MS } from '../../src/reports/counters.js'
import { ClusterReports } from '../../src/reports/cluster-reports.js'
import { HyperLogLog } from '../../src/reports/hll.js'
import { manualClock } from '../helpers/clock.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'

interface Node { id: string, dir: string, store: Store, counters: ReportCounters, calls: NodeCalls, reports: ClusterReports, nc: NatsConnection }

describe('ClusterReports: a report merged from every node\'s share (real nats-server, real LMDB)', function () {
  this.timeout(60_000)
  let server: NatsServer
  const nodes: Node[] = []
  const clock = manualClock()
  const firstMs = clock.nowMs() - clock.nowMs() % DAY_MS
  const hours = 31 * 24

  before(async () => {
    server = await startNatsServer()
    for (const id of ['a', 'b']) {
      const dir = tempDir('beacon-cluster-reports-')
      const store = new Store({ path: dir, durability: 'committed' })
      const counters = new ReportCounters({ store, clock, foldMs: 3_600_000, hasCampaign: () => true, onError: error => { throw error }, signedMembers: true })
      const nc = await connect({ servers: server.url })
      const calls = new NodeCalls({ nc, cluster: 'reports', nodeId: id, live: () => ['a', 'b'] })
      nodes.push({ id, dir, store, counters, calls, nc, reports: new ClusterReports({ counters, store, calls }) })
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

  it('adds every node\'s counts over a 31-day hour report, its shares in several answers, folded or not', async () => {
    const [a, b] = nodes as [Node, Node]
    const sketches: HyperLogLog[] = []
    for (let h = 0; h < hours; h++) {
      const sketch = new HyperLogLog()
      for (const [node, n] of [[a, 3], [b, 2]] as const) {
        for (let i = 0; i < n; i++) {
          const visitor = `${node.id}-${h}-${i}`
          node.counters.event('acct', 'pageView', visitor, [{ id: 'sale' }], undefined, firstMs + h * HOUR_MS + i)
          sketch.add(visitor)
        }
      }
      sketches.push(sketch)
      // Node b folds half way: its first half is in its store, the rest in memory.
      if (h === hours / 2) await b.counters.fold()
    }
    await a.counters.fold()
    for (const via of nodes) {
      const rows = await via.reports.rows('acct', firstMs, firstMs + hours * HOUR_MS, 'hour')
      expect(rows).to.have.length(hours)
      expect(rows.map(row => row.events.pageView)).to.deep.equal(Array.from({ length: hours }, () => 5))
      expect(rows.map(row => row.campaigns.sale?.impressions)).to.deep.equal(Array.from({ length: hours }, () => 5))
      expect(rows.map(row => row.visitors)).to.deep.equal(sketches.map(sketch => sketch.estimate()))
      const days = await via.reports.rows('acct', firstMs, firstMs + 31 * DAY_MS, 'day')
      expect(days.map(row => row.events.pageView)).to.deep.equal(Array.from({ length: 31 }, () => 5 * 24))
    }
  })

  it('adds the nodes\' signed member shares, folded or not, and floors the sum at zero', async () => {
    const [a, b] = nodes as [Node, Node]
    for (let i = 0; i < 3; i++) a.counters.membership('acct', 'vip', 1)
    b.counters.membership('acct', 'vip', -1)
    b.counters.membership('acct', 'gone', -1)
    await b.counters.fold()
    b.counters.membership('acct', 'vip', -1)
    expect(b.counters.memberShare('acct', 'vip')).to.equal(-2)
    expect(await a.reports.members('acct', ['vip', 'gone', 'none'])).to.deep.equal([1, 0, 0])
    expect(await b.reports.members('acct', [])).to.deep.equal([])
  })
})
