// An outbox row resent after a takeover is sent under its first webhook-id, real processes: a 3-server
// NATS JetStream cluster (R3), 3 Beacon nodes (test/helpers/beacon-cluster.ts) and a real HTTP sink. The
// last rows of a partition are above its owner's last recorded watermark, so when the owner dies the
// new owner resends them (docs/internals/cluster.md, "Outbox rows across a takeover"): the receiver must see each
// event under one webhook-id only, and a webhook-id it sees twice must carry the same payload. Both the
// window after delivery (owner SIGKILLed once everything arrived) and the one around the relay (owner
// SIGSTOPped right after its last write was acknowledged, then SIGKILLed) are taken. The resent row's
// record is the new owner's own (its id names it): the deliveries log through every node lists every
// record once, the first owner's (back after a restart) and the new owner's alike, and none stays
// pending once the sink took its webhook-id. Timings printed, never asserted.

import { expect } from 'chai'
import { admin, post, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster, type ClusterMember } from '../helpers/beacon-cluster.js'
import { pauseProcess } from '../helpers/pause.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'

interface Listed { id: string, messageId?: string, status: string, context: { visitorId?: string } }

const PURCHASES = 60
/** BEACON_NATS_ACK_WAIT_MS of the nodes: an attempt a kill cut is made again after it. */
const ACK_WAIT_MS = 5000

describe('Beacon cluster mode: a row resent by a new owner keeps its webhook-id (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let receiver: Receiver
  const startedMs = Date.now()

  before(async () => {
    receiver = await startReceiver()
    cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_NATS_ACK_WAIT_MS: String(ACK_WAIT_MS) })
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
    console.log(`      file total ${Date.now() - startedMs} ms`)
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
  /** The webhook-id a listed record's requests carry (a release without `messageId`: its id). */
  const webhookIdOf = (record: Listed): string => record.messageId ?? record.id

  /** Every record of these visitors, as the deliveries log through `member` lists it (following `next`). */
  const listed = async (member: ClusterMember, visitors: Set<string>): Promise<Listed[]> => {
    const records: Listed[] = []
    let after: string | null = ''
    for (let pages = 0; after !== null; pages++) {
      expect(pages, 'pages').to.be.below(100)
      const query: string = `?limit=100${after === '' ? '' : `&after=${encodeURIComponent(after)}`}`
      const page = await admin(member.url, 'GET', `/admin/accounts/${cluster.tenant.account}/webhooks/purchases/deliveries${query}`)
      expect(page.status, JSON.stringify(page.body)).to.equal(200)
      for (const record of page.body.deliveries as Listed[]) if (visitors.has(record.context.visitorId ?? '')) records.push(record)
      after = page.body.next === null ? null : String(page.body.next)
    }
    return records
  }

  /**
   * The deliveries log through every live node: every record once (no id twice), the same set through
   * each, and none pending or failed once the sink has its webhook-id (waited for, bounded: a record
   * whose attempt a killed node cut comes back after the ack wait). Answers the records of rows `dead`
   * first wrote that the others resent: a webhook-id `dead`'s data folder gave, an id of theirs; each
   * must have a webhook-id the sink received.
   */
  const checkLog = async (dead: ClusterMember, visitors: string[], timeoutMs: number): Promise<Listed[]> => {
    const wanted = new Set(visitors)
    let records: Listed[] = []
    let unsettled: Listed[] = []
    const waitedMs = Date.now()
    await until('every record the sink took listed as delivered through every node', async () => {
      const received = new Set(requests().map(r => r.id))
      const sets = new Set<string>()
      for (const member of cluster.live()) {
        const mine = await listed(member, wanted)
        const ids = mine.map(record => record.id)
        expect(ids.filter((id, i) => ids.indexOf(id) !== i), `ids listed twice through ${member.id}`).to.deep.equal([])
        sets.add(ids.sort().join(' '))
        records = mine
      }
      unsettled = records.filter(record => record.status !== 'delivered' && received.has(webhookIdOf(record)))
      // The same records through every node (a relay may have made one between two listings: again).
      return sets.size === 1 && unsettled.length === 0
    }, timeoutMs, 200).catch((error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(unsettled.map(record => [record.id, record.messageId, record.status]))}`)
    })
    const received = new Set(requests().map(r => r.id))
    const resent = records.filter(record => webhookIdOf(record).startsWith(`${dead.folderId}:`) && !record.id.startsWith(`${dead.folderId}:`))
    expect(resent.filter(record => !received.has(webhookIdOf(record))).map(record => record.id), 'resent records under a webhook-id the sink never received').to.deep.equal([])
    const shared = records.length - new Set(records.map(webhookIdOf)).size
    const statuses = new Map<string, number>()
    for (const record of records) statuses.set(record.status, (statuses.get(record.status) ?? 0) + 1)
    console.log(`      log through ${cluster.live().length} nodes: ${records.length} records once each ${JSON.stringify(Object.fromEntries(statuses))}, ` +
      `settled ${Date.now() - waitedMs} ms after the check began; ${resent.length} of ${dead.id}'s rows resent by the new owners under ${dead.id}'s webhook-ids; ` +
      `${shared} records sharing a webhook-id with another`)
    return resent
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
    expect(idsByEvent.size, 'events received').to.equal(visitors.length)
    expect([...bodiesById].filter(([, bodies]) => bodies.size > 1), 'webhook-ids carrying different payloads').to.deep.equal([])
    expect(resentEvents.map(([event, ids]) => `${event}: ${[...ids].join(', ')}`), 'events received under more than one webhook-id').to.deep.equal([])
  }

  const first = Array.from({ length: PURCHASES }, () => visitorId())

  it('sends a row resent after its owner was SIGKILLed (delivered already) under the same webhook-id', async () => {
    await purchase(first, 'a')
    await until(`${PURCHASES} purchases delivered`, () => deliveredOf(first) === PURCHASES, 30_000, 20)
    const before = requests().length
    const killedMs = Date.now()
    await cluster.kill(0)
    await cluster.settled()
    console.log(`      node-1 SIGKILLed, the survivors own its partitions ${Date.now() - killedMs} ms later`)
    // The new owners resent the rows above node-1's last watermark: listed, and attempted, within a few relays.
    const resent = await checkLog(cluster.members[0]!, first, 4 * ACK_WAIT_MS)
    console.log(`      ${requests().length - before} requests after the kill`)
    check('after the kill', first)
    // The rows above node-1's last watermark were resent: at least the last of each of its partitions.
    expect(resent.length).to.be.above(0)
  })

  it('keeps the webhook-id when the owner is paused right after its last write, then SIGKILLed; the first owner back lists its own records beside', async () => {
    await cluster.restart(0)
    await cluster.settled()
    const visitors = Array.from({ length: PURCHASES }, () => visitorId())
    await purchase(visitors, 'b')
    // node-2 stops at once: some of its rows may be relayed (perhaps delivered by another node), some not.
    const pausedMs = Date.now()
    await pauseProcess(cluster.members[1]!.process!.child.pid!)
    await cluster.kill(1)
    await cluster.settled()
    // Records node-2's consumer held come back after the stream's ack wait.
    await until(`${PURCHASES} purchases delivered`, () => deliveredOf(visitors) === PURCHASES, 20_000 + 2 * ACK_WAIT_MS, 50).catch((error: Error) => {
      throw new Error(`${error.message} (${deliveredOf(visitors)} delivered)`)
    })
    console.log(`      ${PURCHASES} purchases at the sink ${Date.now() - pausedMs} ms after the pause`)
    // node-1 (back) holds its records of round a, the survivors those they resent of them: all listed, once.
    const resent = await checkLog(cluster.members[1]!, [...first, ...visitors], 4 * ACK_WAIT_MS)
    check('after the pause and kill', visitors)
    check('round a, node-1 back', first)
    expect(resent.length).to.be.above(0)
  })
})
