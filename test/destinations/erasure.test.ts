// Erasing a person or a device sends removes to every audience destination it was added to (Meta
// Custom Audience, Google Ads Customer Match, Braze membership), through the contract doubles; an
// audience webhook hears nothing of it, and the erasure's removal of delivery records spares the removes.

import { expect } from 'chai'
import { admin, createTenant, post, visitorId, type Tenant } from '../helpers/beacon.js'
import { audienceSink, startInProcess, type InProcess } from '../helpers/in-process.js'
import { until } from '../helpers/until.js'
import { putAll } from './setup.js'
import { sha256Hex } from '../../src/destinations/normalize.js'
import { MetaAudienceDouble } from './doubles/meta-audience-double.js'
import { GoogleAdsDouble } from './doubles/google-ads-double.js'
import { BrazeDouble } from './doubles/braze-double.js'

describe('audience destinations on erasure (Meta, Google Ads and Braze doubles)', () => {
  let beacon: InProcess
  let tenant: Tenant
  let meta: MetaAudienceDouble
  let google: GoogleAdsDouble
  let braze: BrazeDouble

  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
    meta = await new MetaAudienceDouble().start()
    google = await new GoogleAdsDouble(() => beacon.clock.nowMs()).start()
    braze = await new BrazeDouble().start()
    await putAll(beacon.url, tenant.account, {
      'segments/vip': { rule: { fact: 'attribute.tier', op: 'eq', value: 'vip' } },
      'segments/other': { rule: { fact: 'attribute.tier', op: 'eq', value: 'other' } },
      'destinations/meta': {
        type: 'meta-audience', name: 'VIPs', enabled: true, audiences: ['vip'],
        credentials: { accessToken: 'meta-token' }, settings: { audienceId: '6000', apiBaseUrl: meta.url },
      },
      'destinations/gads': {
        type: 'google-ads-customer-match', name: 'VIP list', enabled: true, audiences: ['vip'],
        credentials: { developerToken: 'g-dev', clientId: 'g-client', clientSecret: 'g-secret', refreshToken: 'g-refresh' },
        settings: { customerId: '1234567890', userListId: '555', apiBaseUrl: google.url, tokenUrl: `${google.url}/token` },
      },
      'destinations/braze': {
        type: 'braze', name: 'Braze', enabled: true, audiences: ['vip'],
        credentials: { apiKey: 'braze-key' }, settings: { apiBaseUrl: braze.url },
      },
    })
  })
  afterEach(async () => {
    await beacon.close()
    await meta.close()
    await google.close()
    await braze.close()
  })

  const profileAttributes = async (profileId: string, attributes: Record<string, unknown>): Promise<void> => {
    const res = await post(beacon.url, '/profiles/attributes', { account: tenant.account, profileId, token: tenant.token, attributes })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  const bodiesOf = (double: { allBodies: () => string }): string => double.allBodies()

  it('removes an erased person from every audience it was added to, and keeps the others', async () => {
    await profileAttributes('p-1', { email: 'ana@example.com', phone: '+44 844 412 4653', tier: 'vip' })
    await profileAttributes('p-2', { email: 'bo@example.com', tier: 'vip' })
    await until('added everywhere', () => meta.audience('6000').length === 2 && google.members().length === 3 && braze.attributes.length === 2)
    const erased = await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/profiles/p-1`)
    expect(erased.status, JSON.stringify(erased.body)).to.equal(200)
    await until('removed everywhere', () => meta.audience('6000').length === 1 && google.members().length === 1 && braze.attributes.length === 3)
    expect(meta.audience('6000')).to.deep.equal([`${sha256Hex('bo@example.com')}|`])
    expect(meta.requests.at(-1)!.method).to.equal('DELETE')
    expect(google.members()).to.deep.equal([sha256Hex('bo@example.com')])
    expect(braze.attributes.at(-1)).to.deep.equal({ external_id: 'p-1', beacon_audiences: { remove: ['vip'] } })
    for (const double of [meta, google, braze]) expect(bodiesOf(double)).not.to.contain('ana@example.com')
    // The removes' delivery records are the only ones of p-1 left (the erasure removed the adds').
    const records = (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/meta/deliveries`)).body.deliveries as any[]
    const ofP1 = records.filter(record => record.context.profileId === 'p-1')
    expect(ofP1.map(record => [record.context.change, record.status])).to.deep.equal([['erase', 'delivered']])
    expect(ofP1[0].context.attributes.email).to.equal('***')
    // Erased again: nothing more is sent (it is a member of nothing now).
    expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/profiles/p-1`)).status).to.equal(404)
    const sent = meta.requests.length
    await profileAttributes('p-3', { email: 'cy@example.com', tier: 'vip' })
    await until('the next one added', () => meta.audience('6000').length === 2)
    expect(meta.requests.length).to.equal(sent + 1)
  })

  it('removes an erased device from the audiences its own segments added it to; an audience webhook hears nothing of it', async () => {
    const sink = await audienceSink(beacon.url, tenant.account, ['vip'])
    try {
      const v = visitorId()
      const res = await post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: v, token: tenant.token, attributes: { email: 'dee@example.com', tier: 'vip' } })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      await until('added', () => meta.audience('6000').length === 1 && braze.attributes.length === 1)
      expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/visitors/${v}`)).status).to.equal(200)
      await until('removed', () => meta.audience('6000').length === 0 && braze.attributes.length === 2)
      expect(braze.attributes.at(-1)).to.deep.equal({ user_alias: { alias_name: v, alias_label: 'beacon_visitor' }, beacon_audiences: { remove: ['vip'] } })
      // The webhook had the enter only, then the next person's enter: no change of the erased device.
      await profileAttributes('p-9', { tier: 'vip' })
      expect(await sink.changes(2)).to.deep.equal([`enter vip ${v}`, 'enter vip p-9'])
    } finally {
      await sink.close()
    }
  })

  it('sends nothing for an erased person who was a member of no audience a destination takes', async () => {
    await profileAttributes('p-4', { email: 'eve@example.com', tier: 'other' })
    expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/profiles/p-4`)).status).to.equal(200)
    await profileAttributes('p-5', { email: 'fay@example.com', tier: 'vip' })
    await until('the member added', () => meta.audience('6000').length === 1 && braze.attributes.length === 1)
    expect(meta.requests).to.have.length(1)
    expect(meta.requests[0]!.method).to.equal('POST')
  })
})
