// The deliveries log from any node, real processes: a 3-server NATS JetStream cluster (R3), 3 Beacon
// nodes (test/helpers/beacon-cluster.ts) and a real HTTP sink. Purchases of visitors in many partitions
// leave delivery records in all three nodes' LMDBs; each node lists them all (a small page at a time,
// following `next`) exactly once, the same set through every node; the status filter works; a record
// held by another node is replayed by id through any node; a time-range replay sums every node's; a
// malformed cursor is 400; a paused node makes the listing a 503 with Retry-After (never a partial page).
// Timings are printed, never asserted.

import { expect } from 'chai'
import { admin, post, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { pauseProcess } from '../helpers/pause.js'
import { until } from '../helpers/until.js'

interface Listed { id: string, status: string, createdAt: string, context: { visitorId?: string } }

describe('Beacon cluster mode: the deliveries log from any node (3 nodes, real processes)', function () {
  this.timeout(600_000)
  let cluster: BeaconCluster
  let receiver: Receiver
  /** Visitors whose first delivery the sink refuses (500): dead after their one attempt. */
  const refused = new Set<string>()
  const seen = new Set<string>()

  before(async () => {
    receiver = await startReceiver(request => {
      const who = JSON.parse(request.body).who as string
      const id = String(request.headers['webhook-id'])
      const first = !seen.has(id)
      seen.add(id)
      return { status: refused.has(who) && first ? 500 : 200 }
    })
    cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' })
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
    await receiver?.close()
  })

  const urlOf = (i: number): string => cluster.live()[i % cluster.live().length]!.url
  const account = (): string => cluster.tenant.account
  const path = (rest: string): string => `/admin/accounts/${account()}/webhooks/orders${rest}`
  const originOf = (id: string): string => id.slice(0, id.indexOf(':'))

  /** Every record of the listing through `url`, following `next` with pages of `limit`. */
  const listAll = async (url: string, limit: number, status = ''): Promise<{ records: Listed[], pages: number }> => {
    const records: Listed[] = []
    let after: string | null = ''
    let pages = 0
    while (after !== null) {
      const query: string = `?limit=${limit}${after === '' ? '' : `&after=${encodeURIComponent(after)}`}${status === '' ? '' : `&status=${status}`}`
      const res = await admin(url, 'GET', path(`/deliveries${query}`))
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      expect(res.body.deliveries.length).to.be.at.most(limit)
      records.push(...res.body.deliveries as Listed[])
      after = res.body.next === null ? null : String(res.body.next)
      expect(++pages, 'pages').to.be.below(1000)
    }
    return { records, pages }
  }

  it('lists every record of the cluster exactly once through every node, filters by status, replays another node\'s record by id', async () => {
    const res = await admin(urlOf(0), 'PUT', path(''), {
      name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `${receiver.url}/orders`, payload: '{"who": "{{visitorId}}"}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, maxAttempts: 1 },
    })
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201])
    for (const member of cluster.live()) {
      await until(`webhook on ${member.id}`, async () => (await admin(member.url, 'GET', path(''))).status === 200, 5_000, 10)
    }
    const visitors = Array.from({ length: 60 }, () => visitorId())
    for (const [i, v] of visitors.entries()) {
      if (i % 4 === 0) refused.add(v)
      const answer = await post(urlOf(i), '/campaigns/query', { account: account(), visitorId: v, platform: 'web', event: 'purchase', orderId: `o-${i}` })
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    }
    await until('60 purchases sent', () => seen.size === 60, 60_000, 20).catch((error: Error) => { throw new Error(`${error.message} (${seen.size} sent)`) })
    const sentIds = [...seen].sort()
    const origins = new Set(sentIds.map(originOf))
    console.log(`      60 deliveries relayed by ${origins.size} nodes`)
    expect(origins.size, 'records on every node').to.equal(3)
    // Each node lists all 60, once each, oldest first, with small pages.
    for (const member of cluster.live()) {
      const startedMs = Date.now()
      const { records, pages } = await listAll(member.url, 7)
      const ids = records.map(r => r.id)
      console.log(`      through ${member.id}: ${ids.length} records in ${pages} pages of 7, ${Date.now() - startedMs} ms`)
      expect(new Set(ids).size, `${member.id}: no record twice`).to.equal(ids.length)
      expect([...ids].sort(), `${member.id}: every record`).to.deep.equal(sentIds)
      const times = records.map(r => Date.parse(r.createdAt))
      expect(times, `${member.id}: oldest first`).to.deep.equal([...times].sort((a, b) => a - b))
      // The cursor is an opaque string in cluster mode.
      expect((await admin(member.url, 'GET', path('/deliveries?limit=7'))).body.next).to.be.a('string')
    }

    // Status filter: a record's status is as the node holding it knows it (a record another node
    // attempted stays pending there: docs/webhooks.md, "Where records are"). Once the holders' own
    // attempts are written, each status's listing is the whole listing's records of that status.
    await new Promise(resolve => setTimeout(resolve, 1000))
    const all = (await listAll(urlOf(0), 500)).records
    const byStatus = new Map<string, string[]>()
    for (const r of all) byStatus.set(r.status, [...byStatus.get(r.status) ?? [], r.id])
    console.log(`      statuses at the holders: ${JSON.stringify(Object.fromEntries([...byStatus].map(([k, v]) => [k, v.length])))}`)
    expect(byStatus.get('dead')?.length ?? 0, 'some dead records').to.be.above(0)
    for (const member of cluster.live()) {
      for (const [status, limit] of [['dead', 2], ['delivered', 5], ['pending', 9], ['failed', 3]] as const) {
        const listed = (await listAll(member.url, limit, status)).records
        expect(listed.every(r => r.status === status)).to.equal(true)
        expect(listed.map(r => r.id).sort(), `${member.id}, ${status}`).to.deep.equal([...byStatus.get(status) ?? []].sort())
      }
    }
    for (const id of byStatus.get('dead') ?? []) expect(refused.has(all.find(r => r.id === id)!.context.visitorId!)).to.equal(true)

    // Replay by id through each node: final records (delivered or dead at their holder) of every origin,
    // so of other nodes too.
    const final = all.filter(r => r.status === 'delivered' || r.status === 'dead').map(r => r.id)
    const replayed: string[] = []
    for (const member of cluster.live()) {
      const chosen: string[] = []
      for (const origin of origins) {
        const id = final.find(id => originOf(id) === origin && !replayed.includes(id))
        if (id !== undefined) chosen.push(id)
      }
      const answer = await admin(member.url, 'POST', path('/replay'), { deliveryIds: chosen })
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
      expect(answer.body.replayed, `${member.id} replays ${chosen.join(', ')}`).to.equal(chosen.length)
      replayed.push(...chosen)
    }
    console.log(`      replayed by id: ${replayed.length} records of ${new Set(replayed.map(originOf)).size} nodes`)
    expect(new Set(replayed.map(originOf)).size).to.equal(3)
    const sentTwice = (ids: string[]): boolean => ids.every(id => receiver.requests.filter(r => r.headers['webhook-id'] === id).length >= 2)
    await until('the records replayed by id sent again', () => sentTwice(replayed), 30_000, 50)

    // An unknown id is refused, nothing replayed.
    const requestsBefore = receiver.requests.length
    const unknown = await admin(urlOf(2), 'POST', path('/replay'), { deliveryIds: [final.find(id => !replayed.includes(id))!, 'nobody:1.orders'] })
    expect(unknown.status, JSON.stringify(unknown.body)).to.equal(400)
    expect(unknown.body.errors[0]).to.include({ code: 'invalid_field', field: '/deliveryIds' })
    expect(unknown.body.errors[0].message).to.include('nobody:1.orders')

    // A time range: every node replays its own dead records, the answer is their sum.
    const dead = (await listAll(urlOf(1), 500, 'dead')).records.map(r => r.id)
    const range = await admin(urlOf(1), 'POST', path('/replay'), { from: '2000-01-01T00:00:00Z' })
    expect(range.status, JSON.stringify(range.body)).to.equal(200)
    expect(range.body.replayed).to.equal(dead.length)
    await until('the dead records sent again', () => sentTwice(dead), 30_000, 50)
    expect(receiver.requests.length - requestsBefore).to.equal(dead.length)
  })

  it('refuses a malformed cursor with 400 invalid_field', async () => {
    const wrong = ['not a cursor', '12', Buffer.from('{"v":2,"p":{}}').toString('base64url'), Buffer.from('{"v":1,"p":{"node-1":-1}}').toString('base64url'), 'x'.repeat(5000)]
    for (const after of wrong) {
      const res = await admin(urlOf(0), 'GET', path(`/deliveries?after=${encodeURIComponent(after)}`))
      expect(res.status, `${after.slice(0, 40)}: ${JSON.stringify(res.body).slice(0, 300)}`).to.equal(400)
      expect(res.body.errors[0]).to.include({ code: 'invalid_field', field: '/after' })
    }
  })

  it('answers 503 unavailable with Retry-After when a node does not answer, never a partial page', async () => {
    const paused = cluster.members[2]!
    const pid = paused.process!.child.pid!
    await pauseProcess(pid)
    try {
      const startedMs = Date.now()
      const res = await admin(urlOf(0), 'GET', path('/deliveries?limit=500'))
      const tookMs = Date.now() - startedMs
      console.log(`      ${paused.id} paused: ${res.status} after ${tookMs} ms`)
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).to.equal(503)
      expect(res.body.errors[0].code).to.equal('unavailable')
      expect(res.headers.get('retry-after')).to.equal('1')
      expect(tookMs).to.be.below(6_000)
    } finally {
      process.kill(pid, 'SIGCONT')
    }
    await cluster.settled()
    // The paused node's partitions were taken over: rows it relayed after its last watermark are sent
    // again by their new owners under new ids (docs/cluster.md, "Outbox rows across a takeover").
    const ids = (await listAll(urlOf(1), 50)).records.map(r => r.id)
    expect(new Set(ids).size).to.equal(ids.length)
    expect(ids.length).to.be.at.least(60)
  })
})
