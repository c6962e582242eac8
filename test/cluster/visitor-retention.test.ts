// The retention of inactive anonymous visitors in cluster mode, real processes: a 3-server NATS
// JetStream cluster (R3) and 3 Beacon nodes (test/helpers/beacon-cluster.ts) with a retention of
// 0.0001 day (8.64 s) swept every second. Each node erases the inactive anonymous visitors of the
// partitions it owns, through their changelog: a node SIGKILLed afterwards has its partitions recovered
// by the others, and none of the erased comes back; a visitor kept active and the linked ones stay.
// Timings are printed, never asserted.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { admin, identified, post, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { until } from '../helpers/until.js'

describe('Beacon cluster mode: retention of inactive anonymous visitors (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster

  before(async () => {
    cluster = await startBeaconCluster(3, { BEACON_VISITOR_RETENTION_DAYS: '0.0001', BEACON_VISITOR_RETENTION_SWEEP_MS: '1000' })
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
  })

  const urlOf = (i: number): string => cluster.live()[i % cluster.live().length]!.url
  const account = (): string => cluster.tenant.account
  const event = async (i: number, id: string, extra: Record<string, unknown> = {}): Promise<void> => {
    const res = await post(urlOf(i), '/campaigns/query', { account: account(), visitorId: id, platform: 'web', event: 'pageView', ...extra })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  /** The visitor as its partition's owner holds it (any node forwards there). */
  const visitor = async (i: number, id: string): Promise<{ firstSeen: string | null, profileId: string | null, counts: Record<string, number> }> => {
    const res = await admin(urlOf(i), 'GET', `/admin/accounts/${account()}/visitors/${id}`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body
  }

  it('erases them at their partitions\' owners through the changelog; a recovery brings none back; active and linked ones stay', async () => {
    const anonymous = Array.from({ length: 30 }, () => visitorId())
    const linked = Array.from({ length: 6 }, () => visitorId())
    const active = visitorId()
    const startedMs = Date.now()
    for (const [i, id] of anonymous.entries()) await event(i, id)
    for (const [i, id] of linked.entries()) await event(i, id, identified(cluster.tenant, `person-${i}`))
    // One visitor keeps coming back, every second, while the others expire.
    let views = 0
    const comingBack = { yes: true }
    const activity = (async () => {
      while (comingBack.yes) {
        await event(views, active)
        views++
        await new Promise(resolve => setTimeout(resolve, 1000))
      }
    })()
    try {
      await until('every inactive anonymous visitor erased', async () => {
        for (const [i, id] of anonymous.entries()) if ((await visitor(i, id)).firstSeen !== null) return false
        return true
      }, 120_000, 250)
    } finally {
      comingBack.yes = false
      await activity
    }
    console.log(`      ${anonymous.length} erased ${((Date.now() - startedMs) / 1000).toFixed(1)} s after their events (retention 8.64 s)`)
    expect((await visitor(0, active)).counts).to.deep.equal({ pageView: views })
    for (const [i, id] of linked.entries()) expect((await visitor(i, id)).profileId).to.equal(`person-${i}`)

    // A SIGKILLed node's partitions are recovered from the changelog by the others: the erasures are in it.
    await cluster.kill(0)
    await cluster.settled()
    for (const [i, id] of anonymous.entries()) expect((await visitor(i, id)).firstSeen, id).to.equal(null)
    await cluster.restart(0)
    await cluster.settled()
    for (const [i, id] of anonymous.entries()) expect((await visitor(i, id)).firstSeen, id).to.equal(null)
    for (const [i, id] of linked.entries()) expect((await visitor(i, id)).profileId).to.equal(`person-${i}`)
    // No node's store holds a row of them (owners erased theirs; recoveries applied the erasures).
    for (let i = 0; i < 3; i++) await cluster.stop(i)
    let linkedRows = 0
    for (const member of cluster.members) {
      const store = new Store({ path: member.dataDir, durability: 'committed' })
      try {
        for (const id of anonymous) expect(store.visitors.get([account(), id]), `${member.id}'s row of ${id}`).to.equal(undefined)
        for (const id of linked) if (store.visitors.get([account(), id]) !== undefined) linkedRows++
      } finally {
        await store.close()
      }
    }
    expect(linkedRows).to.be.at.least(linked.length)
  })
})
