// braze end to end: events, purchases and audience membership of a real in-process Beacon in the
// Braze /users/track double.

import { expect } from 'chai'
import { admin, createTenant, identified, post, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { until } from '../helpers/until.js'
import { BrazeDouble } from './doubles/braze-double.js'

describe('braze destination (/users/track double)', () => {
  let beacon: InProcess
  let tenant: Tenant
  let braze: BrazeDouble

  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
    braze = await new BrazeDouble().start()
    expect((await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/event-types/signup`, { required: [] })).status).to.equal(200)
    expect((await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/vip`, { rule: { fact: 'attribute.tier', op: 'eq', value: 'vip' } })).status).to.equal(200)
    expect((await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/news`, { rule: { fact: 'attribute.news', op: 'eq', value: true } })).status).to.equal(200)
  })
  afterEach(async () => {
    await beacon.close()
    await braze.close()
  })

  const save = async (settings: Record<string, unknown> = {}): Promise<void> => {
    const res = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/destinations/braze`, {
      type: 'braze', name: 'Braze', enabled: true, events: ['purchase', 'signup'], audiences: ['vip', 'news'],
      credentials: { apiKey: 'braze-key' }, settings: { apiBaseUrl: braze.url, subscriptionGroups: { news: 'sg-1' }, ...settings },
    })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }

  it('tracks a purchase, a custom event of an anonymous visitor, and audience membership by attribute and subscription group', async () => {
    await save()
    const v = visitorId()
    expect((await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: v, platform: 'web', event: 'signup', plan: 'pro' })).status).to.equal(200)
    expect((await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: 'o-1', orderTotal: 12, currency: 'eur', purchasedItems: ['sku-1'], ...identified(tenant, 'p-1') })).status).to.equal(200)
    expect((await post(beacon.url, '/profiles/attributes', { account: tenant.account, profileId: 'p-2', token: tenant.token, attributes: { tier: 'vip', news: true } })).status).to.equal(200)
    await until('all tracked', () => braze.events.length === 1 && braze.purchases.length === 1 && braze.attributes.length === 2)
    expect(braze.events[0]).to.deep.include({ user_alias: { alias_name: v, alias_label: 'beacon_visitor' }, name: 'signup', properties: { plan: 'pro' } })
    expect(braze.purchases[0]).to.deep.include({ external_id: 'p-1', product_id: 'sku-1', currency: 'EUR', price: 12, quantity: 1, properties: { order_id: 'o-1' } })
    expect(braze.attributes).to.deep.include.members([
      { external_id: 'p-2', beacon_audiences: { add: ['vip'] } },
      { external_id: 'p-2', subscription_groups: [{ subscription_group_id: 'sg-1', subscription_state: 'subscribed' }] },
    ])
    expect((await post(beacon.url, '/profiles/attributes', { account: tenant.account, profileId: 'p-2', token: tenant.token, attributes: { tier: 'basic' } })).status).to.equal(200)
    await until('removed', () => braze.attributes.length === 3)
    expect(braze.attributes[2]).to.deep.equal({ external_id: 'p-2', beacon_audiences: { remove: ['vip'] } })
    for (const request of braze.requests) expect(request.headers.authorization).to.equal('Bearer braze-key')
  })

  it('retries a 429 after X-RateLimit-Reset', async () => {
    await save()
    const resetS = Math.floor(beacon.clock.nowMs() / 1000) + 30
    braze.fail({ status: 429, headers: { 'x-ratelimit-reset': String(resetS) }, body: { message: 'rate limited' } })
    expect((await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'signup' })).status).to.equal(200)
    const list = async (): Promise<any[]> => (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/braze/deliveries`)).body.deliveries
    await until('failed', async () => (await list())[0]?.status === 'failed')
    const [failed] = await list()
    expect(Date.parse(failed.dueAt)).to.equal(resetS * 1000)
  })
})
