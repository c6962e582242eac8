// Experiment results through any node, real processes: a 3-server NATS JetStream cluster and 3 Beacon
// nodes (test/helpers/beacon-cluster.ts) folding their counts only at stop. Visitors spread over the
// partitions (so exposed and converting at all three owners) send their events through all three
// nodes; the results through each node have the exact visitors and conversions of the whole cluster,
// counts not folded included.

import { expect } from 'chai'
import { admin, post, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { until } from '../helpers/until.js'

describe('Beacon cluster mode: experiment results from any node (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster

  before(async () => {
    cluster = await startBeaconCluster(3, { BEACON_REPORT_FOLD_MS: '3600000' })
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
  })

  it('answers the exact visitors and conversions of every node, through every node', async () => {
    const nodes = cluster.live()
    const account = cluster.tenant.account
    const path = `/admin/accounts/${account}/campaigns/hero`
    const saved = await admin(nodes[0]!.url, 'PUT', path, {
      name: 'Hero', status: 'active', priority: 1, trigger: { events: ['pageView'] }, content: { hero: 'default' },
      variants: [{ id: 'a', weight: 1 }, { id: 'b', weight: 1, content: { hero: 'B' } }],
      goals: [{ event: 'purchase', metric: 'conversion', windowDays: 7 }],
    })
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200)
    for (const node of nodes) await until(`the campaign at ${node.url}`, async () => (await admin(node.url, 'GET', path)).status === 200)

    const tally: Record<string, { visitors: number, conversions: number }> = { a: { visitors: 0, conversions: 0 }, b: { visitors: 0, conversions: 0 } }
    for (let i = 0; i < 90; i++) {
      const visitor = visitorId()
      const answer = await post(nodes[i % 3]!.url, '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'pageView', path: '/' })
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
      // A node whose build of the new campaign set is still under way (it is swapped in when done)
      // answers the set before it: that visitor is not in the experiment, and not counted.
      const variant = answer.body.campaigns[0]?.variant as string | undefined
      if (variant === undefined) continue
      tally[variant]!.visitors++
      if (i % 3 === 0) {
        const bought = await post(nodes[(i + 1) % 3]!.url, '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'purchase', orderId: `o-${i}`, orderTotal: 10 })
        expect(bought.status).to.equal(200)
        tally[variant]!.conversions++
      }
    }
    expect(tally.a!.visitors + tally.b!.visitors, 'visitors in the experiment').to.be.above(60)
    for (const node of nodes) {
      const results = await admin(node.url, 'GET', `${path}/results`)
      expect(results.status, JSON.stringify(results.body).slice(0, 300)).to.equal(200)
      const seen = Object.fromEntries(results.body.variants.map((v: { id: string, visitors: number, goals: Array<{ total: number }> }) => [v.id, { visitors: v.visitors, conversions: v.goals[0]!.total }]))
      expect(seen, node.url).to.deep.equal(tally)
    }
  })
})
