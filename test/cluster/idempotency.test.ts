// Idempotency-Key in cluster mode, real processes: a 3-server NATS JetStream cluster (R3), 3 Beacon nodes
// (test/helpers/beacon-cluster.ts) and a real webhook sink. Purchases are made with keys through every
// node; then the owner of a third of the partitions is SIGKILLed and the others take its partitions over
// (recovering the key records from the changelog), and every purchase is retried with its key through
// another node: each is answered with its first answer (Idempotent-Replayed), counted once, and reaches
// the sink under one webhook-id; the key with another body is refused (422) on the new owner as well.
// This is the retry of a write whose answer the caller never got (docs/retries-and-limits.md, "Idempotent writes").

import { expect } from 'chai'
import { admin, post, visitorId, type Answer } from '../helpers/beacon.js'
import { CLUSTER_PARTITIONS, startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { partitionOf } from '../../src/cluster/partition.js'

const PURCHASES = 30

describe('Beacon cluster mode: Idempotency-Key retries through another node after the owner is SIGKILLed (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let receiver: Receiver

  before(async () => {
    receiver = await startReceiver()
    cluster = await startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_NATS_ACK_WAIT_MS: '5000' })
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

  const webhookIds = (who: string): Set<string> => new Set(receiver.requests
    .filter(r => r.url === '/purchases' && (JSON.parse(r.body) as { who: string }).who === who)
    .map(r => String(r.headers['webhook-id'])))
  const purchase = (who: string, orderId: string): Record<string, unknown> =>
    ({ account: cluster.tenant.account, visitorId: who, platform: 'web', event: 'purchase', orderId, orderTotal: 7 })
  /** A request through `url`, again on a 503 (a partition changing owner: no answer means nothing to compare yet). */
  const send = async (url: string, body: Record<string, unknown>, key: string): Promise<Answer> => {
    for (let attempt = 1; ; attempt++) {
      const answer = await post(url, '/campaigns/query', body, { headers: { 'idempotency-key': key } })
      if (answer.status !== 503 || attempt === 10) return answer
      await new Promise(resolve => setTimeout(resolve, 200))
    }
  }

  it('answers every retry from the first answer, counts each purchase once and sends one webhook-id per purchase', async () => {
    const visitors = Array.from({ length: PURCHASES }, () => visitorId())
    const firsts = new Map<string, Answer>()
    for (const [i, who] of visitors.entries()) {
      const answer = await send(cluster.live()[i % 3]!.url, purchase(who, `order-${i}`), `key-${who}`)
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
      expect(answer.headers.get('idempotent-replayed')).to.equal(null)
      firsts.set(who, answer)
    }
    await until('every purchase delivered', () => visitors.every(who => webhookIds(who).size === 1), 60_000, 50)

    // The victim owns a third of the partitions: its purchases are retried at the nodes that take them over.
    const owners = await cluster.settled()
    const victim = cluster.members[0]!
    const victims = visitors.filter(who => owners.get(partitionOf(cluster.tenant.account, who, CLUSTER_PARTITIONS)) === victim.id)
    expect(victims.length, 'purchases whose partition the killed node owned').to.be.above(0)
    // A page view too (a repeated orderId counts once anyway, a page view would count twice).
    const view = (who: string): Record<string, unknown> => ({ account: cluster.tenant.account, visitorId: who, platform: 'web', event: 'pageView', path: '/thanks' })
    for (const who of victims) expect((await send(cluster.members[1]!.url, view(who), `view-${who}`)).status).to.equal(200)
    await cluster.kill(0)
    await cluster.settled()

    const survivors = cluster.live()
    for (const [i, who] of visitors.entries()) {
      const again = await send(survivors[i % survivors.length]!.url, purchase(who, `order-${i}`), `key-${who}`)
      expect([again.status, again.headers.get('idempotent-replayed')], JSON.stringify(again.body)).to.deep.equal([200, 'true'])
      expect(again.body).to.deep.equal(firsts.get(who)!.body)
    }
    for (const who of victims) expect((await send(survivors[0]!.url, view(who), `view-${who}`)).headers.get('idempotent-replayed')).to.equal('true')
    // The key with another body, on the new owner of a victim's partition too.
    for (const who of [victims[0]!, visitors.find(who => !victims.includes(who))!]) {
      expectError(await send(survivors[1]!.url, purchase(who, 'another-order'), `key-${who}`), 'idempotency_key_reused')
    }

    for (const who of visitors) {
      const state = await admin(survivors[0]!.url, 'GET', `/admin/accounts/${cluster.tenant.account}/visitors/${who}`)
      expect(state.status, JSON.stringify(state.body)).to.equal(200)
      const counts = victims.includes(who) ? { purchase: 1, pageView: 1 } : { purchase: 1 }
      expect([state.body.purchases, state.body.counts, state.body.orderIds.length], who).to.deep.equal([1, counts, 1])
    }
    // Every relay has moved past the retries: one more purchase per survivor, each delivered, came after them.
    const sentinels = survivors.map(() => visitorId())
    for (const [i, who] of sentinels.entries()) expect((await send(survivors[i]!.url, purchase(who, 'sentinel'), `key-${who}`)).status).to.equal(200)
    await until('the sentinels delivered', () => sentinels.every(who => webhookIds(who).size === 1), 60_000, 50)
    const twice = visitors.filter(who => webhookIds(who).size !== 1)
    expect(twice.map(who => [who, [...webhookIds(who)]]), 'purchases under more than one webhook-id').to.deep.equal([])
    const requests = receiver.requests.filter(r => r.url === '/purchases' && visitors.includes((JSON.parse(r.body) as { who: string }).who)).length
    console.log(`      ${victims.length} of ${PURCHASES} purchases owned by the killed node; ${requests} webhook requests for ${PURCHASES} purchases (a row the dead node relayed last may be resent under its webhook-id)`)
  })
})
