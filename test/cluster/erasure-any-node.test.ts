// Erasing a person removes their webhook delivery records on every node, real processes: a 3-server
// NATS JetStream cluster (R3), 3 Beacon nodes (test/helpers/beacon-cluster.ts) and a real HTTP sink. A
// person's devices sit in partitions of all three nodes, so the records of their purchases are held by
// all three (a record lives in the LMDB of the node that relayed it: its id starts with that node's
// data folder id). Erased through one node, none of them is listed through any node afterwards, and
// another person's records stay; a node SIGKILLed before the erase and restarted after drops its
// records of the person once it is back (docs/internals/cluster.md, "Erasure and export in cluster mode").
// Timings are printed, never asserted.

import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { partitionOf } from '../../src/cluster/partition.js'
import { admin, identified, post } from '../helpers/beacon.js'
import { CLUSTER_PARTITIONS, startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'

interface Person { profileId: string, visitors: string[] }
interface Listed { id: string, context: { visitorId?: string, profileId?: string } }

describe('Beacon cluster mode: erasing a person removes their delivery records on every node (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let receiver: Receiver
  let owners = new Map<number, string>()

  before(async () => {
    receiver = await startReceiver(() => ({ status: 200 }))
    cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' })
    owners = await cluster.settled()
    const res = await admin(cluster.members[0]!.url, 'PUT', webhookPath(), {
      name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `${receiver.url}/orders`, payload: '{"who": "{{visitorId}}"}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, maxAttempts: 1 },
    })
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201])
    for (const member of cluster.live()) {
      await until(`webhook orders on ${member.id}`, async () => (await admin(member.url, 'GET', webhookPath())).status === 200, 5_000, 10)
    }
  })
  after(async () => {
    await cluster?.close()
    await receiver?.close()
  })

  function webhookPath (rest = ''): string {
    return `/admin/accounts/${cluster.tenant.account}/webhooks/orders${rest}`
  }
  const ownerOf = (id: string): string => owners.get(partitionOf(cluster.tenant.account, id, CLUSTER_PARTITIONS))!
  const holderOf = (record: Listed): string => cluster.members.find(member => record.id.startsWith(`${member.folderId}:`))?.id ?? '?'
  const carries = (person: Person) => (record: Listed): boolean =>
    record.context.profileId === person.profileId || person.visitors.includes(record.context.visitorId ?? '')

  /** A profile and two devices in partitions of each node. */
  function person (): Person {
    const visitors: string[] = []
    for (const member of cluster.members) {
      for (let found = 0; found < 2;) {
        const id = randomUUID()
        if (ownerOf(id) === member.id) {
          visitors.push(id)
          found++
        }
      }
    }
    return { profileId: `p-${randomUUID()}@example.com`, visitors }
  }

  /** A purchase of each device of `who`, identified as its profile, through the nodes in turn. */
  async function purchases (who: Person): Promise<void> {
    const { account, token } = cluster.tenant
    for (const [i, visitorId] of who.visitors.entries()) {
      const live = cluster.live()
      const answer = await post(live[i % live.length]!.url, '/campaigns/query', {
        account, token, visitorId, platform: 'web', event: 'purchase', orderId: `o-${randomUUID()}`, ...identified(cluster.tenant, who.profileId),
      })
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    }
  }

  /** The records of the orders webhook listed through `url` (the whole cluster: every live node's). */
  async function listed (url: string): Promise<Listed[]> {
    const res = await admin(url, 'GET', webhookPath('/deliveries?limit=500'))
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).to.equal(200)
    expect(res.body.next, 'one page').to.equal(null)
    return res.body.deliveries as Listed[]
  }

  /** Waits until every live node lists `count` records of `who`, and answers which nodes hold them. */
  async function heldBy (who: Person, count: number): Promise<Set<string>> {
    let last: Listed[] = []
    for (const member of cluster.live()) {
      await until(`${member.id} lists ${count} records of ${who.profileId}`, async () => {
        last = (await listed(member.url)).filter(carries(who))
        return last.length === count
      }, 30_000, 100).catch((error: Error) => { throw new Error(`${error.message} (${last.length})`) })
    }
    return new Set(last.map(holderOf))
  }

  async function erase (who: Person, url: string): Promise<void> {
    const res = await admin(url, 'DELETE', `/admin/accounts/${cluster.tenant.account}/profiles/${encodeURIComponent(who.profileId)}`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    expect(res.body.erased.visitors).to.equal(who.visitors.length)
  }

  /** Waits (at most 15 s) until no live node lists a record of `who`; answers how long it took. */
  async function goneEverywhere (who: Person): Promise<number> {
    const startedMs = Date.now()
    let left: Listed[] = []
    for (const member of cluster.live()) {
      await until(`no record of ${who.profileId} through ${member.id}`, async () => {
        left = (await listed(member.url)).filter(carries(who))
        return left.length === 0
      }, 15_000, 20).catch((error: Error) => { throw new Error(`${error.message}: ${left.length} left, held by ${[...new Set(left.map(holderOf))].join(', ')}`) })
    }
    return Date.now() - startedMs
  }

  it('removes the person\'s records on every node, and keeps another person\'s', async () => {
    const erased = person()
    const kept = person()
    await purchases(erased)
    await purchases(kept)
    const holders = await heldBy(erased, erased.visitors.length)
    expect([...holders].sort(), 'records of the person on every node').to.deep.equal(cluster.members.map(member => member.id).sort())
    await heldBy(kept, kept.visitors.length)
    await erase(erased, cluster.members[0]!.url)
    const tookMs = await goneEverywhere(erased)
    console.log(`      ${erased.visitors.length} records on 3 nodes: none listed through any node ${tookMs} ms after the erase answered`)
    await heldBy(kept, kept.visitors.length)
  })

  it('removes the person\'s records on a node that was down during the erase, once it is back', async () => {
    const erased = person()
    await purchases(erased)
    const holders = await heldBy(erased, erased.visitors.length)
    expect(holders.has(cluster.members[2]!.id), 'records on node 3').to.equal(true)
    await cluster.kill(2)
    // The erase goes through once the partitions of the killed node have new owners.
    await until('the erase answered', async () => {
      const res = await admin(cluster.members[0]!.url, 'DELETE', `/admin/accounts/${cluster.tenant.account}/profiles/${encodeURIComponent(erased.profileId)}`)
      if (res.status === 503) return false
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      return true
    }, 30_000, 200)
    await cluster.restart(2)
    const backMs = Date.now()
    await cluster.settled()
    const tookMs = await goneEverywhere(erased)
    console.log(`      node-3 back: none of its records of the person listed ${Date.now() - backMs} ms after it restarted (${tookMs} ms after the cluster settled)`)
  })
})
