// The route map and the route hint of cluster mode on a real 3-node cluster (dist/src/main.js, a real
// 3-server NATS cluster): GET /cluster/routes (public, cacheable, no secrets) and `routes` of GET
// /admin/cluster agree with the leases and with partitionOf; every answer of a keyed public request
// names its key's owner in Beacon-Route (served there, or forwarded from another node), with a
// beacon_route cookie unless the request's cookie names that node already; BEACON_PUBLIC_URL is what
// the map gives as a node's URL. Embedded mode answers without any of it.

import { expect } from 'chai'
import { partitionOf } from '../../src/cluster/partition.js'
import { startBeaconCluster, CLUSTER_PARTITIONS, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { discardBeacon, post, startBeacon, startWithTenant, visitorId, type BeaconProcess } from '../helpers/beacon.js'
import { until } from '../helpers/until.js'

interface RouteMapAnswer { version: number, partitions: number, nodes: Record<string, { url: string }>, owners: Array<string | null> }

async function routesOf (url: string): Promise<{ status: number, cache: string | null, body: RouteMapAnswer }> {
  const res = await fetch(`${url}/cluster/routes`)
  return { status: res.status, cache: res.headers.get('cache-control'), body: await res.json() as RouteMapAnswer }
}

describe('GET /cluster/routes and the Beacon-Route hint (3 nodes)', function () {
  this.timeout(240_000)
  let cluster: BeaconCluster
  let owners: Map<number, string>

  before(async () => {
    cluster = await startBeaconCluster(3)
    owners = await cluster.settled()
  })

  after(async () => {
    await cluster?.close()
  })

  it('answers every node the same map without a key: the lease holders, each node\'s URL, cacheable for a second', async () => {
    // Each node's URL is published once it listens: poll until every node names all three.
    let answers: Array<Awaited<ReturnType<typeof routesOf>>> = []
    await until('every node maps every partition to a node with a URL', async () => {
      answers = await Promise.all(cluster.members.map(member => routesOf(member.url)))
      return answers.every(answer => answer.body.owners.every(owner => owner !== null) && Object.keys(answer.body.nodes).length === 3)
    }, 30_000, 50)
    owners = await cluster.settled()
    answers = await Promise.all(cluster.members.map(member => routesOf(member.url)))
    for (const answer of answers) {
      expect(answer.status).to.equal(200)
      expect(answer.cache).to.equal('public, max-age=1')
      expect(Object.keys(answer.body).sort()).to.deep.equal(['nodes', 'owners', 'partitions', 'version'])
      expect(answer.body.partitions).to.equal(CLUSTER_PARTITIONS)
      expect(answer.body.owners).to.have.length(CLUSTER_PARTITIONS)
      for (const [partition, owner] of owners) expect(answer.body.owners[partition]).to.equal(owner)
      expect(answer.body.nodes).to.deep.equal(Object.fromEntries(cluster.members.map(member => [member.id, { url: member.url }])))
      expect(answer.body.version).to.equal(answers[0]!.body.version)
      expect(JSON.stringify(answer.body)).to.not.include(cluster.tenant.token)
    }
    const status = await cluster.status(cluster.members[0]!) as unknown as { routes: RouteMapAnswer }
    expect(status.routes).to.deep.equal(answers[0]!.body)
  })

  it('names the owner of the visitor (lower case) in Beacon-Route, served there or forwarded, with a cookie unless it names that node already', async () => {
    const { account, token } = cluster.tenant
    for (let i = 0; i < 6; i++) {
      const visitor = visitorId()
      const owner = owners.get(partitionOf(account, visitor, CLUSTER_PARTITIONS))!
      for (const member of cluster.members) {
        // Sent in upper case: the key is the lower-case id.
        const event = await post(member.url, '/campaigns/query', { account, visitorId: visitor.toUpperCase(), platform: 'web', event: 'pageView', path: '/' })
        expect(event.status).to.equal(200)
        expect(event.headers.get('beacon-route'), `${member.id}, owner ${owner}`).to.equal(owner)
        expect(event.headers.get('set-cookie')).to.equal(`beacon_route=${owner}; Path=/; SameSite=Lax; HttpOnly`)
        const withCookie = await post(member.url, '/visitors/query', { account, token, visitorId: visitor }, { headers: { cookie: `a=b; beacon_route=${owner}` } })
        expect(withCookie.status).to.equal(200)
        expect(withCookie.headers.get('beacon-route')).to.equal(owner)
        expect(withCookie.headers.get('set-cookie')).to.equal(null)
        const staleCookie = await post(member.url, '/visitors/attributes', { account, token, visitorId: visitor, attributes: { n: i } }, { headers: { cookie: 'beacon_route=node-9' } })
        expect(staleCookie.status).to.equal(200)
        expect(staleCookie.headers.get('set-cookie')).to.equal(`beacon_route=${owner}; Path=/; SameSite=Lax; HttpOnly`)
      }
    }
  })

  it('keys the profile routes on the profileId as sent, and refusals of a keyed request carry the hint too', async () => {
    const { account, token } = cluster.tenant
    const profile = `Ana-${visitorId()}@Example.com`
    const owner = owners.get(partitionOf(account, profile, CLUSTER_PARTITIONS))!
    for (const member of cluster.members) {
      const written = await post(member.url, '/profiles/attributes', { account, token, profileId: profile, attributes: { plan: 'pro' } })
      expect(written.status).to.equal(200)
      expect(written.headers.get('beacon-route')).to.equal(owner)
      const refused = await post(member.url, '/profiles/query', { account, token: 'bk_wrong', profileId: profile })
      expect(refused.status).to.equal(401)
      expect(refused.headers.get('beacon-route')).to.equal(owner)
    }
  })

  it('gives a node\'s BEACON_PUBLIC_URL as its URL', async () => {
    let extra: BeaconProcess | undefined
    try {
      extra = await startBeacon({ dataDir: await cluster.seededDir(), env: cluster.env('node-4', { BEACON_PUBLIC_URL: 'https://node-4.beacon.example/api/' }) })
      await until('node-1 maps a partition to node-4, at its public URL', async () => {
        const { body } = await routesOf(cluster.members[0]!.url)
        return body.owners.includes('node-4') && body.nodes['node-4']?.url === 'https://node-4.beacon.example/api'
      }, 60_000, 50)
    } finally {
      await extra?.stop()
    }
  })
})

describe('Embedded mode: no route hint', function () {
  this.timeout(60_000)
  let beacon: BeaconProcess | undefined

  after(async () => {
    await discardBeacon(beacon)
  })

  it('answers a public request without Beacon-Route nor cookie, and has no /cluster/routes', async () => {
    const started = await startWithTenant()
    beacon = started.beacon
    const answer = await post(beacon.url, '/campaigns/query', { account: started.tenant.account, visitorId: visitorId(), platform: 'web', event: 'pageView', path: '/' })
    expect(answer.status).to.equal(200)
    expect(answer.headers.get('beacon-route')).to.equal(null)
    expect(answer.headers.get('set-cookie')).to.equal(null)
    expect((await fetch(`${beacon.url}/cluster/routes`)).status).to.equal(404)
  })
})
