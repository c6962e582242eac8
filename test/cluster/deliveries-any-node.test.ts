// The deliveries log from any node, real processes: a 3-server NATS JetStream cluster (R3), 3 Beacon
// nodes (test/helpers/beacon-cluster.ts) and a real HTTP sink. Purchases of visitors in many partitions
// leave delivery records in all three nodes' LMDBs; each node lists them all (a small page at a time,
// following `next`) exactly once, the same set through every node; every record is listed with its true
// status through every node, whichever node attempted it (outcomes go back to the record's holder),
// retries and dead letters included; an outcome stored while its holder is SIGKILLed and down for longer
// than the 30 s the outcomes were once resent for reaches it once it is back, and the outcomes of an
// attempting node SIGKILLed right after its attempts ended still reach their holders (docs/internals/cluster.md,
// "Admin listings from any node"); the status filter works; a record held by another node is replayed
// by id through any node; a time-range replay sums every node's; a malformed cursor is 400; a paused
// node makes the listing a 503 with Retry-After (never a partial page). Timings are printed, never asserted.

import { expect } from 'chai'
import { admin, post, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { pauseProcess } from '../helpers/pause.js'
import { until } from '../helpers/until.js'

/** BEACON_NATS_ACK_WAIT_MS of the nodes. */
const ACK_WAIT_MS = 5000

interface Listed { id: string, status: string, createdAt: string, replayedAt: string | null, attempts: unknown[], context: { visitorId?: string } }

describe('Beacon cluster mode: the deliveries log from any node (3 nodes, real processes)', function () {
  this.timeout(600_000)
  let cluster: BeaconCluster
  let receiver: Receiver
  /** Visitors whose first delivery the sink refuses (500): dead after their one attempt. */
  const refused = new Set<string>()
  const seen = new Set<string>()
  /** Webhook `flaky` (3 attempts): visitors whose deliveries the sink refuses until `healed`, and those it refuses once. */
  const failing = new Set<string>()
  const failingOnce = new Set<string>()
  let healed = false
  /** Webhook `slow`: its requests hang until released while this is true. */
  let hang = true
  /** Webhook `held`: the same. */
  let holdHeld = true

  before(async () => {
    receiver = await startReceiver(request => {
      const who = JSON.parse(request.body).who as string
      const id = String(request.headers['webhook-id'])
      if (request.url === '/slow') return hang ? 'hang' : { status: 200 }
      if (request.url === '/held') return holdHeld ? 'hang' : { status: 200 }
      if (request.url === '/flaky') {
        const tries = receiver.requests.filter(r => r.headers['webhook-id'] === id).length
        return { status: (failing.has(who) && !healed) || (failingOnce.has(who) && tries === 1) ? 500 : 200 }
      }
      const first = !seen.has(id)
      seen.add(id)
      return { status: refused.has(who) && first ? 500 : 200 }
    })
    // An ack wait of 5 s (not 30): attempts cut by a SIGKILL are handed out again sooner.
    cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_NATS_ACK_WAIT_MS: String(ACK_WAIT_MS) })
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
    await receiver?.close()
  })

  const urlOf = (i: number): string => cluster.live()[i % cluster.live().length]!.url
  const account = (): string => cluster.tenant.account
  const path = (rest: string, webhook = 'orders'): string => `/admin/accounts/${account()}/webhooks/${webhook}${rest}`
  const originOf = (id: string): string => id.slice(0, id.indexOf(':'))

  /** Every record of the listing through `url`, following `next` with pages of `limit`. */
  const listAll = async (url: string, limit: number, status = '', webhook = 'orders'): Promise<{ records: Listed[], pages: number }> => {
    const records: Listed[] = []
    let after: string | null = ''
    let pages = 0
    while (after !== null) {
      const query: string = `?limit=${limit}${after === '' ? '' : `&after=${encodeURIComponent(after)}`}${status === '' ? '' : `&status=${status}`}`
      const res = await admin(url, 'GET', path(`/deliveries${query}`, webhook))
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      expect(res.body.deliveries.length).to.be.at.most(limit)
      records.push(...res.body.deliveries as Listed[])
      after = res.body.next === null ? null : String(res.body.next)
      expect(++pages, 'pages').to.be.below(1000)
    }
    return { records, pages }
  }

  /** Webhook `name` (purchases, to the sink's `/<name>`) created through node `via`, then seen by every node. */
  const createWebhook = async (name: string, via: number, maxAttempts: number, timeoutMs = 2000): Promise<void> => {
    const res = await admin(urlOf(via), 'PUT', path('', name), {
      name, enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `${receiver.url}/${name}`, payload: '{"who": "{{visitorId}}"}' },
      delivery: { mode: 'async', timeoutMs, batchSize: 1, maxAttempts },
    })
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201])
    for (const member of cluster.live()) {
      await until(`webhook ${name} on ${member.id}`, async () => (await admin(member.url, 'GET', path('', name))).status === 200, 5_000, 10)
    }
  }

  it('lists every record of the cluster exactly once through every node, filters by status, replays another node\'s record by id', async () => {
    await createWebhook('orders', 0, 1)
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

    // Every record with its true status, whichever node attempted it (the attempting node sends the
    // outcome to the record's holder): the refused visitors' records dead, the others delivered, through
    // every node, and each status's listing exactly those.
    const finalMs = Date.now()
    const statusesOf = (records: Listed[]): Record<string, number> => {
      const counts: Record<string, number> = {}
      for (const r of records) counts[r.status] = (counts[r.status] ?? 0) + 1
      return counts
    }
    let last: Listed[] = []
    await until('every record final at its holder', async () => {
      last = (await listAll(urlOf(0), 500)).records
      return last.every(r => r.status === 'delivered' || r.status === 'dead')
    }, 15_000, 100).catch((error: Error) => { throw new Error(`${error.message}: ${JSON.stringify(statusesOf(last))}`) })
    console.log(`      every record final at its holder ${Date.now() - finalMs} ms after the last was sent`)
    const expected = new Map<string, string[]>([['dead', []], ['delivered', []], ['pending', []], ['failed', []]])
    for (const id of sentIds) {
      const who = JSON.parse(receiver.requests.find(r => r.headers['webhook-id'] === id)!.body).who as string
      expected.get(refused.has(who) ? 'dead' : 'delivered')!.push(id)
    }
    expect(expected.get('dead')!.length, 'some dead records').to.be.above(0)
    for (const member of cluster.live()) {
      const listed = (await listAll(member.url, 11)).records
      expect(statusesOf(listed), `${member.id}: statuses`).to.deep.equal({ dead: expected.get('dead')!.length, delivered: expected.get('delivered')!.length })
      for (const [status, limit] of [['dead', 2], ['delivered', 5], ['pending', 9], ['failed', 3]] as const) {
        const ofStatus = (await listAll(member.url, limit, status)).records
        expect(ofStatus.every(r => r.status === status)).to.equal(true)
        expect(ofStatus.map(r => r.id).sort(), `${member.id}, ${status}`).to.deep.equal(expected.get(status)!.sort())
      }
    }
    const all = (await listAll(urlOf(0), 500)).records

    // Replay by id through each node: records of every origin, so of other nodes too.
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
    // Replayed and delivered, wherever they were attempted: delivered through every node.
    for (const member of cluster.live()) {
      await until(`${member.id}: every record delivered after the replays`, async () =>
        (await listAll(member.url, 500)).records.every(r => r.status === 'delivered'), 15_000, 100)
    }
  })

  it('lists retried records with their attempts and dead ones dead after their retries through every node, and replays those by id through any node', async () => {
    await createWebhook('flaky', 1, 3)
    const visitors = Array.from({ length: 30 }, () => visitorId())
    for (const [i, v] of visitors.entries()) {
      if (i % 3 === 0) failing.add(v)
      if (i % 3 === 1) failingOnce.add(v)
      const answer = await post(urlOf(i), '/campaigns/query', { account: account(), visitorId: v, platform: 'web', event: 'purchase', orderId: `f-${i}` })
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    }
    const startedMs = Date.now()
    let last: Listed[] = []
    await until('30 records of flaky final at their holders', async () => {
      last = (await listAll(urlOf(2), 500, '', 'flaky')).records
      return last.length === 30 && last.every(r => r.status === 'delivered' || r.status === 'dead')
    }, 60_000, 200).catch((error: Error) => { throw new Error(`${error.message}: ${JSON.stringify(last.map(r => [r.status, r.attempts.length]))}`) })
    console.log(`      flaky: 30 records final at their holders ${Date.now() - startedMs} ms after the last purchase`)
    // As each holder has it, through every node: dead after 3 attempts, delivered at the 2nd, or at once.
    const want = (r: Listed): [string, number] => failing.has(r.context.visitorId!) ? ['dead', 3] : failingOnce.has(r.context.visitorId!) ? ['delivered', 2] : ['delivered', 1]
    const dead = last.filter(r => failing.has(r.context.visitorId!)).map(r => r.id).sort()
    expect(dead.length).to.equal(10)
    for (const member of cluster.live()) {
      const listed = (await listAll(member.url, 8, '', 'flaky')).records
      const wrong = listed.filter(r => r.status !== want(r)[0] || r.attempts.length !== want(r)[1])
      const sent = (id: string): number => receiver.requests.filter(q => q.headers['webhook-id'] === id).length
      expect(wrong.map(r => ({ id: r.id, status: r.status, attempts: r.attempts, sent: sent(r.id) })), `${member.id}: as expected`).to.deep.equal([])
      expect((await listAll(member.url, 3, 'dead', 'flaky')).records.map(r => r.id).sort(), `${member.id}: dead`).to.deep.equal(dead)
      expect((await listAll(member.url, 3, 'failed', 'flaky')).records, `${member.id}: failed`).to.deep.equal([])
    }
    // The dead ones replayed by id, a third through each node; the sink takes them now.
    healed = true
    const members = cluster.live()
    let replayedCount = 0
    for (const [i, member] of members.entries()) {
      const chosen = dead.filter((_, j) => j % members.length === i)
      const answer = await admin(member.url, 'POST', path('/replay', 'flaky'), { deliveryIds: chosen })
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
      expect(answer.body.replayed, `${member.id} replays ${chosen.join(', ')}`).to.equal(chosen.length)
      replayedCount += answer.body.replayed as number
    }
    expect(replayedCount).to.equal(dead.length)
    for (const member of cluster.live()) {
      await until(`${member.id}: the replayed records delivered`, async () => {
        const listed = (await listAll(member.url, 500, '', 'flaky')).records
        return listed.every(r => r.status === 'delivered') &&
          listed.filter(r => dead.includes(r.id)).every(r => r.replayedAt !== null && r.attempts.length === 1)
      }, 30_000, 200)
    }
  })

  /** Until every record of `webhook` is listed `delivered` through every node (at least `count` of them); the records. */
  const allDelivered = async (webhook: string, count: number, timeoutMs: number): Promise<Listed[]> => {
    let last: Listed[] = []
    for (const member of cluster.live()) {
      await until(`${member.id}: the records of ${webhook} delivered`, async () => {
        const res = await admin(member.url, 'GET', path('/deliveries?limit=500', webhook))
        last = res.status === 200 ? res.body.deliveries as Listed[] : []
        return last.length >= count && last.every(r => r.status === 'delivered')
      }, timeoutMs, 200).catch((error: Error) => { throw new Error(`${error.message}: ${JSON.stringify(last.map(r => r.status))}`) })
    }
    return last
  }

  it('carries outcomes to their holder once it is back from a SIGKILL', async () => {
    await createWebhook('slow', 0, 3, 30_000)
    for (let i = 0; i < 30; i++) {
      const answer = await post(urlOf(i), '/campaigns/query', { account: account(), visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: `s-${i}` })
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    }
    await until('requests of slow hanging at the sink', () => receiver.hanging.length >= 3, 30_000, 20)
      .catch((error: Error) => { throw new Error(`${error.message}: ${receiver.hanging.length} hanging, ${receiver.requests.filter(r => r.url === '/slow').length} received`) })
    await new Promise(resolve => setTimeout(resolve, 300))
    // Node 3 killed, then the others' attempts end: the outcomes of its records wait for it in the
    // outcome stream, however long it stays down. Down 31 s, this test failed on the code before the
    // stream (which resent outcomes for 30 s, then dropped them; 4 runs on 2026-11-26); 6 s here keeps
    // the suite short.
    const killedMs = Date.now()
    await cluster.kill(2)
    const hanging = receiver.hanging.length
    hang = false
    receiver.release({ status: 200 })
    await new Promise(resolve => setTimeout(resolve, 6_000))
    await cluster.restart(2)
    const backMs = Date.now()
    await cluster.settled()
    // At least 30: rows node 3 relayed after its last watermark are sent again under new ids by the
    // new owners of its partitions (docs/internals/cluster.md, "Outbox rows across a takeover").
    const last = await allDelivered('slow', 30, 30_000)
    console.log(`      slow: ${hanging} requests answered after node-3 was killed; it was back ${backMs - killedMs} ms after the kill; all ${last.length} records delivered through every node ${Date.now() - backMs} ms after that`)
  })

  it('carries the outcomes of an attempting node SIGKILLed right after its attempts ended to their holders', async () => {
    await createWebhook('held', 1, 3, 30_000)
    const before = receiver.requests.filter(r => r.url === '/held').length
    for (let i = 0; i < 12; i++) {
      const answer = await post(urlOf(i), '/campaigns/query', { account: account(), visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: `h-${i}` })
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    }
    const received = (): number => receiver.requests.filter(r => r.url === '/held').length - before
    await until('requests of held hanging at the sink', () => receiver.hanging.length >= 6, 30_000, 20)
      .catch((error: Error) => { throw new Error(`${error.message}: ${receiver.hanging.length} hanging, ${received()} received`) })
    await new Promise(resolve => setTimeout(resolve, 300))
    // Every attempt answered, and node 1 killed 5 ms later: it has read some answers, and their outcomes
    // (of records other nodes hold, most of them) were not out of it yet (gathered for 20 ms). Their
    // deliveries were not acked: handed out again after the ack wait, attempted again, carried then.
    const hanging = receiver.hanging.length
    holdHeld = false
    receiver.release({ status: 200 })
    await new Promise(resolve => setTimeout(resolve, 5))
    const killedMs = Date.now()
    await cluster.kill(0)
    await cluster.restart(0)
    const backMs = Date.now()
    await cluster.settled()
    const last = await allDelivered('held', 12, 30_000)
    console.log(`      held: ${hanging} requests answered 5 ms before node-1 was killed (back ${backMs - killedMs} ms later); all ${last.length} records delivered through every node ${Date.now() - backMs} ms after that (${received()} requests in all)`)
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
    // again by their new owners under new ids (docs/internals/cluster.md, "Outbox rows across a takeover").
    const ids = (await listAll(urlOf(1), 50)).records.map(r => r.id)
    expect(new Set(ids).size).to.equal(ids.length)
    expect(ids.length).to.be.at.least(60)
  })
})
