// A keyless write forwarded to its partition's owner, which applies it and is paused before its answer
// comes back: the forwarding node's retry reaches the node that takes the partition over, and must be
// answered from the first execution, not applied again (src/cluster/forwarder.ts, "Retries and writes").
// Real processes: a 3-server NATS JetStream cluster (R3), 3 Beacon nodes, a real webhook sink.
//
// Deterministic pause: the account has a sync webhook on page views, which the owner calls after the
// write is durable (in the changelog) and before it answers; the sink never answers it, so the owner
// cannot answer the forwarder, and the test SIGSTOPs the owner once the sink has the call. Its leases
// lapse, another node takes the partition over (recovering the write from the changelog), and the
// forwarder's retry (the same request, sent again within its budget) is answered by that node. Applied
// again, the page view would count twice and call the sync webhook a second time under another
// webhook-id.

import { expect } from 'chai'
import { admin, post, visitorId } from '../helpers/beacon.js'
import { CLUSTER_PARTITIONS, startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'
import { pauseProcess } from '../helpers/pause.js'
import { partitionOf } from '../../src/cluster/partition.js'

describe('Beacon cluster mode: a keyless write forwarded to an owner paused after applying it is applied once (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let receiver: Receiver
  let paused: number | null = null

  before(async () => {
    // The first call of the sync webhook is never answered (the owner stays inside its handler).
    receiver = await startReceiver((_request, index) => index === 0 ? 'hang' : { status: 200 })
    cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' })
    await cluster.settled()
    const res = await admin(cluster.members[0]!.url, 'PUT', `/admin/accounts/${cluster.tenant.account}/webhooks/views`, {
      name: 'views', enabled: true, trigger: { kind: 'event', events: ['pageView'] },
      request: { method: 'POST', url: `${receiver.url}/views`, payload: '{"who": "{{visitorId}}"}' },
      // The longest timeout: the forwarder's budget grows by it, so its retries outlast the takeover.
      delivery: { mode: 'sync', timeoutMs: 60_000, batchSize: 1 },
    })
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201])
    for (const member of cluster.live()) {
      await until(`the webhook on ${member.id}`, async () => (await admin(member.url, 'GET', `/admin/accounts/${cluster.tenant.account}/webhooks/views`)).status === 200, 5_000, 10)
    }
  })
  after(async () => {
    if (paused !== null) process.kill(paused, 'SIGCONT')
    receiver?.release()
    await cluster?.close()
    await receiver?.close()
  })

  it('answers the forwarder\'s retry at the new owner from the first execution: one webhook-id, one page view, no Idempotent-Replayed', async () => {
    const owners = await cluster.settled()
    const owner = cluster.members[0]!
    const front = cluster.members[1]!
    let who = visitorId()
    while (owners.get(partitionOf(cluster.tenant.account, who, CLUSTER_PARTITIONS)) !== owner.id) who = visitorId()

    // No Idempotency-Key: sent through a node that does not own the visitor, so forwarded to the owner.
    const answer = post(front.url, '/campaigns/query', { account: cluster.tenant.account, visitorId: who, platform: 'web', event: 'pageView', path: '/one' })
    await until('the owner calls the sync webhook', () => receiver.requests.length === 1, 60_000, 5)
    paused = owner.process!.child.pid!
    await pauseProcess(paused)
    await cluster.settled({ excluding: owner.id })

    const reply = await answer
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200)
    expect(reply.headers.get('idempotent-replayed'), 'a key the client did not send is not reported').to.equal(null)
    const ids = new Set(receiver.requests.filter(r => r.url === '/views').map(r => String(r.headers['webhook-id'])))
    expect([...ids], 'webhook-ids of the one page view').to.have.length(1)
    const state = await admin(front.url, 'GET', `/admin/accounts/${cluster.tenant.account}/visitors/${who}`)
    expect(state.status, JSON.stringify(state.body)).to.equal(200)
    expect(state.body.counts).to.deep.equal({ pageView: 1 })
  })
})
