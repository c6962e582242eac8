// Cluster mode keeps no retained event log yet (docs/event-log.md, "Cluster mode"): a real cluster node
// (test/helpers/beacon-cluster.ts) accepts events as ever, and both event log endpoints answer 501
// event_log_not_kept, a strategy chosen at start, never a crash nor a half-kept log.

import { expect } from 'chai'
import { admin, post, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { expectError } from '../helpers/errors.js'

describe('Beacon cluster mode: the retained event log (1 node, real processes)', function () {
  this.timeout(120_000)
  let cluster: BeaconCluster

  before(async () => {
    cluster = await startBeaconCluster(1)
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
  })

  it('accepts events and answers 501 event_log_not_kept on both endpoints', async () => {
    const node = cluster.live()[0]!
    const account = cluster.tenant.account
    const sent = await post(node.url, '/campaigns/query', { account, visitorId: visitorId(), platform: 'web', event: 'pageView', path: '/' })
    expect(sent.status, JSON.stringify(sent.body)).to.equal(200)
    expectError(await admin(node.url, 'GET', `/admin/accounts/${account}/events`), 'event_log_not_kept')
    expectError(await admin(node.url, 'GET', `/admin/accounts/${account}/events/export?from=2026-01-01T00:00:00Z`), 'event_log_not_kept')
    // Still serving after them.
    expect((await admin(node.url, 'GET', `/admin/accounts/${account}`)).status).to.equal(200)
  })
})
