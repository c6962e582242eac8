// Consent: an account that requires it (its requireConsent setting) has its destinations send only for
// people whose consent attribute holds the destination's purpose, set by the SDK's consent event or the
// attributes API; a meta-capi destination (ads) and a ga4 one (analytics) into their contract doubles.

import { expect } from 'chai'
import { admin, createTenant, post, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { putAll } from './setup.js'
import { MetaCapiDouble } from './doubles/meta-capi-double.js'
import { Ga4Double } from './doubles/ga4-double.js'

describe('consent to destinations (account setting, SDK consent event, attributes API)', () => {
  let beacon: InProcess
  let tenant: Tenant
  let meta: MetaCapiDouble
  let ga: Ga4Double

  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
    meta = await new MetaCapiDouble(() => beacon.clock.nowMs()).start()
    ga = await new Ga4Double(() => beacon.clock.nowMs()).start()
    await putAll(beacon.url, tenant.account, { 'destinations/meta': meta.destination(), 'destinations/ga': ga.destination() })
  })
  afterEach(async () => {
    await beacon.close()
    await meta.close()
    await ga.close()
  })

  const requireConsent = async (on: boolean): Promise<void> => {
    const res = await admin(beacon.url, 'PATCH', `/admin/accounts/${tenant.account}`, { requireConsent: on })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    expect(res.body.requireConsent).to.equal(on)
  }
  const event = (visitor: string, body: Record<string, unknown>): ReturnType<typeof post> =>
    post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', ...body })
  const purchase = async (visitor: string, orderId: string): Promise<void> => {
    const res = await event(visitor, { event: 'purchase', orderId, orderTotal: 10, currency: 'eur', userAgent: 'Mozilla/5.0 (test)', path: '/done' })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  const consentEvent = async (visitor: string, purposes: string[]): Promise<void> => {
    const res = await event(visitor, { event: 'consent', purposes })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  const metaOrders = (): string[] => meta.events.map(e => String(e.custom_data?.order_id)).sort()
  const gaOrders = (): string[] => ga.collected.flatMap(payload => payload.events.map(e => String((e.params as Record<string, unknown> | undefined)?.transaction_id))).sort()
  const settled = async (id: string, count: number): Promise<void> => {
    await until(`${count} ${id} deliveries settled`, async () =>
      ((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/${id}/deliveries`)).body.deliveries as any[]).filter(record => record.status === 'delivered').length === count)
  }

  it('validates the account setting and the consent event', async () => {
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}`)).body.requireConsent).to.equal(false)
    expectError(await admin(beacon.url, 'PATCH', `/admin/accounts/${tenant.account}`, { requireConsent: 'yes' }), 'invalid_field', '/requireConsent')
    expectError(await event(visitorId(), { event: 'consent' }), 'invalid_field', '/purposes')
    expectError(await event(visitorId(), { event: 'consent', purposes: ['marketing'] }), 'invalid_field', '/purposes/0')
    expectError(await event(visitorId(), { event: 'consent', purposes: ['ads', 'ads'] }), 'invalid_field', '/purposes')
  })

  it('sends each destination only the people who consented to its purpose, by consent event or attributes API', async () => {
    await requireConsent(true)
    const none = visitorId()
    const analytics = visitorId()
    const ads = visitorId()
    const both = visitorId()
    await consentEvent(analytics, ['analytics'])
    const attributes = await post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: ads, token: tenant.token, attributes: { consent: ['ads'] } })
    expect(attributes.status, JSON.stringify(attributes.body)).to.equal(200)
    await consentEvent(both, ['ads', 'analytics'])
    const visitor = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${both}`)
    expect(visitor.body.attributes.consent).to.deep.equal(['ads', 'analytics'])
    await purchase(none, 'o-none')
    await purchase(analytics, 'o-analytics')
    await purchase(ads, 'o-ads')
    await purchase(both, 'o-both')
    await settled('meta', 4)
    await settled('ga', 4)
    expect(metaOrders()).to.deep.equal(['o-ads', 'o-both'])
    expect(gaOrders()).to.deep.equal(['o-analytics', 'o-both'])
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/meta`)).body.health.skippedNoConsent).to.equal(2)
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/ga`)).body.health.skippedNoConsent).to.equal(2)
    // Withdrawn (the SDK's consent(false) sends an empty list): nothing more goes.
    await consentEvent(both, [])
    await purchase(both, 'o-both-2')
    await settled('meta', 5)
    expect(metaOrders()).to.deep.equal(['o-ads', 'o-both'])
  })

  it('sends everyone when the account does not require consent', async () => {
    await requireConsent(false)
    await purchase(visitorId(), 'o-1')
    await until('both sent', () => metaOrders().length === 1 && gaOrders().length === 1)
    expect(metaOrders()).to.deep.equal(['o-1'])
  })
})
