// Cluster mode's jobs, real processes: a 3-server NATS JetStream cluster (R3) and 3 Beacon nodes
// (test/helpers/beacon-cluster.ts). Deliveries made by different nodes carry distinct webhook-ids;
// a schedule webhook fires once per tick in the whole cluster (its members once each); segment expiry
// sweeps run only at a partition's owner, also after a takeover and a handover back; an account deleted
// through one node is erased on every node and in the changelog (a recovery after a SIGKILL brings
// nothing back). Timings are printed, never asserted.

import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { Store } from '../../src/store/store.js'
import { admin, post, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'

describe('Beacon cluster mode: jobs per partition or once per cluster (3 nodes, real processes)', function () {
  this.timeout(600_000)
  let cluster: BeaconCluster
  let receiver: Receiver

  before(async () => {
    receiver = await startReceiver()
    cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_SEGMENT_SWEEP_MS: '200' })
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
    await receiver?.close()
  })

  const urlOf = (i: number): string => cluster.live()[i % cluster.live().length]!.url
  const account = (): string => cluster.tenant.account
  const putWebhook = async (id: string, body: Record<string, unknown>): Promise<void> => {
    const res = await admin(urlOf(0), 'PUT', `/admin/accounts/${account()}/webhooks/${id}`, body)
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201])
    // In effect on every node (the replicated configuration, a few ms): rows written before are not its.
    for (const member of cluster.live()) {
      await until(`webhook ${id} on ${member.id}`, async () => (await admin(member.url, 'GET', `/admin/accounts/${account()}/webhooks/${id}`)).status === 200, 5_000, 10)
    }
  }
  const requestsTo = (path: string): Receiver['requests'] => receiver.requests.filter(r => r.url === path)

  it('gives deliveries relayed by different nodes distinct webhook-ids (each carries its node)', async () => {
    await putWebhook('purchases', {
      name: 'purchases', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `${receiver.url}/purchases`, payload: '{"who": "{{visitorId}}"}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    const visitors = Array.from({ length: 60 }, () => visitorId())
    for (const [i, v] of visitors.entries()) {
      const res = await post(urlOf(i), '/campaigns/query', { account: account(), visitorId: v, platform: 'web', event: 'purchase', orderId: `o-${i}` })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
    const delivered = (): number => new Set(requestsTo('/purchases').map(r => JSON.parse(r.body).who)).size
    await until('60 purchases delivered', () => delivered() === 60, 60_000, 20).catch((error: Error) => {
      throw new Error(`${error.message} (${delivered()} delivered)`)
    })
    const ids = requestsTo('/purchases').map(r => String(r.headers['webhook-id']))
    const byWho = new Map<string, Set<string>>()
    for (const r of requestsTo('/purchases')) {
      const who = JSON.parse(r.body).who as string
      byWho.set(who, (byWho.get(who) ?? new Set()).add(String(r.headers['webhook-id'])))
    }
    const origins = new Set(ids.map(id => id.slice(0, id.indexOf(':'))))
    console.log(`      ${ids.length} requests, ${new Set(ids).size} distinct webhook-ids, from ${origins.size} nodes; e.g. ${ids[0]}`)
    // One id per purchase (a redelivery keeps its id), never one id for two purchases.
    expect([...byWho.values()].every(set => set.size === 1)).to.equal(true)
    expect(new Set(ids).size).to.equal(60)
    expect(origins.size).to.be.at.least(2)
    for (const id of ids) expect(id).to.match(/^[0-9a-f-]{36}:\d+\.purchases$/)
  })

  it('makes a sync webhook\'s call while the request is handled, through any node (the owner\'s relay takes the row once its write is acknowledged)', async () => {
    await putWebhook('checkout', {
      name: 'checkout', enabled: true, trigger: { kind: 'event', events: ['pageView'] },
      request: { method: 'POST', url: `${receiver.url}/checkout`, payload: '{"who": "{{visitorId}}"}' },
      delivery: { mode: 'sync', timeoutMs: 5000, batchSize: 1 },
    })
    const waits: number[] = []
    for (let i = 0; i < 12; i++) {
      const v = visitorId()
      const startedMs = performance.now()
      const res = await post(urlOf(i), '/campaigns/query', { account: account(), visitorId: v, platform: 'web', event: 'pageView' })
      waits.push(performance.now() - startedMs)
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      expect(requestsTo('/checkout').map(r => JSON.parse(r.body).who), 'the call made before the answer').to.include(v)
    }
    console.log(`      answers after ${Math.min(...waits).toFixed(0)}–${Math.max(...waits).toFixed(0)} ms (the call included)`)
    await admin(urlOf(0), 'DELETE', `/admin/accounts/${account()}/webhooks/checkout`)
  })

  it('holds an account\'s rate and a webhook\'s rate across the cluster: each node counts its share', async () => {
    const patched = await admin(urlOf(0), 'PATCH', `/admin/accounts/${account()}`, { rateLimit: { perSecond: 30, burst: 30 } })
    expect(patched.status, JSON.stringify(patched.body)).to.equal(200)
    for (const member of cluster.live()) {
      await until(`the rate on ${member.id}`, async () => (await admin(member.url, 'GET', `/admin/accounts/${account()}`)).body.rateLimit?.perSecond === 30, 5_000, 10)
    }
    try {
      // 150 page views of 150 visitors at once through the three nodes: about 30 pass (the burst), not 90.
      const startedMs = performance.now()
      const answers = await Promise.all(Array.from({ length: 150 }, (_, i) => post(urlOf(i), '/campaigns/query', { account: account(), visitorId: visitorId(), platform: 'web', event: 'pageView' })))
      const elapsedS = (performance.now() - startedMs) / 1000
      const passed = answers.filter(a => a.status === 200).length
      expect(answers.every(a => a.status === 200 || a.status === 429)).to.equal(true)
      console.log(`      account rate 30/s, burst 30: ${passed} of 150 passed in ${elapsedS.toFixed(2)} s`)
      expect(passed).to.be.at.most(30 + Math.ceil(30 * elapsedS) + 3)
    } finally {
      await admin(urlOf(0), 'PATCH', `/admin/accounts/${account()}`, { rateLimit: null })
    }
    for (const member of cluster.live()) {
      await until(`no rate on ${member.id}`, async () => (await admin(member.url, 'GET', `/admin/accounts/${account()}`)).body.rateLimit === undefined, 5_000, 10)
    }

    // A webhook of 10 requests per second: 60 purchases go out at about that rate, not three times it.
    await putWebhook('slow', {
      name: 'slow', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `${receiver.url}/slow`, payload: '{"who": "{{visitorId}}"}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, ratePerSecond: 10 },
    })
    const postedMs = performance.now()
    for (let i = 0; i < 60; i++) {
      const res = await post(urlOf(i), '/campaigns/query', { account: account(), visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: `slow-${i}` })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
    await until('60 deliveries', () => requestsTo('/slow').length >= 60, 30_000, 20)
    const spanS = (performance.now() - postedMs) / 1000
    console.log(`      webhook rate 10/s: 60 deliveries ${spanS.toFixed(1)} s after the first purchase`)
    expect(spanS, 'three nodes at 10/s each would take 2 s').to.be.at.least(4)
    await admin(urlOf(0), 'DELETE', `/admin/accounts/${account()}/webhooks/slow`)
  })

  it('fires a schedule webhook once per tick in the whole cluster, and each segment member once per tick', async () => {
    await admin(urlOf(0), 'PUT', `/admin/accounts/${account()}/segments/vip`, {})
    await putWebhook('tick', {
      name: 'tick', enabled: true, trigger: { kind: 'schedule', every: '10s' },
      request: { method: 'POST', url: `${receiver.url}/tick`, payload: '{"at": {{occurredAt}}}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    await putWebhook('members', {
      name: 'members', enabled: true, trigger: { kind: 'schedule', every: '10s', segments: ['vip'] },
      request: { method: 'POST', url: `${receiver.url}/members`, payload: '{"at": {{occurredAt}}, "who": "{{visitorId}}{{profileId}}"}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    const members = Array.from({ length: 30 }, () => visitorId())
    for (const [i, v] of members.entries()) {
      const res = await post(urlOf(i), '/visitors/segments', { account: account(), visitorId: v, token: cluster.tenant.token, assignees: ['vip'] })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
    const assignedMs = Date.now()
    // Ticks wholly after the members were assigned: three of them.
    const first = (Math.floor(assignedMs / 10_000) + 1) * 10_000
    const ticks = [first, first + 10_000, first + 20_000]
    await until('three ticks made', () => Date.now() > ticks[2]! + 5_000, 60_000, 200)
    const memberCallsAt = (t: number): string[] => requestsTo('/members').filter(r => Date.parse(JSON.parse(r.body).at) === t).map(r => JSON.parse(r.body).who as string)
    await until('their deliveries', () => ticks.every(t => new Set(memberCallsAt(t)).size === members.length), 30_000, 100).catch((error: Error) => {
      // What a failure needs to be understood: who was missed at which tick, and what the nodes logged.
      const missed = ticks.map(t => `${new Date(t).toISOString()}: ${members.filter(v => !memberCallsAt(t).includes(v)).join(', ') || 'none'}`)
      // Warnings, errors and partition moves (a lease lost at load moves partitions under a tick).
      const logs = cluster.members.map(m => `${m.id}: ${m.process!.output().split('\n').filter(line => /"level":(40|50|60)|lease lost|taken over|handed over/.test(line)).slice(-30).join('\n')}`)
      throw new Error(`${error.message}\nmissed per tick:\n${missed.join('\n')}\nwarnings and errors:\n${logs.join('\n')}`)
    })
    await new Promise(resolve => setTimeout(resolve, 2000)) // duplicates, if any, would come now
    for (const t of ticks) {
      const calls = requestsTo('/tick').filter(r => Date.parse(JSON.parse(r.body).at) === t)
      const memberCalls = memberCallsAt(t)
      const origins = new Set(requestsTo('/members').filter(r => Date.parse(JSON.parse(r.body).at) === t).map(r => String(r.headers['webhook-id']).split(':')[0]))
      console.log(`      tick ${new Date(t).toISOString()}: ${calls.length} call, ${memberCalls.length} member deliveries from ${origins.size} nodes`)
      expect(calls.length).to.equal(1)
      expect(memberCalls.sort()).to.deep.equal([...members].sort())
    }
    await admin(urlOf(0), 'DELETE', `/admin/accounts/${account()}/webhooks/tick`)
    await admin(urlOf(0), 'DELETE', `/admin/accounts/${account()}/webhooks/members`)
  })

  it('sweeps expired windows only at each partition\'s owner, after a takeover and a handover back too', async () => {
    const res = await admin(urlOf(0), 'PUT', `/admin/accounts/${account()}/segments/browsing`, { rule: { fact: 'count', event: 'productView', within: '1m', op: 'gte', value: 1 } })
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201])
    const visitors = Array.from({ length: 60 }, () => visitorId())
    const segmentsOf = async (v: string, i: number): Promise<string[]> => {
      const answer = await post(urlOf(i), '/visitors/query', { account: account(), token: cluster.tenant.token, visitorId: v })
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
      return answer.body.segments as string[]
    }
    const viewedMs = Date.now()
    for (const [i, v] of visitors.entries()) {
      const answer = await post(urlOf(i), '/campaigns/query', { account: account(), visitorId: v, platform: 'web', event: 'productView', sku: 'A' })
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    }
    for (const [i, v] of visitors.entries()) expect(await segmentsOf(v, i + 1)).to.deep.equal(['browsing'])
    // node-3 killed: the others take its partitions (and their expiry rows); restarted, it takes its share
    // back by handovers, leaving the others with rows of partitions they no longer own.
    await cluster.kill(2)
    await cluster.settled()
    await cluster.restart(2)
    await cluster.settled()
    const logStart = cluster.members.map(m => m.process!.output().length)
    await until('every window expired and swept', async () => {
      for (const [i, v] of visitors.entries()) if ((await segmentsOf(v, i)).length > 0) return false
      return true
    }, 180_000, 1000)
    console.log(`      every visitor left the segment ${((Date.now() - viewedMs) / 1000).toFixed(1)} s after its view (window 1 min)`)
    await new Promise(resolve => setTimeout(resolve, 2000))
    for (const [i, member] of cluster.members.entries()) {
      const logs = member.process!.output().slice(i === 2 ? 0 : logStart[i])
      expect(logs, `${member.id}'s log`).not.to.include('segment maintenance failed')
    }
  })

  it('deletes an account through one node: every node erases its share, GET …/deletion answers everywhere, a recovery brings nothing back', async () => {
    const ids: string[] = []
    for (let i = 0; i < 60; i++) {
      const v = visitorId()
      ids.push(v)
      const res = await post(urlOf(i), '/visitors/attributes', { account: account(), token: cluster.tenant.token, visitorId: v, attributes: { n: i } })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
    for (let i = 0; i < 30; i++) {
      const res = await post(urlOf(i), '/profiles/attributes', { account: account(), token: cluster.tenant.token, profileId: `p-${i}-${randomUUID()}`, attributes: { n: i } })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
    const startedMs = Date.now()
    const deleted = await admin(urlOf(1), 'DELETE', `/admin/accounts/${account()}`)
    expect(deleted.status, JSON.stringify(deleted.body)).to.be.oneOf([200, 202])
    for (const member of cluster.live()) {
      await until(`${member.id}'s deletion done`, async () => {
        const progress = await admin(member.url, 'GET', `/admin/accounts/${account()}/deletion`)
        return progress.status === 200 && progress.body.state === 'done'
      }, 60_000, 100)
    }
    console.log(`      done on every node ${Date.now() - startedMs} ms after the DELETE`)
    for (const [i, v] of ids.entries()) {
      const res = await post(urlOf(i), '/visitors/query', { account: account(), token: cluster.tenant.token, visitorId: v })
      expect(res.status).to.be.oneOf([401, 403, 404])
    }
    // A SIGKILLed node's partitions are recovered from the changelog by the others: the deletion is in it.
    await cluster.kill(0)
    await cluster.settled()
    await cluster.restart(0)
    await cluster.settled()
    for (let i = 0; i < 3; i++) await cluster.stop(i)
    for (const member of cluster.members) {
      const store = new Store({ path: member.dataDir, durability: 'committed' })
      try {
        const left = [...store.visitors.getKeys({ start: [account()], end: [account(), '\uffff'] })].length +
          [...store.profiles.getKeys({ start: [account()], end: [account(), '\uffff'] })].length
        expect(left, `${member.id}'s visitors and profiles of the deleted account`).to.equal(0)
      } finally {
        await store.close()
      }
    }
  })
})
