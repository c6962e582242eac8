import { expect } from 'chai'
import { admin, discardBeacon, identified, post, startBeacon, startWithTenant, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'

describe('campaigns over HTTP', () => {
  let beacon: BeaconProcess
  let tenant: Tenant

  before(async () => { ({ beacon, tenant } = await startWithTenant()) })
  after(() => discardBeacon(beacon))

  const base = (): string => `/admin/accounts/${tenant.account}/campaigns`
  const put = (id: string, campaign: Record<string, unknown>) => admin(beacon.url, 'PUT', `${base()}/${id}`, campaign)
  const fire = async (fields: Record<string, unknown>): Promise<string[]> => {
    const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, platform: 'web', event: 'pageView', ...fields })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body.campaigns.map((c: { id: string }) => c.id)
  }
  const shoes = {
    name: 'Summer shoes',
    status: 'active',
    priority: 10,
    trigger: { events: ['productView'], platforms: ['web'], paths: ['/shoes/*'] },
    rule: { all: [{ fact: 'event.price', op: 'gte', value: 50 }, { fact: 'attribute.tier', op: 'eq', value: 'gold' }] },
    content: { banner: 'shoes.png', discount: 15 },
  }

  it('creates, reads and lists campaigns', async () => {
    const created = await put('shoes', shoes)
    expect(created.status).to.equal(200)
    expect(created.body).to.deep.equal({ id: 'shoes', ...shoes })
    expect((await admin(beacon.url, 'GET', `${base()}/shoes`)).body).to.deep.equal({ id: 'shoes', ...shoes })
    const list = await admin(beacon.url, 'GET', base())
    expect(list.body.campaigns.map((c: { id: string }) => c.id)).to.include('shoes')
  })

  it('answers a campaign to the visitors its trigger and rule select, with its content', async () => {
    await put('shoes', shoes)
    const gold = visitorId()
    await post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: gold, token: tenant.token, attributes: { tier: 'gold' } })
    const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: gold, platform: 'web', event: 'productView', sku: 'S1', price: 80, path: '/shoes/red' })
    expect(res.body.campaigns).to.deep.equal([{ id: 'shoes', name: 'Summer shoes', priority: 10, content: { banner: 'shoes.png', discount: 15 } }])
    // Wrong path, price too low, not gold, wrong event: not eligible.
    expect(await fire({ visitorId: gold, event: 'productView', sku: 'S1', price: 80, path: '/hats/red' })).to.deep.equal([])
    expect(await fire({ visitorId: gold, event: 'productView', sku: 'S1', price: 20, path: '/shoes/red' })).to.deep.equal([])
    expect(await fire({ visitorId: visitorId(), event: 'productView', sku: 'S1', price: 80, path: '/shoes/red' })).to.deep.equal([])
    expect(await fire({ visitorId: gold, path: '/shoes/red' })).to.deep.equal([])
  })

  it('sees a linked profile\'s attributes', async () => {
    await put('shoes', shoes)
    await post(beacon.url, '/profiles/attributes', { account: tenant.account, profileId: 'gold@example.com', token: tenant.token, attributes: { tier: 'gold' } })
    const ids = await fire({ visitorId: visitorId(), ...identified(tenant, 'gold@example.com'), event: 'productView', sku: 'S1', price: 99, path: '/shoes/x' })
    expect(ids).to.deep.equal(['shoes'])
  })

  it('orders by priority, then id, and leaves out paused, unstarted and ended campaigns', async () => {
    const everyone = { status: 'active', trigger: { events: ['signin'] }, content: {} }
    await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/event-types/signin`, { required: [] })
    await put('b-low', { ...everyone, name: 'low', priority: 1 })
    await put('a-high', { ...everyone, name: 'high', priority: 5 })
    await put('c-high', { ...everyone, name: 'high too', priority: 5 })
    await put('paused', { ...everyone, name: 'paused', priority: 9, status: 'paused' })
    await put('future', { ...everyone, name: 'future', priority: 9, startsAt: '2999-01-01T00:00:00Z' })
    await put('past', { ...everyone, name: 'past', priority: 9, endsAt: '2000-01-01T00:00:00Z' })
    expect(await fire({ visitorId: visitorId(), event: 'signin' })).to.deep.equal(['a-high', 'c-high', 'b-low'])
    await put('a-high', { ...everyone, name: 'high', priority: 5, status: 'paused' })
    expect(await fire({ visitorId: visitorId(), event: 'signin' })).to.deep.equal(['c-high', 'b-low'])
    expect((await admin(beacon.url, 'DELETE', `${base()}/c-high`)).status).to.equal(200)
    expect(await fire({ visitorId: visitorId(), event: 'signin' })).to.deep.equal(['b-low'])
    expect((await admin(beacon.url, 'GET', `${base()}/c-high`)).status).to.equal(404)
  })

  it('stops answering a capped campaign to a visitor once the cap is reached, and keeps the count across a restart', async () => {
    await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/event-types/visit`, { required: [] })
    await put('capped', { name: 'twice', status: 'active', priority: 1, trigger: { events: ['visit'] }, frequencyCap: { max: 2, per: 'lifetime' }, content: 'x' })
    const id = visitorId()
    expect(await fire({ visitorId: id, event: 'visit' })).to.deep.equal(['capped'])
    expect(await fire({ visitorId: id, event: 'visit' })).to.deep.equal(['capped'])
    await beacon.kill()
    beacon = await startBeacon({ dataDir: beacon.dataDir })
    expect(await fire({ visitorId: id, event: 'visit' })).to.deep.equal([])
    expect(await fire({ visitorId: visitorId(), event: 'visit' })).to.deep.equal(['capped'])
  })

  it('refuses an invalid campaign with 400 invalid_campaign and the JSON path of each bad node', async () => {
    const res = await put('bad', {
      name: 'bad', status: 'on', priority: 1.5, trigger: {},
      rule: { all: [{ fact: 'event.price', op: 'gte', value: 'ten' }, { fact: 'nope', op: 'eq', value: 1 }] },
      content: {},
    })
    expect(res.status).to.equal(400)
    const fields = res.body.errors.map((e: { code: string, field: string }) => `${e.code} ${e.field}`)
    expect(fields).to.include.members(['invalid_campaign /status', 'invalid_campaign /priority', 'invalid_campaign /rule/all/0/value', 'invalid_campaign /rule/all/1/fact'])
    expect((await admin(beacon.url, 'GET', `${base()}/bad`)).status).to.equal(404)
  })

  it('refuses a campaign id that is not a name with 400', async () => {
    const res = await admin(beacon.url, 'PUT', `${base()}/has%20space`, shoes)
    expect(res.status).to.equal(400)
  })
})
