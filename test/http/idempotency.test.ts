// Idempotency-Key on the public writes (docs/retries-and-limits.md, "Idempotent writes"), on a real Beacon process
// (embedded mode, real LMDB) with a real webhook sink: a retry with the key gets the first answer and
// changes nothing more (no second count, impression or webhook), even after a SIGKILL and a restart; the
// key with another body is refused; concurrent requests with one key are applied once; bad keys are 400.

import { expect } from 'chai'
import { admin, createToken, discardBeacon, post, startBeacon, startWithTenant, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { expectError } from '../helpers/errors.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'
import { connect } from 'node:net'

/** A POST written byte by byte (an Idempotency-Key header of any bytes); resolves with the whole answer. */
async function rawPost (port: number, path: string, body: string, key: Buffer): Promise<string> {
  return await new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(Buffer.concat([
        Buffer.from(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nIdempotency-Key: `),
        key, Buffer.from(`\r\n\r\n${body}`),
      ]))
    })
    let answer = ''
    socket.setEncoding('utf8').on('data', (chunk: string) => { answer += chunk }).on('close', () => resolve(answer)).on('error', reject)
  })
}

describe('Idempotency-Key on the public writes (embedded, real process)', function () {
  this.timeout(60_000)
  let beacon: BeaconProcess
  let tenant: Tenant
  let receiver: Receiver
  let token: string

  before(async () => {
    receiver = await startReceiver()
    ;({ beacon, tenant } = await startWithTenant({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } }))
    token = await createToken(beacon.url, tenant.account, { name: 'backend', attributes: ['*'], access: 'read-write' })
    const hook = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/events`, {
      name: 'events', enabled: true, trigger: { kind: 'event', events: ['pageView', 'purchase', 'attributesUpdated'] },
      request: { method: 'POST', url: `${receiver.url}/events`, payload: '{"who": "{{visitorId}}", "event": "{{event}}"}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    expect(hook.status, JSON.stringify(hook.body)).to.be.oneOf([200, 201])
    const campaign = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/campaigns/capped`, {
      name: 'Capped', status: 'active', priority: 1, trigger: { events: ['productView'] }, frequencyCap: { max: 2, per: 'day' }, content: { banner: 'a.png' },
    })
    expect(campaign.status, JSON.stringify(campaign.body)).to.be.oneOf([200, 201])
  })
  after(async () => {
    await discardBeacon(beacon)
    await receiver?.close()
  })

  const keyed = (key: string): { headers: Record<string, string> } => ({ headers: { 'idempotency-key': key } })
  const snapshot = async (visitor: string): Promise<any> => {
    const res = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${visitor}`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body
  }
  const deliveredFor = (visitor: string): number => receiver.requests.filter(r => (JSON.parse(r.body) as { who: string }).who === visitor).length
  /**
   * Every webhook these visitors' writes made has been delivered: a sentinel event sent after them is
   * delivered (one worker, in order), and the webhook's deliveries log holds `count` records of `visitor`.
   */
  const settledWebhooks = async (visitor: string, count: number): Promise<void> => {
    const sentinel = visitorId()
    expect((await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: sentinel, platform: 'web', event: 'pageView' })).status).to.equal(200)
    await until('the sentinel delivered', () => deliveredFor(sentinel) === 1)
    const listed = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/events/deliveries?limit=500`)
    expect(listed.status).to.equal(200)
    expect((listed.body.deliveries as { context: { visitorId?: string } }[]).filter(d => d.context.visitorId === visitor)).to.have.length(count)
  }

  it('answers a retry of an event with the first answer, marked Idempotent-Replayed, and counts it once (one webhook)', async () => {
    const visitor = visitorId()
    const event = { account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView', path: '/a' }
    const first = await post(beacon.url, '/campaigns/query', event, keyed('page-1'))
    expect(first.status, JSON.stringify(first.body)).to.equal(200)
    expect(first.headers.get('idempotent-replayed')).to.equal(null)
    const again = await post(beacon.url, '/campaigns/query', event, keyed('page-1'))
    expect(again.status).to.equal(200)
    expect(again.body).to.deep.equal(first.body)
    expect(again.headers.get('idempotent-replayed')).to.equal('true')
    expect((await snapshot(visitor)).counts).to.deep.equal({ pageView: 1 })
    // Without the key, the same body is a new event (the header is what makes a retry).
    expect((await post(beacon.url, '/campaigns/query', event)).status).to.equal(200)
    expect((await snapshot(visitor)).counts).to.deep.equal({ pageView: 2 })
    await settledWebhooks(visitor, 2)
    expect(deliveredFor(visitor)).to.equal(2)
  })

  it('repeats the first campaigns and counts one impression against the frequency cap', async () => {
    const visitor = visitorId()
    const event = { account: tenant.account, visitorId: visitor, platform: 'web', event: 'productView', sku: 'A1' }
    const first = await post(beacon.url, '/campaigns/query', event, keyed('view-1'))
    expect(first.body.campaigns.map((c: { id: string }) => c.id)).to.deep.equal(['capped'])
    for (let i = 0; i < 3; i++) {
      const again = await post(beacon.url, '/campaigns/query', event, keyed('view-1'))
      expect(again.body).to.deep.equal(first.body)
    }
    // The cap (2 a day) counted one impression: one more event gets the campaign, the next does not.
    expect((await post(beacon.url, '/campaigns/query', event, keyed('view-2'))).body.campaigns).to.have.length(1)
    expect((await post(beacon.url, '/campaigns/query', event, keyed('view-3'))).body.campaigns).to.deep.equal([])
    // And the capped answer is what its retry repeats.
    const capped = await post(beacon.url, '/campaigns/query', event, keyed('view-3'))
    expect(capped.body.campaigns).to.deep.equal([])
    expect(capped.headers.get('idempotent-replayed')).to.equal('true')
    expect((await snapshot(visitor)).counts).to.deep.equal({ productView: 3 })
  })

  it('refuses the key with another body, or on another endpoint, with 422 idempotency_key_reused and changes nothing', async () => {
    const visitor = visitorId()
    const purchase = { account: tenant.account, visitorId: visitor, platform: 'web', event: 'purchase', orderId: 'o-1', orderTotal: 10 }
    expect((await post(beacon.url, '/campaigns/query', purchase, keyed('order-o-1'))).status).to.equal(200)
    const other = await post(beacon.url, '/campaigns/query', { ...purchase, orderId: 'o-2' }, keyed('order-o-1'))
    expectError(other, 'idempotency_key_reused')
    expect(other.body.message).to.match(/Idempotency-Key/)
    const attributes = await post(beacon.url, '/visitors/attributes', { account: tenant.account, token, visitorId: visitor, attributes: { plan: 'pro' } }, keyed('order-o-1'))
    expectError(attributes, 'idempotency_key_reused')
    const state = await snapshot(visitor)
    expect([state.purchases, state.totalSpent, state.orderIds, state.attributes]).to.deep.equal([1, 10, ['o-1'], {}])
    await settledWebhooks(visitor, 1)
  })

  it('applies concurrent requests with one key once: the others wait for it and repeat its answer', async () => {
    const visitor = visitorId()
    const event = { account: tenant.account, visitorId: visitor, platform: 'web', event: 'purchase', orderId: 'c-1', orderTotal: 5, purchasedItems: ['x'] }
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(beacon.url, '/campaigns/query', { ...event, orderTotal: 5 }, keyed('concurrent-1'))))
    for (const answer of answers) expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    expect(answers.filter(answer => answer.headers.get('idempotent-replayed') === null)).to.have.length(1)
    const state = await snapshot(visitor)
    expect([state.purchases, state.counts]).to.deep.equal([1, { purchase: 1 }])
    await settledWebhooks(visitor, 1)
    expect(deliveredFor(visitor)).to.equal(1)
  })

  it('repeats attribute and segment writes of visitors and profiles, with their answers', async () => {
    const visitor = visitorId()
    const body = { account: tenant.account, token, visitorId: visitor, attributes: { color: 'red' } }
    const first = await post(beacon.url, '/visitors/attributes', body, keyed('attr-1'))
    expect(first.status, JSON.stringify(first.body)).to.equal(200)
    const again = await post(beacon.url, '/visitors/attributes', body, keyed('attr-1'))
    expect([again.status, again.body, again.headers.get('idempotent-replayed')]).to.deep.equal([200, first.body, 'true'])
    expectError(await post(beacon.url, '/visitors/attributes', { ...body, attributes: { color: 'blue' } }, keyed('attr-1')), 'idempotency_key_reused')
    expect((await snapshot(visitor)).attributes).to.deep.equal({ color: 'red' })

    const segments = { account: tenant.account, token, visitorId: visitor, assignees: ['vip'] }
    const assigned = await post(beacon.url, '/visitors/segments', segments, keyed('seg-1'))
    expect(assigned.body.segments).to.deep.equal(['vip'])
    // Removed since: the retry still answers what the first write answered, and does not assign again.
    expect((await post(beacon.url, '/visitors/segments', { ...segments, assignees: undefined, removes: ['vip'] })).body.segments).to.deep.equal([])
    const repeated = await post(beacon.url, '/visitors/segments', segments, keyed('seg-1'))
    expect([repeated.body, repeated.headers.get('idempotent-replayed')]).to.deep.equal([assigned.body, 'true'])
    expect((await snapshot(visitor)).segments).to.deep.equal([])

    const profile = { account: tenant.account, token, profileId: `ana-${visitor}@example.com` }
    const p1 = await post(beacon.url, '/profiles/attributes', { ...profile, attributes: { plan: 'pro' } }, keyed('p-attr'))
    const p2 = await post(beacon.url, '/profiles/attributes', { ...profile, attributes: { plan: 'pro' } }, keyed('p-attr'))
    expect([p1.status, p2.body, p2.headers.get('idempotent-replayed')]).to.deep.equal([200, p1.body, 'true'])
    const s1 = await post(beacon.url, '/profiles/segments', { ...profile, assignees: ['gold'] }, keyed('p-seg'))
    const s2 = await post(beacon.url, '/profiles/segments', { ...profile, assignees: ['gold'] }, keyed('p-seg'))
    expect([s1.body.segments, s2.body, s2.headers.get('idempotent-replayed')]).to.deep.equal([['gold'], s1.body, 'true'])
    expectError(await post(beacon.url, '/profiles/segments', { ...profile, assignees: ['silver'] }, keyed('p-seg')), 'idempotency_key_reused')
  })

  it('keeps keys per visitor: the same key on two visitors is two writes', async () => {
    const [a, b] = [visitorId(), visitorId()]
    for (const visitor of [a, b]) {
      const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView' }, keyed('shared-key'))
      expect([res.status, res.headers.get('idempotent-replayed')]).to.deep.equal([200, null])
    }
  })

  it('refuses a key that is too long or not printable ASCII with 400 invalid_idempotency_key, before anything is written', async () => {
    const visitor = visitorId()
    const event = { account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView' }
    const long = await post(beacon.url, '/campaigns/query', event, keyed('k'.repeat(256)))
    expectError(long, 'invalid_idempotency_key')
    expect(long.body.message).to.match(/1 to 255 printable ASCII characters; it has 256 characters/)
    expectError(await post(beacon.url, '/campaigns/query', event, keyed('tab\there')), 'invalid_idempotency_key')
    // fetch does not send a byte above 0x7e in a header: written on the socket (inside the value: uWebSockets.js
    // trims bytes above 0x7f at either end of a header value as it trims spaces).
    const raw = await rawPost(beacon.port, '/visitors/segments', JSON.stringify({ account: tenant.account, token, visitorId: visitor, assignees: ['x'] }), Buffer.from('ca\u00e9f', 'utf8'))
    expect(raw, raw).to.match(/^HTTP\/1\.1 400 /).and.to.include('"code":"invalid_idempotency_key"')
    expect((await snapshot(visitor)).counts).to.deep.equal({})
    // The longest key and every printable character are taken.
    const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(0x20 + i)).join('').trim()
    for (const key of ['k'.repeat(255), printable]) {
      expect((await post(beacon.url, '/campaigns/query', event, keyed(key))).status).to.equal(200)
      expect((await post(beacon.url, '/campaigns/query', event, keyed(key))).headers.get('idempotent-replayed')).to.equal('true')
    }
    // Reads take no key: it is not looked at.
    expect((await post(beacon.url, '/visitors/query', { account: tenant.account, token, visitorId: visitor }, keyed('k'.repeat(300)))).status).to.equal(200)
  })

  it('keeps the answer across a SIGKILL: a retry after the restart is answered from the record (durable with the write)', async () => {
    const visitor = visitorId()
    const purchase = { account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView', path: '/thanks' }
    const first = await post(beacon.url, '/campaigns/query', purchase, keyed('before-kill'))
    expect(first.status).to.equal(200)
    await beacon.kill()
    beacon = await startBeacon({ dataDir: beacon.dataDir, env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
    const again = await post(beacon.url, '/campaigns/query', purchase, keyed('before-kill'))
    expect([again.status, again.body, again.headers.get('idempotent-replayed')]).to.deep.equal([200, first.body, 'true'])
    expect((await snapshot(visitor)).counts).to.deep.equal({ pageView: 1 })
    await settledWebhooks(visitor, 1)
  })
})
