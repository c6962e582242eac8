// An outbox row resent after a takeover keeps its webhook-id, real processes: a 3-server NATS
// JetStream cluster (R3), 3 Beacon nodes (test/helpers/beacon-cluster.ts) and a real HTTP sink. The
// last rows of a partition are above its owner's last recorded watermark, so when the owner dies the
// new owner resends them (docs/cluster.md, "Outbox rows across a takeover"): the receiver must see each
// event under one webhook-id only, and a webhook-id it sees twice must carry the same payload. Both the
// window after delivery (owner SIGKILLed once everything arrived) and the one around the relay (owner
// SIGSTOPped right after its last write was acknowledged, then SIGKILLed) are taken. Timings printed.

import { expect } from 'chai'
import { admin, post, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster, type ClusterMember } from '../helpers/beacon-cluster.js'
import { pauseProcess } from '../helpers/pause.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'

describe('Beacon cluster mode: a row resent by a new owner keeps its webhook-id (3 nodes, real processes)', function () {
  this.timeout(600_000)
  let cluster: BeaconCluster
  let receiver: Receiver

  before(async () => {
    receiver = await startReceiver()
    cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' })
    await cluster.settled()
    const res = await admin(cluster.members[0]!.url, 'PUT', `/admin/accounts/${cluster.tenant.account}/webhooks/purchases`, {
      name: 'purchases', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `${receiver.url}/purchases`, payload: '{"who": "{{visitorId}}"}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201])
    for (const member of cluster.live()) {
      await until(`the webhook on ${member.id}`, async () => (await admin(member.url, 'GET', `/admin/accounts/${cluster.tenant.account}/webhooks/purchases`)).status === 200, 5_000, 10)
    }
  })
  after(async () => {
    await cluster?.close()
    await receiver?.close()
  })

  /** One purchase per visitor, each through another live node (forwarded to its owner); sequential, all acknowledged. */
  const purchase = async (visitors: string[], round: string): Promise<void> => {
    const live = cluster.live()
    for (const [i, v] of visitors.entries()) {
      const res = await post(live[i % live.length]!.url, '/campaigns/query', { account: cluster.tenant.account, visitorId: v, platform: 'web', event: 'purchase', orderId: `${round}-${i}` })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
  }
  const requests = (): Array<{ id: string, body: string, key: string }> => receiver.requests.filter(r => r.url === '/purchases').map(r => {
    // One purchase per visitor: the visitor names the event.
    return { id: String(r.headers['webhook-id']), body: r.body, key: (JSON.parse(r.body) as { who: string }).who }
  })
  const deliveredOf = (visitors: string[]): number => {
    const wanted = new Set(visitors)
    return new Set(requests().map(r => r.key).filter(who => wanted.has(who))).size
  }
  /**
   * The records the live nodes hold of rows `dead` first wrote (resent after the takeover): their ids
   * start with its data folder's id. Each must be one the sink received (the same delivery).
   */
  const resentRecords = async (dead: ClusterMember, visitors: string[]): Promise<Array<{ id: string, status: string }>> => {
    const wanted = new Set(visitors)
    const out: Array<{ id: string, status: string }> = []
    for (const member of cluster.live()) {
      let after = 0
      for (;;) {
        const page = await admin<{ deliveries: Array<{ id: string, status: string, context: { visitorId: string } }>, next: number | null }>(member.url, 'GET', `/admin/accounts/${cluster.tenant.account}/webhooks/purchases/deliveries?limit=500&after=${after}`)
        expect(page.status, JSON.stringify(page.body)).to.equal(200)
        for (const record of page.body.deliveries) {
          if (wanted.has(record.context.visitorId) && record.id.startsWith(`${dead.folderId}:`)) out.push({ id: record.id, status: record.status })
        }
        if (page.body.next === null) break
        after = page.body.next
      }
    }
    const received = new Set(requests().map(r => r.id))
    expect(out.filter(record => !received.has(record.id)), 'resent records under an id the sink never received').to.deep.equal([])
    const statuses = new Map<string, number>()
    for (const record of out) statuses.set(record.status, (statuses.get(record.status) ?? 0) + 1)
    console.log(`      ${out.length} records of ${dead.id}'s rows resent by the new owners, under ${dead.id}'s ids: ${JSON.stringify(Object.fromEntries(statuses))}`)
    return out
  }

  /** Every event of these visitors under exactly one webhook-id, and a webhook-id seen twice with the same payload. */
  const check = (what: string, visitors: string[]): void => {
    const wanted = new Set(visitors)
    const idsByEvent = new Map<string, Set<string>>()
    const bodiesById = new Map<string, Set<string>>()
    const postsById = new Map<string, number>()
    const mine = requests().filter(r => wanted.has(r.key))
    for (const r of mine) {
      idsByEvent.set(r.key, (idsByEvent.get(r.key) ?? new Set()).add(r.id))
      bodiesById.set(r.id, (bodiesById.get(r.id) ?? new Set()).add(r.body))
      postsById.set(r.id, (postsById.get(r.id) ?? 0) + 1)
    }
    const resentEvents = [...idsByEvent].filter(([, ids]) => ids.size > 1)
    const twice = [...postsById.values()].filter(n => n > 1).length
    console.log(`      ${what}: ${mine.length} requests for ${idsByEvent.size} events; ${twice} webhook-ids received more than once; ` +
      `${resentEvents.length} events under more than one webhook-id${resentEvents.length > 0 ? ` (e.g. ${resentEvents[0]![0]}: ${[...resentEvents[0]![1]].join(', ')})` : ''}`)
    expect([...bodiesById].filter(([, bodies]) => bodies.size > 1), 'webhook-ids carrying different payloads').to.deep.equal([])
    expect(resentEvents.map(([event, ids]) => `${event}: ${[...ids].join(', ')}`), 'events received under more than one webhook-id').to.deep.equal([])
  }

  it('sends a row resent after its owner was SIGKILLed (delivered already) under the same webhook-id', async () => {
    const visitors = Array.from({ length: 90 }, () => visitorId())
    await purchase(visitors, 'a')
    await until('90 purchases delivered', () => deliveredOf(visitors) === 90, 60_000, 20)
    const before = requests().length
    const killedMs = Date.now()
    await cluster.kill(0)
    await cluster.settled()
    console.log(`      node-1 SIGKILLed, the survivors own its partitions ${Date.now() - killedMs} ms later`)
    // The new owners resend the rows above node-1's last watermark: they arrive within a few relays.
    await new Promise(resolve => setTimeout(resolve, 3000))
    console.log(`      ${requests().length - before} requests after the kill`)
    check('after the kill', visitors)
    // The rows above node-1's last watermark were resent: at least the last of each of its partitions.
    expect((await resentRecords(cluster.members[0]!, visitors)).length).to.be.above(0)
  })

  it('keeps the webhook-id when the owner is paused right after its last write, then SIGKILLed', async () => {
    await cluster.restart(0)
    await cluster.settled()
    const visitors = Array.from({ length: 90 }, () => visitorId())
    await purchase(visitors, 'b')
    // node-2 stops at once: some of its rows may be relayed (perhaps delivered by another node), some not.
    await pauseProcess(cluster.members[1]!.process!.child.pid!)
    await cluster.kill(1)
    await cluster.settled()
    // Records node-2's consumer held come back after the stream's ack wait (30 s).
    await until('90 purchases delivered', () => deliveredOf(visitors) === 90, 90_000, 50).catch((error: Error) => {
      throw new Error(`${error.message} (${deliveredOf(visitors)} delivered)`)
    })
    await new Promise(resolve => setTimeout(resolve, 3000))
    check('after the pause and kill', visitors)
    expect((await resentRecords(cluster.members[1]!, visitors)).length).to.be.above(0)
  })
})
