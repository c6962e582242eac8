// The actor router (actors/actor-router.ts) between two in-process nodes, each with its own LMDB store,
// runtime and visitor/profile kinds, over a real nats-server; who owns what is a table the test sets.
// A visitor's profile on the other node is reached by message; a repeated unlink (same message id) is
// applied once; an older device summary than the one held changes nothing; a partition with no owner
// answers 503 unavailable with Retry-After after the budget.

import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Store } from '../../src/store/store.js'
import { ApiError } from '../../src/errors.js'
import { ActorRuntime } from '../../actors/runtime.js'
import { ActorRouter } from '../../actors/actor-router.js'
import { visitorKind, type VisitorKind } from '../../actors/visitor.js'
import { APPLIED_MAX, profileKind, type ProfileKind } from '../../actors/profile.js'
import { EMPTY_SEGMENTS } from '../../src/segments/segment-set.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'
import { TableOwnership } from '../helpers/table-ownership.js'
import { manualClock } from '../helpers/clock.js'
import { removeDir, tempDir } from '../helpers/beacon.js'

const PARTITIONS = 8
const ACCOUNT = 'acct'

interface Node {
  id: string
  dir: string
  store: Store
  runtime: ActorRuntime
  router: ActorRouter
  visitors: VisitorKind
  profiles: ProfileKind
  nc: NatsConnection
}

describe('actor router (two in-process nodes, a real nats-server)', function () {
  this.timeout(30_000)
  let server: NatsServer
  const table = new Map<number, string>()
  const nodes: Node[] = []
  const clock = manualClock()

  async function startNode (id: string): Promise<Node> {
    const dir = tempDir('beacon-actor-router-')
    const store = new Store({ path: dir, durability: 'committed' })
    const runtime = new ActorRuntime({ clock, actorsMax: 10_000, actorIdleMs: 3_600_000, mailboxMax: 1000 })
    const nc = await connect({ servers: server.url })
    const ownership = new TableOwnership(id, PARTITIONS, table)
    const router = new ActorRouter({ nc, cluster: 'test', ownership, runtime, budgetMs: 500, attemptTimeoutMs: 200 })
    const common = { store, clock, wantsEvent: () => false, wantsChange: () => false, listsMembers: () => false, attributesWanted: () => new Set<string>() }
    const profiles = profileKind({ ...common, segments: () => EMPTY_SEGMENTS })
    const visitors = visitorKind({ ...common, runtime, profiles, campaigns: () => null, segments: () => EMPTY_SEGMENTS, peers: router })
    router.serve([visitors, profiles])
    return { id, dir, store, runtime, router, visitors, profiles, nc }
  }

  /** An id whose partition is `partition`. */
  const idIn = (partition: number, prefix: string): string => {
    const ownership = new TableOwnership('', PARTITIONS, table)
    for (let n = 0; ; n++) if (ownership.partitionOf(ACCOUNT, `${prefix}-${n}`) === partition) return `${prefix}-${n}`
  }

  before(async () => {
    server = await startNatsServer()
    for (let p = 0; p < PARTITIONS; p++) table.set(p, p % 2 === 0 ? 'a' : 'b')
    nodes.push(await startNode('a'), await startNode('b'))
    for (const node of nodes) node.router.sync()
  })
  after(async () => {
    for (const node of nodes) {
      await node.router.close()
      await node.nc.close()
      node.runtime.close()
      await node.store.close()
      removeDir(node.dir)
    }
    await server?.close()
  })

  it('a visitor on one node stitches to its profile on the other: the profile lives there, the reply comes back', async () => {
    const [a, b] = nodes as [Node, Node]
    const visitorId = idIn(0, 'v')
    const profileId = idIn(1, 'p')
    await b.router.send(b.profiles, ACCOUNT, profileId, { type: 'attributes', attributes: { tier: 'gold' } })
    await a.runtime.send(a.visitors, ACCOUNT, visitorId, { type: 'event', event: { account: ACCOUNT, visitorId, profileId, platform: 'web', event: 'purchase', orderId: 'o1', orderTotal: 5 }, nowMs: clock.nowMs() })
    expect(a.store.profiles.get([ACCOUNT, profileId])).to.equal(undefined)
    const held = b.store.profiles.get([ACCOUNT, profileId]) as { visitors: string[], devices: Record<string, { metrics: { purchases: number } }> }
    expect(held.visitors).to.deep.equal([visitorId])
    expect(held.devices[visitorId]!.metrics.purchases).to.equal(1)
    // Read through the router from the visitor's node: the owner's answer, the unified view included.
    const snapshot = await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'snapshot' })
    expect(snapshot.unified.attributes).to.deep.equal({ tier: 'gold' })
    expect(a.router.sentRemote).to.be.greaterThan(0)
  })

  it('applies an unlink once per message id, even sent again after the device linked again', async () => {
    const [a] = nodes as [Node, Node]
    const visitorId = idIn(2, 'w')
    const profileId = idIn(3, 'q')
    const summary = { attributes: {}, attributeTimes: {}, segments: [], windows: {}, metrics: { pageViews: 1, productViews: 0, purchases: 0, totalSpent: 0, firstSeenMs: 1, lastSeenMs: 1, viewedSkus: [], purchasedSkus: [], viewedCategories: [] } }
    const device = { type: 'device', visitorId, summary, nowMs: 1 } as const
    await a.router.send(a.profiles, ACCOUNT, profileId, device)
    await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'unlink', visitorId, nowMs: 2, msgId: 'm-1' })
    await a.router.send(a.profiles, ACCOUNT, profileId, device)
    await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'unlink', visitorId, nowMs: 3, msgId: 'm-1' })
    let state = await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'snapshot' })
    expect(state.visitors).to.deep.equal([visitorId])
    expect(state.moves).to.deep.equal([[visitorId, 2]])
    expect(state.applied).to.deep.equal(['m-1'])
    // The ring is bounded.
    for (let n = 0; n < APPLIED_MAX + 5; n++) {
      await a.router.send(a.profiles, ACCOUNT, profileId, device)
      await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'unlink', visitorId, nowMs: 4, msgId: `n-${n}` })
    }
    state = await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'snapshot' })
    expect(state.applied.length).to.equal(APPLIED_MAX)
    expect(state.applied.at(-1)).to.equal(`n-${APPLIED_MAX + 4}`)
  })

  it('keeps the newer device summary when an older one comes late', async () => {
    const [a] = nodes as [Node, Node]
    const visitorId = idIn(4, 'x')
    const profileId = idIn(5, 'r')
    const metrics = (purchases: number) => ({ pageViews: 0, productViews: 0, purchases, totalSpent: purchases, firstSeenMs: 1, lastSeenMs: 1, viewedSkus: [], purchasedSkus: [], viewedCategories: [] })
    const summary = (seq: number, purchases: number) => ({ attributes: {}, attributeTimes: {}, segments: [], windows: {}, metrics: metrics(purchases), seq })
    await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'device', visitorId, summary: summary(20, 2), nowMs: 1 })
    const view = await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'device', visitorId, summary: summary(10, 1), nowMs: 1 })
    expect(view).to.deep.equal({ attributes: {}, segments: [] })
    let state = await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'snapshot' })
    expect(state.devices[visitorId]!.metrics.purchases).to.equal(2)
    // The same version again (a state rolled back and sent anew) replaces it.
    await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'device', visitorId, summary: summary(20, 3), nowMs: 1 })
    state = await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'snapshot' })
    expect(state.devices[visitorId]!.metrics.purchases).to.equal(3)
  })

  it('answers 503 unavailable with Retry-After when no node owns the partition within the budget', async () => {
    const [a] = nodes as [Node, Node]
    const profileId = idIn(7, 's')
    table.delete(7)
    const startMs = Date.now()
    try {
      await a.router.send(a.profiles, ACCOUNT, profileId, { type: 'snapshot' })
      expect.fail('answered')
    } catch (error) {
      expect(error).to.be.instanceOf(ApiError)
      expect((error as ApiError).items[0]!.code).to.equal('unavailable')
      expect((error as ApiError).headers).to.deep.equal({ 'Retry-After': '1' })
    } finally {
      table.set(7, 'b')
    }
    console.log(`      503 after ${Date.now() - startMs} ms (budget 500 ms)`)
  })
})
