// ga4 and tiktok-events end to end: a real in-process Beacon sending to the GA4 Measurement Protocol
// and TikTok Events API contract doubles on loopback.

import { expect } from 'chai'
import { admin, createTenant, identified, post, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { normalizeExternalId, sha256Hex } from '../../src/destinations/normalize.js'
import { Ga4Double } from './doubles/ga4-double.js'
import { TiktokDouble } from './doubles/tiktok-double.js'

describe('ga4 and tiktok-events destinations (contract doubles)', () => {
  let beacon: InProcess
  let tenant: Tenant

  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
  })
  afterEach(() => beacon.close())

  const put = (id: string, body: Record<string, unknown>): ReturnType<typeof admin> => admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/destinations/${id}`, body)
  const purchase = async (visitor: string, orderId: string, extra: Record<string, unknown> = {}): Promise<void> => {
    const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', event: 'purchase', orderId, orderTotal: 30, currency: 'usd', path: '/done', ...extra })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }

  describe('ga4', () => {
    let ga: Ga4Double
    beforeEach(async () => { ga = await new Ga4Double(() => beacon.clock.nowMs()).start() })
    afterEach(() => ga.close())
    const ga4 = (settings: Record<string, unknown> = {}): Record<string, unknown> => ga.destination(settings, { events: ['purchase', 'productView', 'signup_done'] })

    it('refuses a malformed measurement id naming it', async () => {
      expectError(await put('ga', ga4({ measurementId: 'UA-1' })), 'invalid_field', '/settings/measurementId')
    })

    it('sends recommended events with client_id from the visitor and a hashed user_id, one request per visitor', async () => {
      expect((await put('ga', ga4())).status).to.equal(200)
      const a = visitorId()
      const b = visitorId()
      await purchase(a, 'o-1', identified(tenant, 'Ana@Example.com'))
      await purchase(b, 'o-2')
      await until('both collected', () => ga.collected.length === 2)
      expect(ga.dropped).to.deep.equal([])
      const first = ga.collected.find(payload => payload.client_id === a)!
      expect(first.user_id).to.equal(sha256Hex(normalizeExternalId('Ana@Example.com')!))
      expect(first.events).to.deep.equal([{ name: 'purchase', params: { engagement_time_msec: 1, page_location: '/done', transaction_id: 'o-1', value: 30, currency: 'USD' } }])
      expect(first.timestamp_micros).to.equal(beacon.clock.nowMs() * 1000)
      expect(ga.collected.find(payload => payload.client_id === b)!.user_id).to.equal(undefined)
      expect(ga.allBodies()).not.to.contain('Ana@Example.com')
    })

    it('validates on the debug endpoint and shows its messages', async () => {
      expect((await put('ga', ga4())).status).to.equal(200)
      const valid = await admin(beacon.url, 'POST', `/admin/accounts/${tenant.account}/destinations/ga/test`, {})
      expect(valid.body.outcome, JSON.stringify(valid.body)).to.equal('delivered')
      expect(valid.body.exchange.request).to.contain('/debug/mp/collect')
      expect(valid.body.exchange.request).to.contain('api_secret=***')
      // A custom kind GA4 reserves: the validation server says so.
      const invalid = await admin(beacon.url, 'POST', `/admin/accounts/${tenant.account}/destinations/ga/test`, { event: 'session_start' })
      expect(invalid.body.outcome).to.equal('terminal')
      expect(invalid.body.error).to.contain('GA4 validation: events[0].name session_start is a reserved name.')
      expect(ga.collected).to.deep.equal([])
    })
  })

  describe('tiktok-events', () => {
    let tt: TiktokDouble
    beforeEach(async () => { tt = await new TiktokDouble().start() })
    afterEach(() => tt.close())
    const tiktok = (settings: Record<string, unknown> = {}): Record<string, unknown> => tt.destination(settings)

    it('sends CompletePayment with hashed email, E.164 phone and external id, and the delivery id as event_id', async () => {
      expect((await put('tt', tiktok())).status).to.equal(200)
      expect((await post(beacon.url, '/profiles/attributes', { account: tenant.account, profileId: 'p-1', token: tenant.token, attributes: { email: 'JaneDoe@Gmail.com', phone: '+1 657 777 0000' } })).status).to.equal(200)
      await purchase(visitorId(), 'o-1', identified(tenant, 'p-1'))
      await until('sent', () => tt.events.length === 1)
      const event = tt.events[0]!
      expect(event.event).to.equal('CompletePayment')
      expect(event.user.email).to.equal('d6117306485ed0e50afab3ac871e98f81699151f30281527d63ff5f233656c69')
      expect(event.user.phone).to.equal(sha256Hex('+16577770000'))
      expect(event.user.external_id).to.equal(sha256Hex('p-1'))
      expect(event.properties).to.deep.equal({ value: 30, order_id: 'o-1', currency: 'USD' })
      expect(event.page).to.deep.equal({ url: 'https://shop.example/done' })
      const [record] = (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/tt/deliveries`)).body.deliveries
      expect(event.event_id).to.equal(record.messageId)
      expect(tt.allBodies()).not.to.contain('JaneDoe').and.not.to.contain('6577770000"')
    })

    it('retries TikTok\'s rate-limit code sent with HTTP 200, and dead-letters an invalid token', async () => {
      expect((await put('tt', tiktok())).status).to.equal(200)
      tt.fail(TiktokDouble.rateLimited())
      await purchase(visitorId(), 'o-2')
      const list = async (): Promise<any[]> => (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/tt/deliveries`)).body.deliveries
      await until('failed, to be retried', async () => (await list())[0]?.status === 'failed')
      expect((await list())[0].attempts[0].error).to.contain('TikTok code 40100')
      tt.validTokens.clear()
      beacon.clock.advance(60_000)
      await until('dead', async () => (await list())[0]?.status === 'dead')
      expect((await list())[0].attempts[1].error).to.contain('TikTok code 40001')
    })
  })
})
