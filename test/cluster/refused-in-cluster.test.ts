// What cluster mode refuses, as a strategy chosen at start, never a crash nor half an answer: the reads
// that walk many stored visitors (people search, the recently active, the segment preview) answer 501
// cluster_unsupported, since each node holds only its own partitions' rows (src/http/people-routes.ts).
// (The event log is kept, replayed, reported on and backfilled from in cluster mode:
// test/cluster/event-log-any-node.test.ts, replay-any-node.test.ts, saved-reports-any-node.test.ts,
// backfill-any-node.test.ts.) Real processes: a NATS JetStream cluster and one Beacon node
// (test/helpers/beacon-cluster.ts).

import { admin } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { expectError } from '../helpers/errors.js'

describe('Beacon cluster mode: what it refuses with 501 (1 node, real processes)', function () {
  this.timeout(120_000)
  let cluster: BeaconCluster

  before(async () => {
    cluster = await startBeaconCluster(1)
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
  })

  it('answers 501 cluster_unsupported to the people search, the recently active and the segment preview; 404 for an unknown account first', async () => {
    const base = cluster.members[0]!.url
    const account = cluster.tenant.account
    expectError(await admin(base, 'GET', `/admin/accounts/${account}/people?attribute=email`), 'cluster_unsupported')
    expectError(await admin(base, 'GET', `/admin/accounts/${account}/people/recent`), 'cluster_unsupported')
    expectError(await admin(base, 'POST', `/admin/accounts/${account}/segments-preview`, { rule: { fact: 'attribute.plan', op: 'eq', value: 'pro' } }), 'cluster_unsupported')
    expectError(await admin(base, 'GET', '/admin/accounts/00000000-0000-4000-8000-000000000000/people'), 'account_not_found')
  })
})
