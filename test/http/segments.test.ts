import { expect } from 'chai'
import { admin, createTenant, identified, post, removeDir, startBeacon, visitorId, type Tenant } from '../helpers/beacon.js'
import { audienceSink, startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'

const DAY_MS = 86_400_000

describe('segments and audiences', () => {
  let beacon: InProcess
  let tenant: Tenant

  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
  })
  afterEach(() => beacon.close())

  const putSegment = (name: string, body: Record<string, unknown>) => admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/${name}`, body)
  const event = (visitor: string, fields: Record<string, unknown>) =>
    post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView', ...fields })
  const visitorSegments = async (visitor: string): Promise<string[]> =>
    (await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: visitor, token: tenant.token })).body.segments
  let sink: Awaited<ReturnType<typeof audienceSink>> | null = null
  afterEach(() => sink?.close())
  const watch = async (...segments: string[]): Promise<void> => { sink = await audienceSink(beacon.url, tenant.account, segments) }
  const changes = (count: number): Promise<string[]> => sink!.changes(count)

  it('creates, reads, lists and deletes segments, and refuses invalid rules with the path of the bad node', async () => {
    const created = await putSegment('browsers', { description: 'Looked at 3 products this week', rule: { fact: 'count', event: 'productView', within: '7d', op: 'gte', value: 3 } })
    expect(created.status).to.equal(200)
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/segments/browsers`)).body.rule.within).to.equal('7d')
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/segments`)).body.segments).to.have.length(1)
    const bad = await putSegment('bad', { rule: { all: [{ fact: 'count', event: 'productView', within: '91d', op: 'gte', value: 'x' }, { fact: 'nope', op: 'eq', value: 1 }] } })
    expect(bad.status).to.equal(400)
    expect(bad.body.errors.map((e: { field: string }) => e.field)).to.include.members(['/rule/all/0/within', '/rule/all/0/value', '/rule/all/1/fact'])
    expectError(bad, 'invalid_segment')
    expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/segments/browsers`)).status).to.equal(200)
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/segments/browsers`)).status).to.equal(404)
  })

  it('refuses to assign or remove a computed segment by hand with 409 segment_computed', async () => {
    await putSegment('browsers', { rule: { fact: 'count', event: 'productView', op: 'gte', value: 1 } })
    await putSegment('vip', {})
    const res = await post(beacon.url, '/visitors/segments', { account: tenant.account, visitorId: visitorId(), token: tenant.token, assignees: ['vip', 'browsers'] })
    expectError(res, 'segment_computed', '/assignees/1')
    const manual = await post(beacon.url, '/visitors/segments', { account: tenant.account, visitorId: visitorId(), token: tenant.token, assignees: ['vip'] })
    expect(manual.body.segments).to.deep.equal(['vip'])
  })

  it('enters a count window in real time, writes one enter event, and leaves when the window passes without a new event', async () => {
    await putSegment('browsers', { rule: { fact: 'count', event: 'productView', within: '7d', op: 'gte', value: 3 } })
    await watch('browsers')
    const v = visitorId()
    await event(v, { event: 'productView', sku: 'A' })
    await event(v, { event: 'productView', sku: 'B' })
    expect(await visitorSegments(v)).to.deep.equal([])
    beacon.clock.advance(DAY_MS)
    await event(v, { event: 'productView', sku: 'C' })
    expect(await visitorSegments(v)).to.deep.equal(['browsers'])
    await event(v, { event: 'productView', sku: 'D' })
    expect(await changes(1)).to.deep.equal([`enter browsers ${v}`])

    // 6 days later the first two views are still inside 7 days: nothing to sweep yet.
    beacon.clock.advance(5 * DAY_MS)
    await beacon.beacon.sweepSegments()
    expect(await visitorSegments(v)).to.deep.equal(['browsers'])
    // Past 7 days from the first views, only two remain in the window: out, with no new event.
    beacon.clock.advance(2 * DAY_MS)
    expect(await beacon.beacon.sweepSegments()).to.be.at.least(1)
    expect(await changes(2)).to.deep.equal([`enter browsers ${v}`, `exit browsers ${v}`])
    expect(await visitorSegments(v)).to.deep.equal([])
    // And once everything expired nothing is left to sweep.
    beacon.clock.advance(8 * DAY_MS)
    await beacon.beacon.sweepSegments()
    expect(await changes(2)).to.have.length(2)
  })

  it('sums a field over a window with a where filter, and sees attributes and manual segments', async () => {
    await putSegment('big-spenders', {
      rule: {
        all: [
          { fact: 'sum', event: 'purchase', field: 'orderTotal', where: { fact: 'event.currency', op: 'eq', value: 'EUR' }, within: '30d', op: 'gte', value: 500 },
          { fact: 'attribute.country', op: 'eq', value: 'FR' },
        ]
      },
    })
    await watch('big-spenders')
    const v = visitorId()
    await post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: v, token: tenant.token, attributes: { country: 'FR' } })
    await event(v, { event: 'purchase', orderId: 'o1', orderTotal: 300, currency: 'EUR' })
    await event(v, { event: 'purchase', orderId: 'o2', orderTotal: 900, currency: 'USD' })
    expect(await visitorSegments(v)).to.deep.equal([])
    await event(v, { event: 'purchase', orderId: 'o3', orderTotal: 200, currency: 'EUR' })
    expect(await visitorSegments(v)).to.deep.equal(['big-spenders'])
    // An attribute update re-evaluates too.
    await post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: v, token: tenant.token, attributes: { country: 'DE' } })
    expect(await visitorSegments(v)).to.deep.equal([])
    expect(await changes(2)).to.deep.equal([`enter big-spenders ${v}`, `exit big-spenders ${v}`])
  })

  it('lets campaign rules see the current segments', async () => {
    await putSegment('viewer', { rule: { fact: 'count', event: 'productView', op: 'gte', value: 1 } })
    await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/campaigns/for-viewers`, {
      name: 'viewers', status: 'active', priority: 1, trigger: {}, rule: { fact: 'segment', op: 'contains', value: 'viewer' }, content: {},
    })
    const v = visitorId()
    expect((await event(v, {})).body.campaigns).to.deep.equal([])
    expect((await event(v, { event: 'productView', sku: 'A' })).body.campaigns.map((c: { id: string }) => c.id)).to.deep.equal(['for-viewers'])
  })

  it('re-evaluates existing members when a rule changes, in a background pass', async () => {
    await putSegment('viewer', { rule: { fact: 'count', event: 'productView', op: 'gte', value: 1 } })
    await watch('viewer')
    const visitors = [visitorId(), visitorId(), visitorId()]
    for (const v of visitors) await event(v, { event: 'productView', sku: 'A' })
    await event(visitors[0]!, { event: 'productView', sku: 'B' })
    expect(await changes(3)).to.have.length(3)
    await putSegment('viewer', { rule: { fact: 'count', event: 'productView', op: 'gte', value: 2 } })
    // The pass runs in the background: its exits arrive without any new event.
    expect((await changes(5)).filter(c => c.startsWith('exit')).sort()).to.deep.equal([`exit viewer ${visitors[1]}`, `exit viewer ${visitors[2]}`].sort())
  })
})

describe('identity stitching', () => {
  let beacon: InProcess
  let tenant: Tenant

  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
  })
  afterEach(() => beacon.close())

  // A profileId goes with its signature (verified identity).
  const event = (visitor: string, fields: Record<string, unknown>) =>
    post(beacon.url, '/campaigns/query', {
      account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView', ...fields,
      ...(typeof fields.profileId === 'string' ? identified(tenant, fields.profileId) : {}),
    })
  const setAttributes = (visitor: string, attributes: Record<string, unknown>) =>
    post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: visitor, token: tenant.token, attributes })
  const profile = async (profileId: string) => (await post(beacon.url, '/profiles/query', { account: tenant.account, profileId, token: tenant.token })).body

  it('unifies three devices: profile attributes win, then the latest device write; string lists merge as sets', async () => {
    const [phone, laptop, tablet] = [visitorId(), visitorId(), visitorId()]
    for (const v of [phone, laptop, tablet]) await event(v, { profileId: 'ana@example.com' })
    await setAttributes(phone, { color: 'red', interests: ['shoes', 'hats'], size: 'M' })
    beacon.clock.advance(1000)
    await setAttributes(laptop, { color: 'blue', interests: ['hats', 'bags'] })
    beacon.clock.advance(1000)
    await setAttributes(tablet, { size: 'L' })
    await post(beacon.url, '/profiles/attributes', { account: tenant.account, profileId: 'ana@example.com', token: tenant.token, attributes: { size: 'S' } })
    const view = await profile('ana@example.com')
    expect(view.attributes.color).to.deep.equal([{ value: 'blue' }])
    expect(view.attributes.interests.map((x: { value: string }) => x.value).sort()).to.deep.equal(['bags', 'hats', 'shoes'])
    expect(view.attributes.size).to.deep.equal([{ value: 'S' }])
    // A visitor answers its own data and its profile.
    const own = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: phone, token: tenant.token })
    expect(own.body.profileId).to.equal('ana@example.com')
    expect(own.body.attributes.color).to.deep.equal([{ value: 'red' }])
  })

  it('counts and sums behaviour across devices for the profile\'s computed segments', async () => {
    await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/loyal`, {
      rule: { fact: 'sum', event: 'purchase', field: 'orderTotal', within: '30d', op: 'gte', value: 500 },
    })
    const sink = await audienceSink(beacon.url, tenant.account, ['loyal'])
    const [phone, laptop] = [visitorId(), visitorId()]
    await event(phone, { profileId: 'bob', event: 'purchase', orderId: 'o1', orderTotal: 300 })
    await event(laptop, { profileId: 'bob', event: 'purchase', orderId: 'o2', orderTotal: 250 })
    expect((await profile('bob')).segments).to.deep.equal(['loyal'])
    // Neither device qualifies alone.
    const phoneView = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: phone, token: tenant.token })
    expect(phoneView.body.segments).to.deep.equal([])
    expect(await sink.changes(1)).to.deep.equal(['enter loyal bob'])
    await sink.close()
  })

  it('moves a device relinked to another profile, and records the move', async () => {
    const device = visitorId()
    await event(device, { profileId: 'first' })
    await setAttributes(device, { color: 'green' })
    expect((await profile('first')).attributes).to.deep.equal({ color: [{ value: 'green' }] })
    await event(device, { profileId: 'second' })
    expect((await profile('first')).attributes).to.deep.equal({})
    expect((await profile('second')).attributes).to.deep.equal({ color: [{ value: 'green' }] })
    const exported = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/profiles/first/export`)
    expect(exported.body.profile.moves.map((m: { visitorId: string }) => m.visitorId)).to.deep.equal([device])
  })

  it('exports all it holds on a person, then erases the profile and its devices', async () => {
    const [a, b] = [visitorId(), visitorId()]
    await event(a, { profileId: 'carol', event: 'productView', sku: 'X' })
    await event(b, { profileId: 'carol' })
    await setAttributes(a, { email: 'carol@example.com' })
    const exported = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/profiles/carol/export`)
    expect(exported.status).to.equal(200)
    expect(exported.body.visitors).to.have.length(2)
    expect(JSON.stringify(exported.body)).to.include('carol@example.com')
    const erased = await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/profiles/carol`)
    expect(erased.body).to.deep.equal({ profileId: 'carol', erased: { profiles: 1, visitors: 2, deliveries: 0 }, keptVisitors: 0 })
    expect((await profile('carol')).attributes).to.deep.equal({})
    const after = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: a, token: tenant.token })
    expect(after.body).to.deep.equal({ status: 200, message: 'OK', errors: [], attributes: {}, segments: [] })
    expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/profiles/nobody`)).status).to.equal(404)
  })
})

describe('segments and links are durable', () => {
  it('keeps links, unified attributes and computed segments across SIGKILL right after the 200', async () => {
    let beacon = await startBeacon()
    try {
      const tenant = await createTenant(beacon.url)
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/viewer`, { rule: { fact: 'count', event: 'productView', op: 'gte', value: 1 } })
      const device = visitorId()
      await post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: device, token: tenant.token, attributes: { color: 'red' } })
      const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: device, ...identified(tenant, 'dan'), platform: 'web', event: 'productView', sku: 'A' })
      expect(res.status).to.equal(200)
      await beacon.kill()
      beacon = await startBeacon({ dataDir: beacon.dataDir })
      const p = await post(beacon.url, '/profiles/query', { account: tenant.account, profileId: 'dan', token: tenant.token })
      expect(p.body.attributes).to.deep.equal({ color: [{ value: 'red' }] })
      expect(p.body.segments).to.deep.equal(['viewer'])
      const v = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: device, token: tenant.token })
      expect(v.body).to.deep.include({ profileId: 'dan', segments: ['viewer'] })
    } finally {
      await beacon.kill()
      removeDir(beacon.dataDir)
    }
  })
})
