// A native destination across a takeover, real processes: a 3-server NATS JetStream cluster (R3), 3
// Beacon nodes (test/helpers/beacon-cluster.ts) and the Meta Conversions API contract double. As for
// webhooks (test/cluster/delivery-ids.test.ts, which this mirrors), the last outbox rows of a partition
// are above its owner's last recorded watermark, so when the owner dies the new owner resends them; a
// meta-capi destination sends each event's event_id as the delivery's webhook-id, which a resent row
// keeps (its first owner's): Meta, deduplicating on event_id, sees each purchase under one event_id
// only, and an event_id seen twice carries the same event. Both windows are taken: the owner SIGKILLed
// once everything arrived, and the owner SIGSTOPped right after its last write, then SIGKILLed. The
// deliveries log through every node lists every record once. Timings printed, never asserted.

import { expect } from 'chai'
import { admin, post, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster, type ClusterMember } from '../helpers/beacon-cluster.js'
import { pauseProcess } from '../helpers/pause.js'
import { until } from '../helpers/until.js'
import { MetaCapiDouble } from '../destinations/doubles/meta-capi-double.js'

interface Listed { id: string, messageId?: string, status: string, context: { visitorId?: string } }

const PURCHASES = 60
/** BEACON_NATS_ACK_WAIT_MS of the nodes: an attempt a kill cut is made again after it. */
const ACK_WAIT_MS = 5000

describe('Beacon cluster mode: a meta-capi destination across a takeover sends each event under one event_id (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let meta: MetaCapiDouble
  const startedMs = Date.now()

  before(async () => {
    meta = await new MetaCapiDouble().start()
    cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_NATS_ACK_WAIT_MS: String(ACK_WAIT_MS) })
    await cluster.settled()
    const res = await admin(cluster.members[0]!.url, 'PUT', `/admin/accounts/${cluster.tenant.account}/destinations/meta`, {
      type: 'meta-capi', name: 'Meta', enabled: true, events: ['purchase'], credentials: { accessToken: 'meta-token' },
      settings: { pixelId: '1234567890', apiBaseUrl: meta.url, siteUrl: 'https://shop.example', timeoutMs: 2000 },
    })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    for (const member of cluster.live()) {
      await until(`the destination on ${member.id}`, async () => (await admin(member.url, 'GET', `/admin/accounts/${cluster.tenant.account}/destinations/meta`)).status === 200, 15_000, 10)
    }
  })
  after(async () => {
    await cluster?.close()
    await meta?.close()
    console.log(`      file total ${Date.now() - startedMs} ms`)
  })

  /** One purchase per visitor (the order id names it), each through another live node; sequential, all acknowledged. */
  const purchase = async (visitors: string[], round: string): Promise<void> => {
    const live = cluster.live()
    for (const [i, v] of visitors.entries()) {
      const res = await post(live[i % live.length]!.url, '/campaigns/query', {
        account: cluster.tenant.account, visitorId: v, platform: 'web', event: 'purchase', orderId: `${round}-${i}`, orderTotal: 10, currency: 'eur', path: '/done', userAgent: 'Mozilla/5.0 (test)',
      })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
  }
  const received = (round: string): Array<{ order: string, id: string, body: string }> => meta.events
    .filter(event => String(event.custom_data?.order_id).startsWith(`${round}-`))
    .map(event => ({ order: String(event.custom_data!.order_id), id: String(event.event_id), body: JSON.stringify(event) }))
  const deliveredOf = (round: string): number => new Set(received(round).map(event => event.order)).size
  const webhookIdOf = (record: Listed): string => record.messageId ?? record.id

  /** Every record of these visitors, as the destination's deliveries log through `member` lists it. */
  const listed = async (member: ClusterMember, visitors: Set<string>): Promise<Listed[]> => {
    const records: Listed[] = []
    let after: string | null = ''
    for (let pages = 0; after !== null; pages++) {
      expect(pages, 'pages').to.be.below(100)
      const query: string = `?limit=100${after === '' ? '' : `&after=${encodeURIComponent(after)}`}`
      const page = await admin(member.url, 'GET', `/admin/accounts/${cluster.tenant.account}/destinations/meta/deliveries${query}`)
      expect(page.status, JSON.stringify(page.body)).to.equal(200)
      for (const record of page.body.deliveries as Listed[]) if (visitors.has(record.context.visitorId ?? '')) records.push(record)
      after = page.body.next === null ? null : String(page.body.next)
    }
    return records
  }

  /**
   * The log through every live node: every record once, the same set through each, none unsettled once
   * Meta has its event_id. Answers the records of rows `dead` first wrote that the others resent.
   */
  const checkLog = async (dead: ClusterMember, visitors: string[], rounds: string[], timeoutMs: number): Promise<Listed[]> => {
    const wanted = new Set(visitors)
    let records: Listed[] = []
    let unsettled: Listed[] = []
    const ids = (): Set<string> => new Set(rounds.flatMap(round => received(round).map(event => event.id)))
    await until('every record Meta took listed as delivered through every node', async () => {
      const seen = ids()
      const sets = new Set<string>()
      for (const member of cluster.live()) {
        const mine = await listed(member, wanted)
        const listedIds = mine.map(record => record.id)
        expect(listedIds.filter((id, i) => listedIds.indexOf(id) !== i), `ids listed twice through ${member.id}`).to.deep.equal([])
        sets.add(listedIds.sort().join(' '))
        records = mine
      }
      unsettled = records.filter(record => record.status !== 'delivered' && seen.has(webhookIdOf(record)))
      return sets.size === 1 && unsettled.length === 0
    }, timeoutMs, 200).catch((error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(unsettled.map(record => [record.id, record.messageId, record.status]))}`)
    })
    const seen = ids()
    const resent = records.filter(record => webhookIdOf(record).startsWith(`${dead.folderId}:`) && !record.id.startsWith(`${dead.folderId}:`))
    expect(resent.filter(record => !seen.has(webhookIdOf(record))).map(record => record.id), 'resent records under an event_id Meta never received').to.deep.equal([])
    console.log(`      log through ${cluster.live().length} nodes: ${records.length} records once each; ${resent.length} of ${dead.id}'s rows resent by the new owners under ${dead.id}'s ids`)
    return resent
  }

  /** Every purchase of the round at Meta under exactly one event_id, and an event_id seen twice with the same event. */
  const check = (what: string, round: string): void => {
    const idsByOrder = new Map<string, Set<string>>()
    const bodiesById = new Map<string, Set<string>>()
    const events = received(round)
    for (const event of events) {
      idsByOrder.set(event.order, (idsByOrder.get(event.order) ?? new Set()).add(event.id))
      bodiesById.set(event.id, (bodiesById.get(event.id) ?? new Set()).add(event.body))
    }
    const twice = events.length - bodiesById.size
    console.log(`      ${what}: ${events.length} events at Meta for ${idsByOrder.size} purchases; ${twice} received again under their event_id`)
    expect(idsByOrder.size, 'purchases received').to.equal(PURCHASES)
    expect([...bodiesById].filter(([, bodies]) => bodies.size > 1), 'event_ids carrying different events').to.deep.equal([])
    expect([...idsByOrder].filter(([, ids]) => ids.size > 1).map(([order, ids]) => `${order}: ${[...ids].join(', ')}`), 'purchases under more than one event_id').to.deep.equal([])
  }

  const first = Array.from({ length: PURCHASES }, () => visitorId())

  it('sends a row resent after its owner was SIGKILLed (delivered already) under the same event_id', async () => {
    await purchase(first, 'a')
    await until(`${PURCHASES} purchases at Meta`, () => deliveredOf('a') === PURCHASES, 30_000, 20)
    const killedMs = Date.now()
    await cluster.kill(0)
    await cluster.settled()
    console.log(`      node-1 SIGKILLed, the survivors own its partitions ${Date.now() - killedMs} ms later`)
    const resent = await checkLog(cluster.members[0]!, first, ['a'], 4 * ACK_WAIT_MS)
    check('after the kill', 'a')
    expect(resent.length).to.be.above(0)
  })

  it('keeps the event_id when the owner is paused right after its last write, then SIGKILLed', async () => {
    await cluster.restart(0)
    await cluster.settled()
    const visitors = Array.from({ length: PURCHASES }, () => visitorId())
    await purchase(visitors, 'b')
    const pausedMs = Date.now()
    await pauseProcess(cluster.members[1]!.process!.child.pid!)
    await cluster.kill(1)
    await cluster.settled()
    await until(`${PURCHASES} purchases at Meta`, () => deliveredOf('b') === PURCHASES, 20_000 + 2 * ACK_WAIT_MS, 50).catch((error: Error) => {
      throw new Error(`${error.message} (${deliveredOf('b')} delivered)`)
    })
    console.log(`      ${PURCHASES} purchases at Meta ${Date.now() - pausedMs} ms after the pause`)
    const resent = await checkLog(cluster.members[1]!, [...first, ...visitors], ['a', 'b'], 4 * ACK_WAIT_MS)
    check('after the pause and kill', 'b')
    check('round a, node-1 back', 'a')
    expect(resent.length).to.be.above(0)
  })
})
