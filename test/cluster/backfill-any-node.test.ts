// Segment backfills in cluster mode (docs/event-log.md, "Backfilling a segment"), real processes: a
// 3-server NATS JetStream cluster (R3) and 3 Beacon nodes (test/helpers/beacon-cluster.ts). A segment
// saved with backfill through one node is evaluated over the cluster's event stream, its members those a
// from-scratch evaluation has (events accepted by every node, each counted once, live ones during it
// too), read through any node; audience webhooks hear only of changes after it; a second one is 409
// through another node; a change through another node cancels it; its node restarted, it resumes.

import { expect } from 'chai'
import { admin, post, type Answer } from '../helpers/beacon.js'
import { startBeaconCluster, visitorsOwnedBy, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'

const RULE = { fact: 'count', event: 'purchase', within: '30d', op: 'gte', value: 2 }
const REPEAT = { fact: 'count', event: 'purchase', within: '20d', op: 'gte', value: 3 }

interface Backfill { id: string, state: string, events: number, visitors: number, members: number, walked: boolean, error: string | null }

describe('Beacon cluster mode: segment backfills through any node (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let receiver: Receiver
  /** Distinct purchases sent per visitor (orderIds repeated once in a while: counted once). */
  const purchases = new Map<string, number>()

  before(async () => {
    receiver = await startReceiver()
    // Walks last at least 2 s (the cut ahead) + 4 s: long enough to act on one while it runs.
    cluster = await startBeaconCluster(3, { BEACON_EVENT_RETENTION_DAYS: '7', BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_BACKFILL_SETTLE_MS: '4000' })
    const owners = await cluster.settled()
    const visitors = cluster.members.flatMap(owner => visitorsOwnedBy(owners, account(), owner.id, 5))
    // Visitor i: i % 4 purchases, each through another node; the first one's orderId sent twice.
    for (const [i, visitorId] of visitors.entries()) {
      purchases.set(visitorId, i % 4)
      for (let n = 0; n < i % 4; n++) {
        const through = cluster.members[(i + n) % 3]!.url
        expect((await send(through, { visitorId, event: 'purchase', orderId: `o-${i}-${n}`, orderTotal: 10 })).status).to.equal(200)
        if (n === 0) expect((await send(cluster.members[(i + 1) % 3]!.url, { visitorId, event: 'purchase', orderId: `o-${i}-0`, orderTotal: 10 })).status).to.equal(200)
      }
      expect((await send(cluster.members[i % 3]!.url, { visitorId, event: 'pageView', path: '/' })).status).to.equal(200)
    }
    const hook = await admin(cluster.members[0]!.url, 'PUT', `/admin/accounts/${account()}/webhooks/audience`, {
      name: 'audience', enabled: true, trigger: { kind: 'audience', segments: ['buyers', 'repeat'], on: ['enter', 'exit'] },
      request: { method: 'POST', url: `${receiver.url}/audience`, payload: '{"change": {{change}}, "segment": {{audience}}, "who": "{{visitorId}}"}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    expect(hook.status, JSON.stringify(hook.body)).to.equal(200)
  })
  after(async () => {
    await cluster?.close()
    await receiver?.close()
  })

  const account = (): string => cluster.tenant.account
  const segmentPath = (name: string): string => `/admin/accounts/${account()}/segments/${name}`

  /** A request through `url`, again on a 503 (a partition changing owner). */
  async function send (url: string, body: Record<string, unknown>): Promise<Answer> {
    for (let attempt = 1; ; attempt++) {
      const answer = await post(url, '/campaigns/query', { account: account(), platform: 'web', ...body })
      if (answer.status !== 503 || attempt === 20) return answer
      await new Promise(resolve => setTimeout(resolve, 250))
    }
  }
  async function backfillOf (url: string, name: string): Promise<Backfill> {
    const res = await admin(url, 'GET', `${segmentPath(name)}/backfill`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body
  }
  async function computed (url: string, visitorId: string): Promise<string[]> {
    const res = await admin(url, 'GET', `/admin/accounts/${account()}/visitors/${visitorId}`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body.computedSegments
  }
  const audience = (): string[] => receiver.requests.filter(r => r.url === '/audience').map(r => {
    const body = JSON.parse(r.body) as { change: string, segment: string, who: string }
    return `${body.change} ${body.segment} ${body.who}`
  })

  it('gives the members a from-scratch evaluation has over every node\'s events, read through any node; webhooks only for changes after it', async () => {
    const saved = await admin(cluster.members[1]!.url, 'PUT', segmentPath('buyers'), { rule: RULE, backfill: true })
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200)
    // A second one through another node while it runs: 409 (the row is the cluster's).
    expectError(await admin(cluster.members[2]!.url, 'PUT', segmentPath('buyers'), { rule: RULE, backfill: true }), 'backfill_running')
    // Live purchases during it, through every node: each counted once (before the cut by the walk, after it live).
    const late = [...purchases.keys()].filter((_, i) => i % 4 === 1)
    for (const [i, visitorId] of late.entries()) {
      expect((await send(cluster.members[i % 3]!.url, { visitorId, event: 'purchase', orderId: `late-${i}`, orderTotal: 5 })).status).to.equal(200)
      purchases.set(visitorId, purchases.get(visitorId)! + 1)
    }
    const running = await backfillOf(cluster.members[0]!.url, 'buyers')
    expect(running.state).to.equal('running')
    expect(running.id.startsWith('node-2:'), running.id).to.equal(true)
    await until('the backfill done, read through node 3', async () => (await backfillOf(cluster.members[2]!.url, 'buyers')).state === 'done', 60_000, 100)
    const done = await backfillOf(cluster.members[0]!.url, 'buyers')
    expect(done).to.deep.include({ state: 'done', walked: true, error: null })
    const buyers = [...purchases].filter(([, count]) => count >= 2).map(([visitorId]) => visitorId)
    expect(done.members).to.equal(buyers.length)
    for (const [visitorId, count] of purchases) {
      expect(await computed(cluster.members[Number(visitorId.charCodeAt(0)) % 3]!.url, visitorId), `${visitorId}: ${count} purchases`).to.deep.equal(count >= 2 ? ['buyers'] : [])
    }
    // Nothing heard of what the backfill decided; a change after it is.
    await new Promise(resolve => setTimeout(resolve, 500))
    expect(audience()).to.deep.equal([])
    const newcomer = [...purchases].find(([, count]) => count === 0)![0]
    for (const n of [1, 2]) expect((await send(cluster.members[n]!.url, { visitorId: newcomer, event: 'purchase', orderId: `after-${n}`, orderTotal: 5 })).status).to.equal(200)
    await until('the newcomer\'s enter heard', () => audience().length > 0, 10_000, 50)
    expect(audience()).to.deep.equal([`enter buyers ${newcomer}`])
    purchases.set(newcomer, 2)
  })

  it('is cancelled by a change of its segment through another node, and resumes after its node restarted', async () => {
    expect((await admin(cluster.members[0]!.url, 'PUT', segmentPath('repeat'), { rule: REPEAT, backfill: true })).status).to.equal(200)
    const changed = await admin(cluster.members[2]!.url, 'PUT', segmentPath('repeat'), { rule: { ...REPEAT, value: 4 } })
    expect(changed.status, JSON.stringify(changed.body)).to.equal(200)
    await until('the backfill cancelled, read through node 2', async () => (await backfillOf(cluster.members[1]!.url, 'repeat')).state === 'cancelled', 30_000, 100)
    expect(await backfillOf(cluster.members[2]!.url, 'repeat')).to.deep.include({ error: 'The segment was changed.' })

    // Another, through node 1 (its windows rebuilt, though the plain save counts them since); node 1
    // stopped once its walk read the stream, then started again.
    expect((await admin(cluster.members[0]!.url, 'PUT', segmentPath('repeat'), { rule: REPEAT, backfill: true })).status).to.equal(200)
    let seen: Backfill | null = null
    await until('the walk under way', async () => (seen = await backfillOf(cluster.members[1]!.url, 'repeat')).events > 0, 30_000, 20)
      .catch((error: unknown) => { throw new Error(`${(error as Error).message}: ${JSON.stringify(seen)}`) })
    await cluster.stop(0)
    expect(await backfillOf(cluster.members[1]!.url, 'repeat')).to.deep.include({ state: 'running' })
    await cluster.restart(0)
    await until('the backfill done after its node restarted', async () => (await backfillOf(cluster.members[2]!.url, 'repeat')).state === 'done', 90_000, 100)
    for (const [visitorId, count] of purchases) {
      const expected = count >= 3 ? ['buyers', 'repeat'] : count >= 2 ? ['buyers'] : []
      expect([...await computed(cluster.members[1]!.url, visitorId)].sort(), `${visitorId}: ${count} purchases`).to.deep.equal(expected)
    }
    expect(audience().filter(change => change.includes(' repeat '))).to.deep.equal([])
  })
})
