// The retained event log in cluster mode, real processes: a 3-server NATS JetStream cluster (R3) and 3
// Beacon nodes (test/helpers/beacon-cluster.ts). Events sent through every node, to visitors in every
// node's partitions, are read back through any node (the page newest first, its filters and cursor,
// the NDJSON export) from the cluster's stream (src/cluster/event-stream.ts, docs/event-log.md "Cluster
// mode"); the stream has the retention settings; a retry with the same Idempotency-Key is logged once;
// erasing a person through one node removes their events before it answers, deleting an account all of
// its events; and a node SIGKILLed right
// after its 200s loses none of those events.

import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { connect } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { ADMIN_KEY, admin, identified, post, type Answer } from '../helpers/beacon.js'
import { startBeaconCluster, visitorsOwnedBy, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { eventStreamName } from '../../src/cluster/event-stream.js'

interface Logged { id: string, time: string, visitorId: string, profileId?: string, kind: string, fields: Record<string, unknown> }

describe('Beacon cluster mode: the retained event log through any node (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let owners = new Map<number, string>()

  before(async () => {
    cluster = await startBeaconCluster(3, { BEACON_EVENT_RETENTION_DAYS: '7', BEACON_EVENT_LOG_MAX_BYTES: '50000000' })
    owners = await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
  })

  const account = (): string => cluster.tenant.account
  const visitorsOf = (member: string, count: number): string[] => visitorsOwnedBy(owners, account(), member, count)
  /** A request through `url`, again on a 503 (a partition changing owner). */
  async function send (url: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Answer> {
    for (let attempt = 1; ; attempt++) {
      const answer = await post(url, '/campaigns/query', { account: account(), platform: 'web', ...body }, { headers })
      if (answer.status !== 503 || attempt === 20) return answer
      await new Promise(resolve => setTimeout(resolve, 250))
    }
  }
  async function allPages (url: string, query: string, limit: number): Promise<Logged[]> {
    const out: Logged[] = []
    let cursor: string | null = null
    for (let pages = 0; pages < 200; pages++) {
      const res: Answer = await admin(url, 'GET', `/admin/accounts/${account()}/events?limit=${limit}${query}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`)
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      out.push(...(res.body.events as Logged[]))
      if (res.body.next === null) return out
      cursor = res.body.next as string
    }
    throw new Error('more than 200 pages')
  }

  it('keeps the stream with the retention settings, R3', async () => {
    const nc = await connect({ servers: cluster.nats.urls })
    try {
      const info = await (await jetstreamManager(nc)).streams.info(eventStreamName(cluster.name))
      expect(info.config.num_replicas).to.equal(3)
      expect(info.config.max_age).to.equal(7 * 86_400_000 * 1e6)
      expect(info.config.max_bytes).to.equal(50_000_000)
    } finally {
      await nc.close()
    }
  })

  it('reads the events sent through every node, to every node\'s partitions, through any node: newest first, filtered, exported', async () => {
    const sent: Array<{ visitorId: string, n: number }> = []
    let n = 0
    for (const [i, through] of cluster.members.entries()) {
      for (const owner of cluster.members) {
        for (const visitorId of visitorsOf(owner.id, 2)) {
          const res = await send(through.url, { visitorId, event: 'pageView', path: `/p/${n}`, n })
          expect(res.status, JSON.stringify(res.body)).to.equal(200)
          sent.push({ visitorId, n: n++ })
        }
      }
      expect(i).to.be.below(3)
    }
    const newestFirst = sent.slice().reverse()
    const ids: string[][] = []
    for (const member of cluster.members) {
      const events = await allPages(member.url, '', 5)
      expect(events.map(e => [e.visitorId, e.fields.n]), member.id).to.deep.equal(newestFirst.map(s => [s.visitorId, s.n]))
      expect(events.every(e => e.kind === 'pageView' && e.fields.token === undefined && e.fields.account === undefined)).to.equal(true)
      ids.push(events.map(e => e.id))
    }
    expect(ids[1]).to.deep.equal(ids[0])
    expect(ids[2]).to.deep.equal(ids[0])
    // Filters and errors as in embedded mode.
    const one = sent[4]!
    const ofOne = await allPages(cluster.members[2]!.url, `&visitorId=${one.visitorId}`, 10)
    expect(ofOne.map(e => e.fields.n)).to.deep.equal([one.n])
    expect(await allPages(cluster.members[1]!.url, '&kind=purchase', 10)).to.deep.equal([])
    expectError(await admin(cluster.members[0]!.url, 'GET', `/admin/accounts/${account()}/events?cursor=nope`), 'invalid_field')
    expectError(await admin(cluster.members[0]!.url, 'GET', `/admin/accounts/${account()}/events?visitorId=nope`), 'invalid_field')
    expectError(await admin(cluster.members[0]!.url, 'GET', '/admin/accounts/00000000-0000-4000-8000-000000000000/events'), 'account_not_found')
    // The export: oldest first, one JSON object a line.
    const res = await fetch(`${cluster.members[1]!.url}/admin/accounts/${account()}/events/export`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.match(/application\/x-ndjson/)
    const lines = (await res.text()).trim().split('\n').map(line => JSON.parse(line) as Logged)
    expect(lines.map(e => e.id)).to.deep.equal(ids[0]!.slice().reverse())
  })

  it('logs a retry with the same Idempotency-Key once', async () => {
    const [visitorId] = visitorsOf(cluster.members[1]!.id, 1)
    const key = `k-${randomUUID()}`
    for (const member of cluster.members) {
      const res = await send(member.url, { visitorId, event: 'purchase', orderId: 'o-1', orderTotal: 3 }, { 'idempotency-key': key })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
    const events = await allPages(cluster.members[0]!.url, `&visitorId=${visitorId}`, 10)
    expect(events.map(e => e.kind)).to.deep.equal(['purchase'])
  })

  it('erasing a person through one node removes their events, from every node\'s partitions, before it answers', async () => {
    const profileId = `p-${randomUUID()}@example.com`
    const devices = cluster.members.map(member => visitorsOf(member.id, 1)[0]!)
    const [other] = visitorsOf(cluster.members[0]!.id, 1)
    for (const [i, visitorId] of devices.entries()) {
      expect((await send(cluster.members[i]!.url, { visitorId, event: 'pageView', path: '/before' })).status).to.equal(200)
      const res = await send(cluster.members[(i + 1) % 3]!.url, { visitorId, event: 'purchase', orderId: `o-${i}`, orderTotal: 5, ...identified(cluster.tenant, profileId) })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
    expect((await send(cluster.members[2]!.url, { visitorId: other, event: 'pageView', path: '/other' })).status).to.equal(200)
    expect(await allPages(cluster.members[2]!.url, `&profileId=${encodeURIComponent(profileId)}`, 100)).to.have.length(3)
    const erased = await admin(cluster.members[1]!.url, 'DELETE', `/admin/accounts/${account()}/profiles/${encodeURIComponent(profileId)}`)
    expect(erased.status, JSON.stringify(erased.body)).to.equal(200)
    for (const member of cluster.members) {
      expect(await allPages(member.url, `&profileId=${encodeURIComponent(profileId)}`, 100), member.id).to.deep.equal([])
      for (const visitorId of devices) expect(await allPages(member.url, `&visitorId=${visitorId}`, 100), `${member.id} ${visitorId}`).to.deep.equal([])
      expect((await allPages(member.url, `&visitorId=${other}`, 100)).map(e => e.fields.path)).to.deep.equal(['/other'])
    }
    // A visitor alone.
    const erasedVisitor = await admin(cluster.members[2]!.url, 'DELETE', `/admin/accounts/${account()}/visitors/${other}`)
    expect(erasedVisitor.status, JSON.stringify(erasedVisitor.body)).to.equal(200)
    expect(await allPages(cluster.members[0]!.url, `&visitorId=${other}`, 100)).to.deep.equal([])
  })

  it('deleting an account purges its events from the stream', async () => {
    const created = await admin(cluster.members[0]!.url, 'POST', '/admin/accounts', { name: 'Leaving' })
    expect(created.status, JSON.stringify(created.body)).to.equal(201)
    const leaving = created.body.account as string
    const through = cluster.members[1]!
    await until('the new account on node 2', async () => (await admin(through.url, 'GET', `/admin/accounts/${leaving}`)).status === 200, 15_000, 20)
    for (let i = 0; i < 3; i++) {
      const res = await post(through.url, '/campaigns/query', { account: leaving, platform: 'web', visitorId: randomUUID(), event: 'pageView', path: '/leaving' })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
    const nc = await connect({ servers: cluster.nats.urls })
    try {
      const jsm = await jetstreamManager(nc)
      const held = async (): Promise<number> => Object.keys((await jsm.streams.info(eventStreamName(cluster.name), { subjects_filter: `beacon.events.${cluster.name}.${leaving}.>` })).state.subjects ?? {}).length
      expect(await held()).to.equal(3)
      expect((await admin(cluster.members[2]!.url, 'DELETE', `/admin/accounts/${leaving}`)).status).to.equal(202)
      await until('the deleted account\'s events purged', async () => await held() === 0, 30_000, 100)
    } finally {
      await nc.close()
    }
  })

  it('loses none of the events a node answered 200 for when it is SIGKILLed right after', async () => {
    const victim = 2
    const through = cluster.members[victim]!
    const visitors = [...visitorsOf(through.id, 10), ...visitorsOf(cluster.members[0]!.id, 5)]
    const answered = await Promise.all(visitors.map(async (visitorId, i) => {
      const res = await post(through.url, '/campaigns/query', { account: account(), platform: 'web', visitorId, event: 'pageView', path: '/killed', i })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      return visitorId
    }))
    await cluster.kill(victim)
    for (const member of cluster.live()) {
      const logged = (await allPages(member.url, '&kind=pageView', 100)).filter(e => e.fields.path === '/killed')
      expect(logged.map(e => e.visitorId).sort(), member.id).to.deep.equal(answered.slice().sort())
    }
  })
})
