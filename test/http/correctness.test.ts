// Correctness against a real Beacon process (real LMDB, real HTTP, a real webhook receiver): exact
// sums, bounded numbers, one spelling of a visitor id, what webhooks carry, what tokens may read, and
// what validation says.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { emptyVisitor } from '../../actors/visitor.js'
import { emptyProfile } from '../../actors/profile.js'
import { admin, createTenant, createToken, identified, post, removeDir, startBeacon, tempDir, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'
import { expectError } from '../helpers/errors.js'

describe('correctness', function () {
  this.timeout(60_000)
  let beacon: BeaconProcess
  let receiver: Receiver
  let tenant: Tenant
  before(async () => {
    receiver = await startReceiver()
    beacon = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
  })
  after(async () => {
    await beacon.stop()
    await receiver.close()
    removeDir(beacon.dataDir)
  })
  beforeEach(async () => {
    tenant = await createTenant(beacon.url)
    receiver.requests.length = 0
  })

  // A profileId goes with its signature (verified identity).
  const event = (fields: Record<string, unknown>) => post(beacon.url, '/campaigns/query', {
    account: tenant.account, platform: 'web', event: 'pageView', ...fields,
    ...(typeof fields.profileId === 'string' ? identified(tenant, fields.profileId) : {}),
  })
  const putWebhook = (id: string, body: Record<string, unknown>) => admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/${id}`, {
    name: id, enabled: true, delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 }, ...body,
  })
  const deliveries = async (id: string, status: string): Promise<any[]> =>
    (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/${id}/deliveries?status=${status}`)).body.deliveries

  describe('segment sums', () => {
    it('counts a repeated orderId once in a computed sum, as in the visitor summary', async () => {
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/big`, { rule: { fact: 'sum', event: 'purchase', field: 'orderTotal', within: '30d', op: 'gte', value: 500 } })
      const v = visitorId()
      const buy = (orderId: string) => event({ visitorId: v, event: 'purchase', orderId, orderTotal: 300 })
      expect((await buy('o-1')).status).to.equal(200)
      expect((await buy('o-1')).status).to.equal(200) // a browser retry
      const segments = async () => (await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: v, token: tenant.token })).body.segments
      expect(await segments()).to.deep.equal([])
      expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${v}`)).body).to.include({ purchases: 1, totalSpent: 300 })
      await buy('o-2')
      expect(await segments()).to.deep.equal(['big'])
    })
  })

  describe('numeric event fields', () => {
    it('refuses amounts out of 0 to 10^12 and custom numbers past ±10^15 with 400 naming the field, and records nothing', async () => {
      const v = visitorId()
      const cases: [Record<string, unknown>, string, string][] = [
        [{ orderTotal: -2_000_000 }, '/orderTotal', 'at least 0'],
        [{ orderTotal: 1.7e308 }, '/orderTotal', 'at most 1000000000000'],
        [{ price: -1 }, '/price', 'at least 0'],
        [{ score: 1e300 }, '/score', 'at most 1000000000000000'],
      ]
      for (const [fields, field, message] of cases) {
        const res = await event({ visitorId: v, event: 'purchase', orderId: 'o-1', ...fields })
        expect(res.status, JSON.stringify(fields)).to.equal(400)
        expectError(res, 'invalid_field', field)
        expect(res.body.errors[0].message).to.include(message)
      }
      // 1e400 is Infinity once parsed: refused as well.
      const infinite = await post(beacon.url, '/campaigns/query', `{"account":"${tenant.account}","visitorId":"${v}","platform":"web","event":"purchase","orderId":"o-2","orderTotal":1e400}`, { raw: true })
      expect(infinite.status).to.equal(400)
      expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${v}`)).body).to.include({ purchases: 0, totalSpent: 0 })
      expect((await event({ visitorId: v, event: 'purchase', orderId: 'o-3', orderTotal: 1e12, price: 0 })).status).to.equal(200)
    })
  })

  describe('visitor ids', () => {
    it('treats upper-case visitor and account ids as the same ones on public and admin paths, and answers them in lower case', async () => {
      const lower = visitorId()
      const upper = lower.toUpperCase()
      await event({ visitorId: upper, account: tenant.account.toUpperCase() })
      await post(beacon.url, '/visitors/attributes', { account: tenant.account.toUpperCase(), visitorId: upper, token: tenant.token, attributes: { color: 'red' } })
      const saved = await post(beacon.url, '/visitors/segments', { account: tenant.account, visitorId: upper, token: tenant.token, assignees: ['vip'] })
      expect(saved.body.visitorId).to.equal(lower)
      await event({ visitorId: lower })
      const query = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: lower, token: tenant.token })
      expect(query.body).to.deep.include({ attributes: { color: [{ value: 'red' }] }, segments: ['vip'] })
      for (const id of [lower, upper]) {
        const state = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account.toUpperCase()}/visitors/${id}`)
        expect(state.body).to.deep.include({ visitorId: lower, counts: { pageView: 2 } })
      }
    })

    it('finds a visitor an earlier release stored under its upper-case id, and moves it to the lower-case key', async () => {
      const lower = visitorId()
      const upper = lower.toUpperCase()
      try {
        await beacon.stop()
        const store = new Store({ path: beacon.dataDir, durability: 'flushed' })
        const expiresAtMs = Date.now() + 86_400_000
        await store.durable(store.visitors.put([tenant.account, upper], { ...emptyVisitor(), profileId: 'old@example.com', attributes: { plan: 'pro' }, counts: { pageView: 3 }, firstSeenMs: 1, lastSeenMs: 2, expiresAtMs, indexed: ['vip'] }))
        await store.durable(store.expiries.put([expiresAtMs, tenant.account, 'visitor', upper], null))
        await store.durable(store.members.put([tenant.account, 'vip', 'visitor', upper], null))
        const device = { attributes: { plan: 'pro' }, attributeTimes: {}, segments: [], windows: {}, metrics: { pageViews: 3, productViews: 0, purchases: 0, totalSpent: 0, firstSeenMs: 1, lastSeenMs: 2, viewedSkus: [], purchasedSkus: [], viewedCategories: [] } }
        await store.durable(store.profiles.put([tenant.account, 'old@example.com'], { ...emptyProfile(), visitors: [upper], devices: { [upper]: device } }))
        await store.close()
        beacon = await startBeacon({ dataDir: beacon.dataDir, env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
        const query = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: lower, token: tenant.token })
        expect(query.body.attributes).to.deep.equal({ plan: [{ value: 'pro' }] })
        await event({ visitorId: upper })
        expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${upper}`)).body.counts).to.deep.equal({ pageView: 4 })
        // Its profile knows the device under one spelling, the lower-case one it reports under now.
        const profile = (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/profiles/old@example.com`)).body
        expect(profile.visitors).to.deep.equal([lower])
        expect(Object.keys(profile.devices)).to.deep.equal([lower])
        expect(profile.devices[lower].behaviour.pageViews).to.equal(4)
        await beacon.stop()
        const reopened = new Store({ path: beacon.dataDir, durability: 'flushed' })
        expect(reopened.visitors.get([tenant.account, upper])).to.equal(undefined)
        // Its index entries moved with it (and were then kept up to date under the lower-case id).
        const indexed = [...reopened.expiries.getKeys(), ...reopened.members.getKeys()] as unknown[][]
        expect(indexed.filter(key => key.includes(upper))).to.deep.equal([])
        expect((reopened.visitors.get([tenant.account, lower]) as { counts: Record<string, number> }).counts).to.deep.equal({ pageView: 4 })
        await reopened.close()
      } finally {
        // The later tests need a running Beacon, whatever happened here.
        if (beacon.child.exitCode !== null || beacon.child.signalCode !== null) beacon = await startBeacon({ dataDir: beacon.dataDir, env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
      }
    })
  })

  describe('webhook placeholders', () => {
    it('renders {{attribute.<name>}} on a purchase from the attributes stored on the visitor and its profile', async () => {
      await putWebhook('orders', {
        trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: `${receiver.url}/orders`, payload: '{"order": {{event.orderId}}, "plan": {{attribute.plan}}, "color": {{attribute.color}}}' },
      })
      const v = visitorId()
      await post(beacon.url, '/profiles/attributes', { account: tenant.account, profileId: 'ana@example.com', token: tenant.token, attributes: { plan: 'pro' } })
      await post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: v, token: tenant.token, attributes: { color: 'red' } })
      await event({ visitorId: v, profileId: 'ana@example.com', event: 'purchase', orderId: 'o-1', orderTotal: 5 })
      await until('the delivery', () => receiver.requests.length === 1)
      expect(JSON.parse(receiver.requests[0]!.body)).to.deep.equal({ order: 'o-1', plan: 'pro', color: 'red' })
    })

    it('sends an event webhook\'s default payload with the account, the visitor, the profile and the event\'s fields', async () => {
      await putWebhook('default-orders', { trigger: { kind: 'event', events: ['purchase'] }, request: { method: 'POST', url: `${receiver.url}/default` } })
      const v = visitorId()
      // An anonymous purchase: no profile, yet the receiver knows who bought what.
      await event({ visitorId: v, event: 'purchase', orderId: 'o-7', orderTotal: 42.5, purchasedItems: ['SKU-1'] })
      await until('the delivery', () => receiver.requests.length === 1)
      const body = JSON.parse(receiver.requests[0]!.body)
      expect(body).to.deep.equal({
        profile: null, audience: null, event: 'purchase', occurredAt: body.occurredAt,
        account: tenant.account, visitorId: v, profileId: null, fields: { platform: 'web', orderId: 'o-7', orderTotal: 42.5, purchasedItems: ['SKU-1'] },
      })
      expect(Date.parse(body.occurredAt)).to.be.a('number').and.not.NaN
    })

    it('sends an audience webhook\'s default payload with the visitorId and whether it was an enter or an exit', async () => {
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/buyers`, { rule: { fact: 'count', event: 'purchase', op: 'gte', value: 1 } })
      await putWebhook('audience', { trigger: { kind: 'audience', segments: ['buyers'], on: ['enter', 'exit'] }, request: { method: 'POST', url: `${receiver.url}/audience` } })
      const v = visitorId()
      await event({ visitorId: v, event: 'purchase', orderId: 'o-1' })
      await until('the enter', () => receiver.requests.length === 1)
      expect(JSON.parse(receiver.requests[0]!.body)).to.deep.include({ profile: null, visitorId: v, audience: 'buyers', change: 'enter', event: null, account: tenant.account, profileId: null })
    })
  })

  describe('url placeholders', () => {
    it('never sends a request whose url placeholder renders a dot segment; the delivery is dead with the reason', async () => {
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/event-types/customerDeleted`, { required: ['customer'] })
      await putWebhook('erase', {
        trigger: { kind: 'event', events: ['customerDeleted'] },
        request: { method: 'DELETE', url: `${receiver.url}/api/customers/{{event.customer}}`, auth: { type: 'bearer', token: 'crm-secret' } },
      })
      for (const customer of ['..', '.', 'c-1', 'a..b']) expect((await event({ visitorId: visitorId(), event: 'customerDeleted', customer })).status).to.equal(200)
      await until('two sent', () => receiver.requests.length === 2)
      let dead: any[] = []
      await until('two dead', async () => (dead = await deliveries('erase', 'dead')).length === 2)
      expect(receiver.requests.map(r => r.url.split('?')[0]).sort()).to.deep.equal(['/api/customers/a..b', '/api/customers/c-1'])
      for (const record of dead) expect(record.attempts[0].error).to.include('dot segment')
    })
  })

  describe('segment permissions of tokens', () => {
    it('answers a write-only token\'s segment change without the segment list, a read-write token with it', async () => {
      const writer = await createToken(beacon.url, tenant.account, { name: 'writer', attributes: ['*'], access: 'write' })
      await post(beacon.url, '/profiles/segments', { account: tenant.account, profileId: 'p1', token: tenant.token, assignees: ['secret-list'] })
      for (const path of ['/profiles/segments', '/visitors/segments']) {
        const who = path.startsWith('/profiles') ? { profileId: 'p1' } : { visitorId: visitorId() }
        const written = await post(beacon.url, path, { account: tenant.account, ...who, token: writer, assignees: ['vip'] })
        expect(written.status).to.equal(200)
        expect(written.body).to.not.have.property('segments')
        expect(written.body).to.include({ message: 'Segments saved.' })
      }
      const both = await post(beacon.url, '/profiles/segments', { account: tenant.account, profileId: 'p1', token: tenant.token, assignees: ['other'] })
      expect(both.body.segments).to.have.members(['secret-list', 'vip', 'other'])
    })
  })

  describe('campaign triggers', () => {
    it('refuses a campaign triggered by an event type the account does not define with 400 naming it', async () => {
      const campaign = { name: 'c', status: 'active', priority: 1, trigger: { events: ['pageView', 'signup'] }, content: {} }
      const refused = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/campaigns/c`, campaign)
      expect(refused.status).to.equal(400)
      expect(refused.body.errors).to.have.length(1)
      expectError(refused, 'unknown_event_type', '/trigger/events/1')
      expect(refused.body.errors[0].message).to.include('"signup"')
      expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/campaigns/c`)).status).to.equal(404)
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/event-types/signup`, { required: [] })
      expect((await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/campaigns/c`, campaign)).status).to.equal(200)
    })
  })

  describe('validation messages', () => {
    it('say what was expected for each bad field', async () => {
      const v = visitorId()
      const table: [Record<string, unknown>, string, string][] = [
        [{ visitorId: 'ABC' }, '/visitorId', 'visitorId: expected a UUID v4'],
        [{ account: 'shop' }, '/account', 'account: expected a UUID'],
        [{ path: 'x'.repeat(2049) }, '/path', 'path: expected at most 2048 characters.'],
        [{ device: 'tv' }, '/device', 'device: expected "desktop", "tablet" or "mobile".'],
        [{ referrer: 5 }, '/referrer', 'referrer: expected a string or null.'],
        [{ note: { nested: true } }, '/note', 'note: expected a string, a number, true or false, null or a list of strings.'],
        [{ note: 'x'.repeat(2049) }, '/note', 'note: expected at most 2048 characters.'],
        [{ tags: ['x'.repeat(257)] }, '/tags/0', 'tags/0: expected at most 256 characters.'],
        [{ purchasedItems: 'A' }, '/purchasedItems', 'purchasedItems: expected a list.'],
        [{ platform: '' }, '/platform', 'platform: expected at least 1 character.'],
        [{ event: 'page view' }, '/event', 'event: expected 1 to 128 characters of A-Z a-z 0-9 _ . : -.'],
        [{ orderTotal: 'ten' }, '/orderTotal', 'orderTotal: expected a number.'],
      ]
      for (const [fields, field, message] of table) {
        const res = await event({ visitorId: v, ...fields })
        expect(res.status, JSON.stringify(fields)).to.equal(400)
        expect(res.body.errors, JSON.stringify(fields)).to.have.length(1)
        expect(res.body.errors[0], JSON.stringify(fields)).to.include({ code: 'invalid_field', field })
        expect(res.body.errors[0].message).to.include(message)
        expect(res.body.errors[0].message).to.not.include('accepted types')
      }
      const attributes = await post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: v, token: tenant.token, attributes: { bio: 'x'.repeat(4097), extra: {} } })
      expect(attributes.body.errors.map((e: { field: string, message: string }) => `${e.field} ${e.message}`)).to.deep.equal([
        '/attributes/bio attributes/bio: expected at most 4096 characters.',
        '/attributes/extra attributes/extra: expected a string, a number, true or false, a list of strings or null.',
      ])
    })
  })

  describe('admin views', () => {
    it('lists deliveries with attempts numbered from 1 and ISO times', async () => {
      await putWebhook('orders', { trigger: { kind: 'event', events: ['purchase'] }, request: { method: 'POST', url: `${receiver.url}/orders` } })
      await event({ visitorId: visitorId(), event: 'purchase', orderId: 'o-1' })
      let delivered: any[] = []
      await until('delivered', async () => (delivered = await deliveries('orders', 'delivered')).length === 1)
      const record = delivered[0]
      expect(record).to.include({ status: 'delivered', nextAttempt: null, dueAt: null, replayedAt: null })
      // Embedded mode: the webhook-id of its requests is its id.
      expect(record.messageId).to.equal(record.id)
      expect(receiver.requests.filter(r => r.url === '/orders').map(r => r.headers['webhook-id'])).to.include(record.id)
      expect(record.attempts).to.have.length(1)
      expect(record.attempts[0]).to.include({ attempt: 1, status: 200 })
      for (const time of [record.attempts[0].at, record.occurredAt, record.createdAt, record.updatedAt]) expect(time).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      for (const internal of ['seq', 'account', 'item', 'attempt', 'dueMs', 'createdAtMs']) expect(record).to.not.have.property(internal)
    })

    it('shows visitors and profiles without store keys or internal fields, with ISO times', async () => {
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/viewers`, { rule: { fact: 'count', event: 'pageView', within: '1d', op: 'gte', value: 1 } })
      const v = visitorId()
      await event({ visitorId: v, profileId: 'bo@example.com' })
      const visitor = (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${v}`)).body
      expect(visitor).to.include({ visitorId: v, profileId: 'bo@example.com' })
      expect(visitor.computedSegments).to.deep.equal(['viewers'])
      expect(visitor.firstSeen).to.match(/^\d{4}-\d\d-\d\dT/)
      const profile = (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/profiles/bo@example.com`)).body
      expect(profile).to.include({ profileId: 'bo@example.com' })
      expect(profile.visitors).to.deep.equal([v])
      expect(profile.devices[v].behaviour.lastSeen).to.match(/^\d{4}-\d\d-\d\dT/)
      const text = JSON.stringify([visitor, profile])
      for (const internal of ['segmentsVersion', 'expiresAtMs', 'indexed', 'windows', 'firstSeenMs', 'attributeTimes', '"computed"']) expect(text).to.not.include(internal)
    })
  })
})

describe('visitor ids in a fresh data folder', () => {
  it('keeps one row for ids that differ only in case', async () => {
    const dataDir = tempDir()
    const beacon = await startBeacon({ dataDir })
    try {
      const tenant = await createTenant(beacon.url)
      const id = visitorId()
      for (const spelling of [id, id.toUpperCase(), id]) {
        await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: spelling, platform: 'ios', event: 'pageView' })
      }
    } finally {
      await beacon.stop()
    }
    const store = new Store({ path: dataDir, durability: 'flushed' })
    try {
      expect([...store.visitors.getKeys()]).to.have.length(1)
    } finally {
      await store.close()
      removeDir(dataDir)
    }
  })
})
