// POST /events/batch in cluster mode, real processes: a 3-server NATS JetStream cluster and 3 Beacon nodes
// (test/helpers/beacon-cluster.ts). One batch sent to one node carries events of visitors whose partitions
// all three nodes own: the node applies its own and sends each other partition's events to its owner;
// every event is applied exactly once, wherever it was sent from. The same events sent again with their
// messageIds, through another node and again after the owner of a third of them was SIGKILLed and its
// partitions taken over (the records recovered from the changelog), are acknowledged as duplicates and
// change nothing.

import { expect } from 'chai'
import { admin, post, visitorId, type Answer } from '../helpers/beacon.js'
import { CLUSTER_PARTITIONS, startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { partitionOf } from '../../src/cluster/partition.js'

const VISITORS = 24

describe('Beacon cluster mode: POST /events/batch across the owners of its events (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster

  before(async () => {
    cluster = await startBeaconCluster(3)
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
  })

  /** A batch through `url`, again on a 503 of the whole batch (a partition changing owner). */
  const send = async (url: string, events: Record<string, unknown>[]): Promise<Answer> => {
    for (let attempt = 1; ; attempt++) {
      const answer = await post(url, '/events/batch', { account: cluster.tenant.account, events })
      if (answer.status !== 503 || attempt === 10) return answer
      await new Promise(resolve => setTimeout(resolve, 200))
    }
  }
  const countsOf = async (url: string, who: string): Promise<Record<string, number>> => {
    const state = await admin(url, 'GET', `/admin/accounts/${cluster.tenant.account}/visitors/${who}`)
    expect(state.status, JSON.stringify(state.body)).to.equal(200)
    return state.body.counts
  }

  it('applies each event exactly once at its owner, and a messageId sent again (another node, after a takeover) once', async () => {
    const owners = await cluster.settled()
    const ownerOf = (who: string): string => owners.get(partitionOf(cluster.tenant.account, who, CLUSTER_PARTITIONS))!
    // VISITORS / 3 visitors of each node's partitions (drawn until each node has its share).
    const visitors: string[] = []
    const perOwner = new Map<string, number>()
    while (visitors.length < VISITORS) {
      const who = visitorId()
      const owner = ownerOf(who)
      if ((perOwner.get(owner) ?? 0) === VISITORS / 3) continue
      perOwner.set(owner, (perOwner.get(owner) ?? 0) + 1)
      visitors.push(who)
    }
    expect([...perOwner.values()], 'visitors of each owner').to.deep.equal([VISITORS / 3, VISITORS / 3, VISITORS / 3])
    // Two page views a visitor (one with a messageId, one without), a product view with one, and a refused event in the middle.
    const events: Record<string, unknown>[] = visitors.flatMap((who, i) => [
      { visitorId: who, platform: 'web', event: 'pageView', path: `/p/${i}`, messageId: `view-${who}` },
      { visitorId: who, platform: 'web', event: 'pageView', path: `/q/${i}` },
      { visitorId: who, platform: 'web', event: 'productView', sku: `sku-${i}`, messageId: `product-${who}` },
    ])
    events.splice(10, 0, { visitorId: visitors[0]!, platform: 'web', event: 'productView' })
    const first = await send(cluster.members[1]!.url, events)
    expect(first.status, JSON.stringify(first.body)).to.equal(200)
    const statuses = (first.body.results as { status: number }[]).map(r => r.status)
    expect(statuses, JSON.stringify(first.body.results)).to.deep.equal(events.map((_, i) => i === 10 ? 400 : 200))
    expect(first.body.results[10].error).to.include({ code: 'invalid_field', field: '/sku' })
    for (const who of visitors) expect(await countsOf(cluster.members[0]!.url, who), who).to.deep.equal({ pageView: 2, productView: 1 })

    // The events with a messageId again, through another node: all duplicates.
    const keyed = events.filter(event => event.messageId !== undefined)
    const again = await send(cluster.members[2]!.url, keyed)
    expect(again.body.results, JSON.stringify(again.body)).to.deep.equal(keyed.map(() => ({ status: 200, duplicate: true })))

    // The owner of a third of them dies; its partitions' new owners answer from the records in the changelog.
    await cluster.kill(0)
    await cluster.settled()
    const survivors = cluster.live()
    const afterKill = await send(survivors[0]!.url, keyed)
    expect(afterKill.status, JSON.stringify(afterKill.body)).to.equal(200)
    expect(afterKill.body.results, JSON.stringify(afterKill.body)).to.deep.equal(keyed.map(() => ({ status: 200, duplicate: true })))
    for (const who of visitors) expect(await countsOf(survivors[1]!.url, who), who).to.deep.equal({ pageView: 2, productView: 1 })
  })
})
