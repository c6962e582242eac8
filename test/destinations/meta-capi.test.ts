// meta-capi end to end: a real in-process Beacon (real HTTP, real LMDB, the webhook delivery
// machinery) sending to the Meta Conversions API contract double on loopback.

import { expect } from 'chai'
import { admin, createTenant, identified, post, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { sha256Hex } from '../../src/destinations/normalize.js'
import { MetaCapiDouble } from './doubles/meta-capi-double.js'

const EMAIL = ' John_Smith@gmail.com'
const PHONE = '+1 (650) 555-1212'

describe('meta-capi destination (Meta Conversions API double)', () => {
  let beacon: InProcess
  let tenant: Tenant
  let meta: MetaCapiDouble

  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
    meta = await new MetaCapiDouble(() => beacon.clock.nowMs()).start()
  })
  afterEach(async () => {
    await beacon.close()
    await meta.close()
  })

  const path = (id = 'meta'): string => `/admin/accounts/${tenant.account}/destinations/${id}`
  const destination = (settings: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> =>
    meta.destination(settings, { events: ['purchase', 'productView'], ...extra })
  async function save (settings: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Promise<void> {
    const saved = await admin(beacon.url, 'PUT', path(), destination(settings, extra))
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200)
  }
  async function person (profileId: string, attributes: Record<string, unknown>): Promise<void> {
    const res = await post(beacon.url, '/profiles/attributes', { account: tenant.account, profileId, token: tenant.token, attributes })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  async function purchase (profileId: string, orderId: string, fields: Record<string, unknown> = {}): Promise<void> {
    const res = await post(beacon.url, '/campaigns/query', {
      account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId, orderTotal: 42.5, currency: 'eur',
      userAgent: 'Mozilla/5.0 (test)', path: '/checkout/done', ...identified(tenant, profileId), ...fields,
    })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  async function deliveries (): Promise<any[]> {
    const res = await admin(beacon.url, 'GET', `${path()}/deliveries`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body.deliveries
  }

  describe('configuration', () => {
    it('refuses a missing pixelId with a 400 naming /settings/pixelId', async () => {
      const res = await admin(beacon.url, 'PUT', path(), { ...destination(), settings: { apiBaseUrl: meta.url } })
      expectError(res, 'invalid_field', '/settings/pixelId')
    })

    it('refuses an unknown setting and a bad type', async () => {
      expectError(await admin(beacon.url, 'PUT', path(), destination({ pixelID: '1' })), 'unknown_field', '/settings/pixelID')
      expectError(await admin(beacon.url, 'PUT', path(), { ...destination(), type: 'myspace' }), 'invalid_field', '/type')
      expectError(await admin(beacon.url, 'PUT', path(), { ...destination(), audiences: ['vip'] }), 'invalid_field', '/audiences')
    })

    it('never shows credentials, keeps them when omitted, and needs them again for a new origin', async () => {
      await save()
      const read = await admin(beacon.url, 'GET', path())
      expect(read.body.credentials).to.equal(undefined)
      expect(read.body.credentialsSet).to.deep.equal(['accessToken'])
      expect(JSON.stringify(read.body)).not.to.contain('meta-token')
      const listed = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations`)
      expect(JSON.stringify(listed.body)).not.to.contain('meta-token')
      // Omitted: kept (same origin).
      const { credentials: _c, ...withoutCredentials } = destination()
      const kept = await admin(beacon.url, 'PUT', path(), withoutCredentials)
      expect(kept.status, JSON.stringify(kept.body)).to.equal(200)
      expect(kept.body.credentialsSet).to.deep.equal(['accessToken'])
      // A new origin: the token must be sent again.
      const moved = await admin(beacon.url, 'PATCH', path(), { settings: { apiBaseUrl: 'http://127.0.0.2:9' } })
      expectError(moved, 'invalid_field', '/credentials/accessToken')
      const resent = await admin(beacon.url, 'PATCH', path(), { settings: { apiBaseUrl: 'http://127.0.0.2:9' }, credentials: { accessToken: 'other' } })
      expect(resent.status, JSON.stringify(resent.body)).to.equal(200)
    })

    it('lets a disabled destination be saved without credentials, not an enabled one', async () => {
      const { credentials: _c, ...bare } = destination()
      expectError(await admin(beacon.url, 'PUT', path(), bare), 'invalid_field', '/credentials/accessToken')
      const draft = await admin(beacon.url, 'PUT', path(), { ...bare, enabled: false })
      expect(draft.status, JSON.stringify(draft.body)).to.equal(200)
      expect(draft.body.credentialsSet).to.deep.equal([])
    })

    it('creates with POST, lists, and deletes', async () => {
      const created = await admin(beacon.url, 'POST', `/admin/accounts/${tenant.account}/destinations`, { id: 'm2', ...destination() })
      expect(created.status, JSON.stringify(created.body)).to.equal(201)
      expect(created.body.id).to.equal('m2')
      expectError(await admin(beacon.url, 'POST', `/admin/accounts/${tenant.account}/destinations`, { id: 'm2', ...destination() }), 'conflict', '/id')
      const listed = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations`)
      expect(listed.body.destinations.map((d: any) => d.id)).to.deep.equal(['m2'])
      expect((await admin(beacon.url, 'DELETE', path('m2'))).status).to.equal(200)
      expectError(await admin(beacon.url, 'GET', path('m2')), 'destination_not_found')
    })
  })

  describe('delivery', () => {
    it('maps a purchase to Purchase with hashed identifiers, and never sends the raw email or phone', async () => {
      await save()
      await person('p-1', { email: EMAIL, phone: PHONE })
      await purchase('p-1', 'o-1')
      await until('the purchase reached Meta', () => meta.events.length === 1)
      const event = meta.events[0]!
      expect(event.event_name).to.equal('Purchase')
      expect(event.event_time).to.equal(Math.floor(beacon.clock.nowMs() / 1000))
      expect(event.action_source).to.equal('website')
      expect(event.event_source_url).to.equal('https://shop.example/checkout/done')
      expect(event.custom_data).to.deep.equal({ value: 42.5, order_id: 'o-1', currency: 'EUR' })
      expect(event.user_data.em).to.deep.equal(['62a14e44f765419d10fea99367361a727c12365e2520f32218d505ed9aa0f62f'])
      expect(event.user_data.ph).to.deep.equal(['e323ec626319ca94ee8bff2e4c87cf613be6ea19919ed1364124e16807ab3176'])
      expect(event.user_data.external_id).to.deep.equal([sha256Hex('p-1')])
      expect(event.user_data.client_user_agent).to.equal('Mozilla/5.0 (test)')
      const [record] = await deliveries()
      expect(record.status).to.equal('delivered')
      expect(event.event_id).to.equal(record.messageId)
      const sent = meta.allBodies()
      for (const raw of ['john_smith@gmail.com', 'John_Smith', '650', '5551212', '16505551212']) expect(sent).not.to.contain(raw)
      // The deliveries log does not show them either.
      expect(JSON.stringify(record)).not.to.contain('John_Smith')
    })

    it('maps productView to ViewContent with content_ids, and takes the event id the site sent', async () => {
      await save()
      const res = await post(beacon.url, '/campaigns/query', {
        account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'productView', sku: 'sku-9', price: 10, eventId: 'pixel-event-1', userAgent: 'UA', path: '/p/9',
      })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      await until('the view reached Meta', () => meta.events.length === 1)
      const event = meta.events[0]!
      expect(event.event_name).to.equal('ViewContent')
      expect(event.event_id).to.equal('pixel-event-1')
      expect(event.custom_data).to.deep.include({ content_ids: ['sku-9'], content_type: 'product', value: 10 })
    })

    it('sends at most 1,000 events a request', async () => {
      await save()
      // Due times are rounded up to the batch window: events of one window wait for it to end, together.
      beacon.clock.advance(1)
      const count = 1100
      for (let i = 0; i < count; i += 100) {
        await Promise.all(Array.from({ length: Math.min(100, count - i) }, (_, j) => post(beacon.url, '/campaigns/query', {
          account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: `o-${i + j}`, orderTotal: 1, currency: 'EUR', userAgent: 'UA', path: '/',
        })))
      }
      await beacon.beacon.deliveries.settled()
      expect(meta.events.length).to.equal(0)
      beacon.clock.advance(999)
      await until('every purchase reached Meta', () => meta.events.length === count, 60_000)
      const sizes = meta.requests.map(request => JSON.parse(request.body).data.length as number)
      expect(Math.max(...sizes)).to.be.at.most(1000)
      expect(sizes.reduce((a, b) => a + b, 0)).to.equal(count)
      expect(sizes.sort((a, b) => b - a)).to.deep.equal([1000, 100])
      expect(new Set(meta.events.map(event => event.event_id)).size).to.equal(count)
    })

    it('retries a 429 after its Retry-After, under the same event_id', async () => {
      await save()
      meta.fail({ status: 429, headers: { 'retry-after': '1' }, body: { error: { message: 'slow down', code: 4 } } })
      await purchase('p-2', 'o-2')
      await until('the first attempt failed', async () => (await deliveries())[0]?.status === 'failed')
      const [failed] = await deliveries()
      expect(failed.attempts[0].status).to.equal(429)
      // Waits exactly the Retry-After (the clock stands still: no backoff jitter in it).
      expect(Date.parse(failed.dueAt) - Date.parse(failed.attempts[0].at)).to.equal(1000)
      expect(meta.events.length).to.equal(0)
      beacon.clock.advance(1000)
      await until('the retry reached Meta', () => meta.events.length === 1)
      const ids = meta.requests.map(request => JSON.parse(request.body).data[0].event_id)
      expect(ids[0]).to.equal(ids[1])
      await until('delivered', async () => (await deliveries())[0]?.status === 'delivered')
    })

    it('retries Meta\'s throttling code sent with a 400, and dead-letters an expired token with a message saying so', async () => {
      await save({}, { })
      meta.fail(MetaCapiDouble.throttled())
      await purchase('p-3', 'o-3')
      await until('the throttled attempt failed', async () => (await deliveries())[0]?.status === 'failed')
      const [throttled] = await deliveries()
      expect(throttled.attempts[0].error).to.contain('code 17')
      await admin(beacon.url, 'DELETE', path())
      await save()
      meta.fail(MetaCapiDouble.expiredToken())
      await purchase('p-4', 'o-4')
      await until('dead', async () => (await deliveries()).some(record => record.status === 'dead'))
      const dead = (await deliveries()).find(record => record.status === 'dead')
      expect(dead.attempts).to.have.length(1)
      expect(dead.attempts[0].error).to.contain('code 190').and.to.contain('save a new token')
      // Replay: the dead delivery goes again (the token is good again).
      const replayed = await admin(beacon.url, 'POST', `${path()}/replay`, { deliveryIds: [dead.id] })
      expect(replayed.body).to.deep.equal({ replayed: 1 })
      await until('the replay reached Meta', () => meta.events.some(event => event.custom_data?.order_id === 'o-4'))
    })

    it('sends nothing for a person without the ads purpose when consent is required, and counts them', async () => {
      await save({ requireConsent: true })
      await person('p-5', { email: 'no@example.com' })
      await person('p-6', { email: 'yes@example.com', consent: ['ads'] })
      await purchase('p-5', 'o-5')
      await purchase('p-6', 'o-6')
      await until('both settled', async () => (await deliveries()).filter(record => record.status === 'delivered').length === 2)
      expect(meta.events.map(event => event.custom_data?.order_id)).to.deep.equal(['o-6'])
      const read = await admin(beacon.url, 'GET', path())
      expect(read.body.health.skippedNoConsent).to.equal(1)
    })

    it('sends a test event with the test event code and shows Meta\'s answer', async () => {
      await save({ testEventCode: 'TEST123' })
      const res = await admin(beacon.url, 'POST', `${path()}/test`, {})
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      expect(res.body.outcome).to.equal('delivered')
      expect(res.body.exchange.answer).to.contain('"events_received":1')
      expect(res.body.exchange.request).not.to.contain('meta-token')
      expect(res.body.exchange.request).to.contain('access_token=***')
      expect(meta.testEventCodes).to.deep.equal(['TEST123'])
      const exchanges = await admin(beacon.url, 'GET', `${path()}/exchanges`)
      expect(exchanges.body.exchanges).to.have.length(1)
      expect(exchanges.body.exchanges[0].test).to.equal(true)
    })
  })
})
