// Cross-partition work in cluster mode, real processes (issue 17): a visitor and its profile placed in
// partitions owned by different nodes. Events with a profileId stitch the visitor to its profile and
// sum its behaviour into the profile's copy exactly as the embedded mode does; the profile's attributes
// are seen by the visitor's campaigns; a SIGKILL of the profile's owner under concurrent purchases
// leaves counts exact; erase and export of a profile through any node reach its visitors in other
// partitions. Lags are printed, never asserted.

import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { partitionOf } from '../../src/cluster/partition.js'
import { admin, identified, post } from '../helpers/beacon.js'
import { CLUSTER_PARTITIONS, startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'

interface Person { profileId: string, visitors: string[] }

describe('Beacon cluster mode: cross-partition work (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let owners: Map<number, string>

  before(async () => {
    cluster = await startBeaconCluster(3)
    owners = await cluster.settled()
    const { account } = cluster.tenant
    const gold = {
      name: 'Gold members', status: 'active', priority: 1,
      trigger: { events: ['pageView'] },
      rule: { all: [{ fact: 'attribute.tier', op: 'eq', value: 'gold' }] },
      content: { banner: 'gold.png' },
    }
    const put = await admin(cluster.live()[0]!.url, 'PUT', `/admin/accounts/${account}/campaigns/gold`, gold)
    expect(put.status, JSON.stringify(put.body)).to.equal(200)
  })
  after(async () => {
    await cluster?.close()
  })

  const ownerOf = (id: string): string => owners.get(partitionOf(cluster.tenant.account, id, CLUSTER_PARTITIONS))!
  let turn = 0
  const nextUrl = (): string => {
    const live = cluster.live()
    return live[turn++ % live.length]!.url
  }

  /** A profile owned by `profileOwner` (any when null) and `count` visitors, each owned by another node. */
  function person (count: number, profileOwner: string | null = null): Person {
    let profileId = `p-${randomUUID()}@example.com`
    while (ownerOf(profileId) !== (profileOwner ?? ownerOf(profileId))) profileId = `p-${randomUUID()}@example.com`
    const visitors: string[] = []
    while (visitors.length < count) {
      const id = randomUUID()
      if (ownerOf(id) !== ownerOf(profileId)) visitors.push(id)
    }
    return { profileId, visitors }
  }

  async function event (visitorId: string, profileId: string | null, fields: Record<string, unknown>, url = nextUrl()): Promise<{ status: number, body: any }> {
    const { account, token } = cluster.tenant
    const identity = profileId === null ? {} : identified(cluster.tenant, profileId)
    return await post(url, '/campaigns/query', { account, token, visitorId, platform: 'web', event: 'pageView', ...identity, ...fields })
  }

  async function profileOf (profileId: string, url = nextUrl()): Promise<any> {
    const res = await admin(url, 'GET', `/admin/accounts/${cluster.tenant.account}/profiles/${encodeURIComponent(profileId)}`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body
  }

  async function visitorOf (visitorId: string, url = nextUrl()): Promise<any> {
    const res = await admin(url, 'GET', `/admin/accounts/${cluster.tenant.account}/visitors/${visitorId}`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body
  }

  it('an event with a profileId whose partition another node owns stitches the visitor to the profile', async () => {
    const { profileId, visitors: [visitorId] } = person(1)
    const res = await event(visitorId!, profileId, {})
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    expect((await visitorOf(visitorId!)).profileId).to.equal(profileId)
    const profile = await profileOf(profileId)
    expect(profile.visitors).to.deep.equal([visitorId])
    expect(profile.devices[visitorId!].behaviour.pageViews).to.equal(1)
  })
})
