// Replays of the retained event log in cluster mode (docs/event-log.md, "Cluster mode", "Replays"), real
// processes: a 3-server NATS JetStream cluster (R3) and 3 Beacon nodes (test/helpers/beacon-cluster.ts),
// real HTTP receivers. A replay started through one node reads the cluster's stream (events sent
// through every node, to every node's partitions) and runs there; its id names that node, and it is
// read, listed and cancelled through any node; while its node is stopped it answers 503, and it goes on
// once the node is back.

import { expect } from 'chai'
import { admin, post, type Answer } from '../helpers/beacon.js'
import { startBeaconCluster, visitorsOwnedBy, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'

interface Replay { id: string, state: string, read: number, queued: number, skipped: number, delivered: number, failed: number, inFlight: number, walked: boolean, error: string | null }

const webhook = (name: string, url: string): Record<string, unknown> => ({
  name, enabled: true, trigger: { kind: 'event', events: ['purchase'] },
  request: { method: 'POST', url: `${url}/in`, payload: '{"order": {{event.orderId}}, "visitor": {{visitorId}}, "replay": {{replay}}}' },
  delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
})

describe('Beacon cluster mode: replays of the event log through any node (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let receiver: Receiver
  let slow: Receiver
  let holding = true
  const sent: Array<{ visitorId: string, orderId: string }> = []
  let fromMs = 0
  let toMs = 0

  before(async () => {
    receiver = await startReceiver()
    slow = await startReceiver(() => holding ? 'hang' : { status: 200 })
    cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_EVENT_RETENTION_DAYS: '7', BEACON_REPLAY_INFLIGHT_MAX: '3' })
    const owners = await cluster.settled()
    // Four visitors of each node's partitions, three purchases each and a pageView, through every node.
    const visitors: string[] = []
    for (const owner of cluster.members) {
      visitors.push(...visitorsOwnedBy(owners, account(), owner.id, 4))
    }
    fromMs = Date.now()
    for (let round = 0; round < 3; round++) {
      for (const [i, visitorId] of visitors.entries()) {
        const orderId = `o-${round}-${i}`
        expect((await send(cluster.members[(i + round) % 3]!.url, { visitorId, event: 'purchase', orderId, orderTotal: 1 })).status).to.equal(200)
        sent.push({ visitorId, orderId })
      }
    }
    expect((await send(cluster.members[0]!.url, { visitorId: visitors[0]!, event: 'pageView', path: '/' })).status).to.equal(200)
    toMs = Date.now() + 1
    // The webhooks come after the events: nothing was sent to them live.
    for (const [name, target] of [['orders', receiver], ['slow', slow]] as const) {
      const res = await admin(cluster.members[0]!.url, 'PUT', `/admin/accounts/${account()}/webhooks/${name}`, webhook(name, target.url))
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
  })
  after(async () => {
    holding = false
    slow?.release()
    await cluster?.close()
    await receiver?.close()
    await slow?.close()
  })

  const account = (): string => cluster.tenant.account
  const path = (rest = ''): string => `/admin/accounts/${account()}/replays${rest}`

  /** A request through `url`, again on a 503 (a partition changing owner). */
  async function send (url: string, body: Record<string, unknown>): Promise<Answer> {
    for (let attempt = 1; ; attempt++) {
      const answer = await post(url, '/campaigns/query', { account: account(), platform: 'web', ...body })
      if (answer.status !== 503 || attempt === 20) return answer
      await new Promise(resolve => setTimeout(resolve, 250))
    }
  }
  /** Started through `url` (again while the node has not seen the webhook yet: the configuration replicates). */
  async function start (url: string, target: string): Promise<Replay> {
    let res: Answer | null = null
    await until(`a replay to ${target} started`, async () => {
      res = await admin(url, 'POST', path(), { from: new Date(fromMs).toISOString(), to: new Date(toMs).toISOString(), target: { webhook: target } })
      return res.status !== 404
    }, 10_000, 100)
    expect(res!.status, JSON.stringify(res!.body)).to.equal(202)
    return res!.body as Replay
  }
  async function replayOf (url: string, id: string): Promise<Replay> {
    const res = await admin(url, 'GET', path(`/${id}`))
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body as Replay
  }
  const ordersOf = (from: Receiver, id: string): Array<{ order: string, visitor: string }> => from.requests
    .filter(request => request.headers['beacon-replay'] === id)
    .map(request => JSON.parse(request.body) as { order: string, visitor: string })

  it('resends the events of every node\'s partitions from the node it was started on, in order per visitor, read through any node', async () => {
    const started = await start(cluster.members[0]!.url, 'orders')
    expect(started.id.startsWith(`${cluster.members[0]!.id}:`), started.id).to.equal(true)
    await until('the replay done', async () => (await replayOf(cluster.members[1]!.url, started.id)).state === 'done', 60_000, 100)
    const done = await replayOf(cluster.members[2]!.url, started.id)
    expect(done).to.deep.include({ read: 37, queued: 36, skipped: 1, delivered: 36, failed: 0, inFlight: 0, walked: true, error: null })
    const got = ordersOf(receiver, started.id)
    expect(got.map(one => one.order).sort()).to.deep.equal(sent.map(one => one.orderId).sort())
    for (const visitorId of new Set(sent.map(one => one.visitorId))) {
      expect(got.filter(one => one.visitor === visitorId).map(one => one.order), visitorId).to.deep.equal(sent.filter(one => one.visitorId === visitorId).map(one => one.orderId))
    }
    expect(new Set(receiver.requests.map(request => request.headers['webhook-id'])).size).to.equal(36)
    // Unknown and malformed ids: 404, whichever node they name.
    expectError(await admin(cluster.members[1]!.url, 'GET', path(`/${cluster.members[0]!.id}:00000000-0000-4000-8000-000000000000`)), 'replay_not_found')
    expectError(await admin(cluster.members[1]!.url, 'GET', path('/00000000-0000-4000-8000-000000000000')), 'replay_not_found')
    expectError(await admin(cluster.members[1]!.url, 'POST', path('/nope/cancel')), 'replay_not_found')
  })

  it('lists every node\'s replays and cancels one through another node; a node stopped answers 503 for its own, which go on once it is back', async () => {
    const cancelled = await start(cluster.members[1]!.url, 'slow')
    await until('three deliveries held', () => ordersOf(slow, cancelled.id).length === 3, 30_000, 20)
    const answer = await admin(cluster.members[2]!.url, 'POST', path(`/${cancelled.id}/cancel`))
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    expect(answer.body).to.deep.include({ state: 'cancelled', queued: 3 })
    expect((await replayOf(cluster.members[0]!.url, cancelled.id)).state).to.equal('cancelled')

    const running = await start(cluster.members[2]!.url, 'slow')
    expect(running.id.startsWith(`${cluster.members[2]!.id}:`), running.id).to.equal(true)
    await until('three deliveries held', () => ordersOf(slow, running.id).length >= 3, 30_000, 20)
    const listed = await admin(cluster.members[0]!.url, 'GET', path())
    expect(listed.status).to.equal(200)
    expect((listed.body.replays as Replay[]).slice(0, 2).map(replay => [replay.id, replay.state])).to.deep.equal([[running.id, 'running'], [cancelled.id, 'cancelled']])
    expect((listed.body.replays as Replay[]).length).to.equal(3)

    await cluster.stop(2)
    const away = await admin(cluster.members[0]!.url, 'GET', path(`/${running.id}`))
    expectError(away, 'unavailable')
    expect(away.headers.get('retry-after')).to.equal('1')
    await cluster.restart(2)
    await cluster.settled()
    holding = false
    slow.release()
    let last: Answer | null = null
    await until('the replay done after its node came back', async () => {
      last = await admin(cluster.members[0]!.url, 'GET', path(`/${running.id}`))
      return last.status === 200 && (last.body as Replay).state === 'done'
    }, 120_000, 200).catch(async (error: unknown) => {
      const records = await admin(cluster.members[0]!.url, 'GET', `/admin/accounts/${account()}/webhooks/slow/deliveries?limit=100`)
      console.log(JSON.stringify(last?.body), JSON.stringify(records.body), ordersOf(slow, running.id).length)
      throw error
    })
    expect(await replayOf(cluster.members[1]!.url, running.id)).to.deep.include({ read: 37, queued: 36, skipped: 1, delivered: 36, failed: 0, inFlight: 0, walked: true })
    expect(new Set(ordersOf(slow, running.id).map(one => one.order))).to.deep.equal(new Set(sent.map(one => one.orderId)))
    // Two nodes' replays never share a delivery id (each node's ids carry its origin): a shared one made
    // a worker take one node's record for a copy of the other's, which then never reached its end.
    const idsOf = (id: string): Set<unknown> => new Set(slow.requests.filter(request => request.headers['beacon-replay'] === id).map(request => request.headers['webhook-id']))
    const ofRunning = idsOf(running.id)
    expect([...idsOf(cancelled.id)].filter(id => ofRunning.has(id))).to.deep.equal([])
  })
})
