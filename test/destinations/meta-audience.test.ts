// meta-audience end to end: segment enters and exits of a real in-process Beacon become adds and
// removes in the Meta Custom Audience double.

import { expect } from 'chai'
import { admin, createTenant, post, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { sha256Hex } from '../../src/destinations/normalize.js'
import { MetaAudienceDouble } from './doubles/meta-audience-double.js'

describe('meta-audience destination (Meta Custom Audience double)', () => {
  let beacon: InProcess
  let tenant: Tenant
  let meta: MetaAudienceDouble

  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
    meta = await new MetaAudienceDouble().start()
    const segment = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/vip`, { rule: { fact: 'attribute.tier', op: 'eq', value: 'vip' } })
    expect(segment.status, JSON.stringify(segment.body)).to.equal(200)
    const saved = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/destinations/aud`, {
      type: 'meta-audience', name: 'VIPs', enabled: true, audiences: ['vip'],
      credentials: { accessToken: 'meta-token' }, settings: { audienceId: '6000', apiBaseUrl: meta.url },
    })
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200)
  })
  afterEach(async () => {
    await beacon.close()
    await meta.close()
  })

  const attributes = async (profileId: string, values: Record<string, unknown>): Promise<void> => {
    const res = await post(beacon.url, '/profiles/attributes', { account: tenant.account, profileId, token: tenant.token, attributes: values })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  const row = (email: string, phone = ''): string => `${sha256Hex(email)}|${phone === '' ? '' : sha256Hex(phone)}`

  it('refuses events (it takes audiences only) and a missing audienceId', async () => {
    const base = { type: 'meta-audience', name: 'x', enabled: true, credentials: { accessToken: 't' } }
    expectError(await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/destinations/x`, { ...base, events: ['purchase'], settings: { audienceId: '1' } }), 'invalid_field', '/events')
    expectError(await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/destinations/x`, { ...base, settings: {} }), 'invalid_field', '/settings/audienceId')
  })

  it('adds a person who enters the segment and removes them when they leave, hashed', async () => {
    await attributes('p-1', { email: 'Ana@Example.com ', phone: '+44 844 412 4653', tier: 'vip' })
    await until('added', () => meta.audience('6000').length === 1)
    expect(meta.audience('6000')).to.deep.equal([row('ana@example.com', '448444124653')])
    expect(meta.requests[0]!.method).to.equal('POST')
    await attributes('p-1', { tier: 'basic' })
    await until('removed', () => meta.requests.length === 2)
    expect(meta.requests[1]!.method).to.equal('DELETE')
    expect(meta.audience('6000')).to.deep.equal([])
    const sent = meta.allBodies()
    for (const raw of ['ana@example.com', 'Ana@Example', '8444124653']) expect(sent).not.to.contain(raw)
    const session = JSON.parse(meta.requests[0]!.body).session
    expect(session).to.include({ batch_seq: 1, last_batch_flag: true, estimated_num_total: 1 })
  })

  it('skips and counts a person with neither an email nor a phone', async () => {
    await attributes('p-2', { tier: 'vip' })
    await attributes('p-3', { email: 'b@example.com', tier: 'vip' })
    await until('the one with an email added', () => meta.audience('6000').length === 1)
    await until('the other counted', async () => (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/aud`)).body.health.skippedNoIdentifier === 1)
    expect(meta.audience('6000')).to.deep.equal([row('b@example.com')])
  })

  it('records entries Meta found invalid as a partial failure, the delivery delivered', async () => {
    meta.invalid.add(sha256Hex('bad@example.com'))
    await attributes('p-4', { email: 'bad@example.com', tier: 'vip' })
    await until('answered', () => meta.requests.length === 1)
    await until('delivered', async () => (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/aud/deliveries`)).body.deliveries[0]?.status === 'delivered')
    const [record] = (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/aud/deliveries`)).body.deliveries
    expect(record.attempts[0].error).to.contain('Meta refused 1 of 1 adds as invalid entries')
    expect(record.context.attributes.email).to.equal('***')
  })
})
