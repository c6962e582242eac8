// Cluster mode refuses the reads that walk many stored visitors (people search, the recently active,
// the segment preview): each node holds only its own partitions' rows, so they answer 501
// cluster_unsupported rather than a part of the people (src/http/people-routes.ts). Real processes: a
// NATS JetStream cluster and one Beacon node (test/helpers/beacon-cluster.ts).

import { admin } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { expectError } from '../helpers/errors.js'

describe('Beacon cluster mode: people search and segment preview are refused (501)', function () {
  this.timeout(120_000)
  let cluster: BeaconCluster

  before(async () => {
    cluster = await startBeaconCluster(1)
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
  })

  it('answers 501 cluster_unsupported to the search, the recently active and the preview; 404 for an unknown account first', async () => {
    const base = cluster.members[0]!.url
    const account = cluster.tenant.account
    expectError(await admin(base, 'GET', `/admin/accounts/${account}/people?attribute=email`), 'cluster_unsupported')
    expectError(await admin(base, 'GET', `/admin/accounts/${account}/people/recent`), 'cluster_unsupported')
    expectError(await admin(base, 'POST', `/admin/accounts/${account}/segments-preview`, { rule: { fact: 'attribute.plan', op: 'eq', value: 'pro' } }), 'cluster_unsupported')
    expectError(await admin(base, 'GET', '/admin/accounts/00000000-0000-4000-8000-000000000000/people'), 'account_not_found')
  })
})
