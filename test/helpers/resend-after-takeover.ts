// An outbox row resent after a takeover goes out under its first id, real processes: a 3-server NATS
// JetStream cluster (R3), 3 Beacon nodes (test/helpers/beacon-cluster.ts) and a real HTTP server in
// the target's place. The last rows of a partition are above its owner's last recorded watermark, so
// when the owner dies the new owner resends them (docs/internals/cluster.md, "Outbox rows across a
// takeover"): the receiver must see each purchase under one id only (a webhook's webhook-id, Meta's
// event_id), and an id it sees twice must carry the same payload. Both the window after delivery (owner
// SIGKILLed once everything arrived) and the one around the relay (owner SIGSTOPped right after its last
// write was acknowledged, then SIGKILLed) are taken. The resent row's record is the new owner's own (its
// id names it): the deliveries log through every node lists every record once, the first owner's (back
// after a restart) and the new owner's alike, and none stays unsettled once the receiver took its id.
// test/cluster/delivery-ids.test.ts runs it for a webhook, destination-takeover.test.ts for a
// meta-capi destination. Timings printed, never asserted.

import { expect } from 'chai'
import { admin, post, visitorId } from './beacon.js'
import { startBeaconCluster, type BeaconCluster, type ClusterMember } from './beacon-cluster.js'
import { pauseProcess } from './pause.js'
import { until } from './until.js'

/** One purchase as the receiver got it: its order id, the id it was sent under, the payload. */
export interface Arrival { order: string, id: string, body: string }

export interface ResendTarget {
  /** What the receiver calls the id a purchase is sent under ('webhook-id', 'event_id'). */
  idName: string
  /** The target's admin path below the account, e.g. 'webhooks/purchases'. */
  path: string
  /**
   * Starts the receiver; answers the body of the PUT creating the target (sending to it), its arrivals
   * so far (every one, in order) and how to close it.
   */
  start (): Promise<{ config: unknown, arrivals (): Arrival[], close (): Promise<void> }>
  /** Fields every purchase carries besides account, visitorId, event and orderId. */
  purchase: Record<string, unknown>
}

interface Listed { id: string, messageId?: string, status: string, context: { visitorId?: string } }

const PURCHASES = 60
/** BEACON_NATS_ACK_WAIT_MS of the nodes: an attempt a kill cut is made again after it. */
const ACK_WAIT_MS = 5000

export function describeResendAfterTakeover (title: string, target: ResendTarget): void {
  describe(title, function () {
    this.timeout(300_000)
    let cluster: BeaconCluster
    let receiver: Awaited<ReturnType<ResendTarget['start']>>
    const startedMs = Date.now()
    const path = (): string => `/admin/accounts/${cluster.tenant.account}/${target.path}`

    before(async () => {
      receiver = await target.start()
      cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_NATS_ACK_WAIT_MS: String(ACK_WAIT_MS) })
      await cluster.settled()
      const res = await admin(cluster.members[0]!.url, 'PUT', path(), receiver.config)
      expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201])
      for (const member of cluster.live()) {
        await until(`the target on ${member.id}`, async () => (await admin(member.url, 'GET', path())).status === 200, 15_000, 10)
      }
    })
    after(async () => {
      await cluster?.close()
      await receiver?.close()
      console.log(`      file total ${Date.now() - startedMs} ms`)
    })

    /** One purchase per visitor (the order id names it), each through another live node (forwarded to its owner); sequential, all acknowledged. */
    const purchase = async (visitors: string[], round: string): Promise<void> => {
      const live = cluster.live()
      for (const [i, v] of visitors.entries()) {
        const res = await post(live[i % live.length]!.url, '/campaigns/query', { account: cluster.tenant.account, visitorId: v, event: 'purchase', orderId: `${round}-${i}`, ...target.purchase })
        expect(res.status, JSON.stringify(res.body)).to.equal(200)
      }
    }
    const arrived = (rounds: string[]): Arrival[] => receiver.arrivals().filter(arrival => rounds.some(round => arrival.order.startsWith(`${round}-`)))
    const deliveredOf = (round: string): number => new Set(arrived([round]).map(arrival => arrival.order)).size
    /** The id a listed record's requests carry (a release without `messageId`: its id). */
    const idOf = (record: Listed): string => record.messageId ?? record.id

    /** Every record of these visitors, as the deliveries log through `member` lists it (following `next`). */
    const listed = async (member: ClusterMember, visitors: Set<string>): Promise<Listed[]> => {
      const records: Listed[] = []
      let after: string | null = ''
      for (let pages = 0; after !== null; pages++) {
        expect(pages, 'pages').to.be.below(100)
        const query: string = `?limit=100${after === '' ? '' : `&after=${encodeURIComponent(after)}`}`
        const page = await admin(member.url, 'GET', `${path()}/deliveries${query}`)
        expect(page.status, JSON.stringify(page.body)).to.equal(200)
        for (const record of page.body.deliveries as Listed[]) if (visitors.has(record.context.visitorId ?? '')) records.push(record)
        after = page.body.next === null ? null : String(page.body.next)
      }
      return records
    }

    /**
     * The deliveries log through every live node: every record once (no id twice), the same set through
     * each, and none pending or failed once the receiver has its id (waited for, bounded: a record whose
     * attempt a killed node cut comes back after the ack wait). Answers the records of rows `dead` first
     * wrote that the others resent: an id `dead`'s data folder gave, a record id of theirs; each must
     * have an id the receiver got.
     */
    const checkLog = async (dead: ClusterMember, visitors: string[], rounds: string[], timeoutMs: number): Promise<Listed[]> => {
      const wanted = new Set(visitors)
      let records: Listed[] = []
      let unsettled: Listed[] = []
      const waitedMs = Date.now()
      const ids = (): Set<string> => new Set(arrived(rounds).map(arrival => arrival.id))
      await until('every record the receiver took listed as delivered through every node', async () => {
        const received = ids()
        const sets = new Set<string>()
        for (const member of cluster.live()) {
          const mine = await listed(member, wanted)
          const listedIds = mine.map(record => record.id)
          expect(listedIds.filter((id, i) => listedIds.indexOf(id) !== i), `ids listed twice through ${member.id}`).to.deep.equal([])
          sets.add(listedIds.sort().join(' '))
          records = mine
        }
        unsettled = records.filter(record => record.status !== 'delivered' && received.has(idOf(record)))
        // The same records through every node (a relay may have made one between two listings: again).
        return sets.size === 1 && unsettled.length === 0
      }, timeoutMs, 200).catch((error: Error) => {
        throw new Error(`${error.message}: ${JSON.stringify(unsettled.map(record => [record.id, record.messageId, record.status]))}`)
      })
      const received = ids()
      const resent = records.filter(record => idOf(record).startsWith(`${dead.folderId}:`) && !record.id.startsWith(`${dead.folderId}:`))
      expect(resent.filter(record => !received.has(idOf(record))).map(record => record.id), `resent records whose ${target.idName} the receiver never got`).to.deep.equal([])
      const shared = records.length - new Set(records.map(idOf)).size
      const statuses = new Map<string, number>()
      for (const record of records) statuses.set(record.status, (statuses.get(record.status) ?? 0) + 1)
      console.log(`      log through ${cluster.live().length} nodes: ${records.length} records once each ${JSON.stringify(Object.fromEntries(statuses))}, ` +
        `settled ${Date.now() - waitedMs} ms after the check began; ${resent.length} of ${dead.id}'s rows resent by the new owners under ${dead.id}'s ${target.idName}s; ` +
        `${shared} records whose ${target.idName} another record has too`)
      return resent
    }

    /** Every purchase of the round under exactly one id, and an id seen twice with the same payload. */
    const check = (what: string, round: string): void => {
      const idsByOrder = new Map<string, Set<string>>()
      const bodiesById = new Map<string, Set<string>>()
      const postsById = new Map<string, number>()
      const mine = arrived([round])
      for (const arrival of mine) {
        idsByOrder.set(arrival.order, (idsByOrder.get(arrival.order) ?? new Set()).add(arrival.id))
        bodiesById.set(arrival.id, (bodiesById.get(arrival.id) ?? new Set()).add(arrival.body))
        postsById.set(arrival.id, (postsById.get(arrival.id) ?? 0) + 1)
      }
      const resentOrders = [...idsByOrder].filter(([, ids]) => ids.size > 1)
      const twice = [...postsById.values()].filter(n => n > 1).length
      console.log(`      ${what}: ${mine.length} arrivals for ${idsByOrder.size} purchases; ${twice} ${target.idName}s received more than once; ` +
        `${resentOrders.length} purchases under more than one ${target.idName}${resentOrders.length > 0 ? ` (e.g. ${resentOrders[0]![0]}: ${[...resentOrders[0]![1]].join(', ')})` : ''}`)
      expect(idsByOrder.size, 'purchases received').to.equal(PURCHASES)
      expect([...bodiesById].filter(([, bodies]) => bodies.size > 1), `${target.idName}s carrying different payloads`).to.deep.equal([])
      expect(resentOrders.map(([order, ids]) => `${order}: ${[...ids].join(', ')}`), `purchases received under more than one ${target.idName}`).to.deep.equal([])
    }

    const first = Array.from({ length: PURCHASES }, () => visitorId())

    it(`sends a row resent after its owner was SIGKILLed (delivered already) under the same ${target.idName}`, async () => {
      await purchase(first, 'a')
      await until(`${PURCHASES} purchases delivered`, () => deliveredOf('a') === PURCHASES, 30_000, 20)
      const killedMs = Date.now()
      await cluster.kill(0)
      await cluster.settled()
      console.log(`      node-1 SIGKILLed, the survivors own its partitions ${Date.now() - killedMs} ms later`)
      // The new owners resent the rows above node-1's last watermark: listed, and attempted, within a few relays.
      const resent = await checkLog(cluster.members[0]!, first, ['a'], 8 * ACK_WAIT_MS)
      check('after the kill', 'a')
      // The rows above node-1's last watermark were resent: at least the last of each of its partitions.
      expect(resent.length).to.be.above(0)
    })

    it(`keeps the ${target.idName} when the owner is paused right after its last write, then SIGKILLed; the first owner back lists its own records beside`, async () => {
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
      await until(`${PURCHASES} purchases delivered`, () => deliveredOf('b') === PURCHASES, 20_000 + 2 * ACK_WAIT_MS, 50).catch((error: Error) => {
        throw new Error(`${error.message} (${deliveredOf('b')} delivered)`)
      })
      console.log(`      ${PURCHASES} purchases delivered ${Date.now() - pausedMs} ms after the pause`)
      // node-1 (back) holds its records of round a, the survivors those they resent of them: all listed, once.
      const resent = await checkLog(cluster.members[1]!, [...first, ...visitors], ['a', 'b'], 8 * ACK_WAIT_MS)
      check('after the pause and kill', 'b')
      check('round a, node-1 back', 'a')
      expect(resent.length).to.be.above(0)
    })
  })
}
