import { expect } from 'chai'
import { Webhook } from 'standardwebhooks'
import { admin, createTenant, identified, post, removeDir, startBeacon, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { SECRET, startReceiver, type Receiver } from '../webhooks/helpers.js'
import { expectError } from '../helpers/errors.js'

const DAY_MS = 86_400_000

/** Campaigns that between them exercise every check of the explanation. */
function campaigns (): Record<string, Record<string, unknown>> {
  const future = new Date(Date.now() + 30 * DAY_MS).toISOString()
  const past = new Date(Date.now() - 30 * DAY_MS).toISOString()
  const base = { status: 'active', priority: 1, content: { html: 'x' } }
  return {
    always: { ...base, name: 'Always', trigger: {} },
    paused: { ...base, name: 'Paused', status: 'paused', trigger: {} },
    later: { ...base, name: 'Later', startsAt: future, trigger: {} },
    over: { ...base, name: 'Over', endsAt: past, trigger: {} },
    products: { ...base, name: 'Products', trigger: { events: ['productView'] } },
    shoes: { ...base, name: 'Shoe pages', trigger: { paths: ['/shoes/*'] } },
    mobile: { ...base, name: 'Mobile web', trigger: { platforms: ['web'], devices: ['mobile'] } },
    vip: { ...base, name: 'VIP pro', rule: { all: [{ fact: 'segment', op: 'contains', value: 'vip' }, { fact: 'attribute.plan', op: 'eq', value: 'pro' }] }, trigger: {} },
    returning: { ...base, name: 'Returning', rule: { fact: 'visitor.pageViews', op: 'gte', value: 2 }, trigger: { events: ['pageView'] } },
    sku: { ...base, name: 'SKU', rule: { fact: 'event.sku', op: 'in', value: ['A1', 'B2'] }, trigger: {} },
    once: { ...base, name: 'Once a day', frequencyCap: { max: 1, per: 'day' }, trigger: {} },
  }
}

describe('campaign test and webhook test delivery', () => {
  let beacon: BeaconProcess
  let a: Tenant
  let receiver: Receiver

  before(async () => {
    beacon = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
    a = await createTenant(beacon.url, 'Try')
    for (const [id, def] of Object.entries(campaigns())) {
      const res = await admin(beacon.url, 'PUT', `/admin/accounts/${a.account}/campaigns/${id}`, def)
      expect(res.status, id).to.equal(200)
    }
    receiver = await startReceiver(() => ({ status: 204 }))
  })
  after(async () => {
    await receiver.close()
    await beacon.kill()
    removeDir(beacon.dataDir)
  })

  const test = (id: string, body: unknown): Promise<any> => admin(beacon.url, 'POST', `/admin/accounts/${a.account}/campaigns/${id}/test`, body)

  it('agrees with /campaigns/query on the same events and visitor state, campaign by campaign, and records nothing itself', async () => {
    const visitor = visitorId()
    await post(beacon.url, '/visitors/attributes', { account: a.account, token: a.token, visitorId: visitor, attributes: { plan: 'pro' } })
    await post(beacon.url, '/visitors/segments', { account: a.account, token: a.token, visitorId: visitor, assignees: ['vip'] })
    const events = [
      { platform: 'web', event: 'pageView', path: '/home' },
      { platform: 'web', event: 'pageView', path: '/shoes/red', device: 'mobile' },
      { platform: 'ios', event: 'productView', sku: 'A1', device: 'mobile' },
      { platform: 'web', event: 'productView', sku: 'C3', path: '/shoes/blue' },
      { platform: 'web', event: 'pageView', device: 'desktop' },
    ]
    const ids = Object.keys(campaigns())
    let agreed = 0
    for (const fields of events) {
      const event = { ...fields, visitorId: visitor }
      const before = await admin(beacon.url, 'GET', `/admin/accounts/${a.account}/visitors/${visitor}`)
      const verdicts: Record<string, boolean> = {}
      for (const id of ids) {
        const res = await test(id, { event })
        expect(res.status, id).to.equal(200)
        expect(res.body.checks.map((c: { check: string }) => c.check)).to.deep.equal(['status', 'schedule', 'trigger', 'platform', 'condition', 'cap'])
        expect(res.body.matched, id).to.equal(res.body.checks.every((c: { ok: boolean }) => c.ok))
        verdicts[id] = res.body.matched
      }
      // Testing wrote nothing: the visitor is as it was.
      expect((await admin(beacon.url, 'GET', `/admin/accounts/${a.account}/visitors/${visitor}`)).body).to.deep.equal(before.body)
      const answer = await post(beacon.url, '/campaigns/query', { account: a.account, ...event })
      const returned = new Set(answer.body.campaigns.map((c: { id: string }) => c.id))
      for (const id of ids) {
        expect(verdicts[id], `${id} on ${JSON.stringify(fields)}`).to.equal(returned.has(id))
        if (verdicts[id]) agreed++
      }
    }
    // Both answers were exercised: some campaigns matched, and the cap held after the first impression.
    expect(agreed).to.be.greaterThan(5)
  })

  it('agrees for a visitor linked to a profile: the profile\'s unified attributes and segments count', async () => {
    const visitor = visitorId()
    const profileId = `linked-${visitor}@example.com`
    await post(beacon.url, '/profiles/attributes', { account: a.account, token: a.token, profileId, attributes: { plan: 'pro' } })
    await post(beacon.url, '/profiles/segments', { account: a.account, token: a.token, profileId, assignees: ['vip'] })
    expect((await post(beacon.url, '/campaigns/query', { account: a.account, visitorId: visitor, ...identified(a, profileId), platform: 'web', event: 'pageView' })).status).to.equal(200)
    const event = { visitorId: visitor, platform: 'web', event: 'pageView' }
    const verdict = await test('vip', { event })
    expect(verdict.body.matched, JSON.stringify(verdict.body.checks)).to.equal(true)
    const answer = await post(beacon.url, '/campaigns/query', { account: a.account, ...event })
    expect(answer.body.campaigns.map((c: { id: string }) => c.id)).to.include('vip')
  })

  it('says why not, per check', async () => {
    const visitor = visitorId()
    const event = { visitorId: visitor, platform: 'web', event: 'pageView', path: '/home' }
    const failing = async (id: string, body: unknown = { event }): Promise<{ check: string, detail: string }[]> =>
      (await test(id, body)).body.checks.filter((c: { ok: boolean }) => !c.ok)
    expect(await failing('paused')).to.deep.equal([{ check: 'status', ok: false, detail: 'The campaign is paused.' }])
    expect((await failing('later'))[0]!.check).to.equal('schedule')
    expect((await failing('over'))[0]!.detail).to.match(/^It ended at /)
    expect((await failing('products'))[0]!.detail).to.equal('The event "pageView" is not one of productView.')
    expect((await failing('shoes'))[0]!.detail).to.equal('The path "/home" matches none of /shoes/*.')
    expect((await failing('mobile'))[0]!).to.include({ check: 'platform', detail: 'The event has no device; the campaign needs one of mobile.' })
    expect((await failing('vip'))[0]!.detail).to.equal('Not met: segment contains "vip"; attribute.plan eq "pro".')
    // The visitor state may be given instead of the stored one.
    expect(await failing('vip', { event, attributes: { plan: 'pro' }, segments: ['vip'] })).to.deep.equal([])
    expect((await failing('vip', { event, attributes: { plan: 'free' }, segments: ['vip'] }))[0]!.detail).to.equal('Not met: attribute.plan eq "pro".')
    // An unknown visitor is new: this event is its first page view.
    expect((await failing('returning'))[0]!.detail).to.equal('Not met: visitor.pageViews gte 2.')
  })

  it('refuses a bad test with 400 (the event\'s fields under /event), an unknown campaign with 404', async () => {
    const bad = await test('always', { event: { platform: 'web', event: 'pageView', device: 'fridge' } })
    expect(bad.status).to.equal(400)
    expect(bad.body.errors[0].field).to.equal('/event/device')
    const kind = await test('always', { event: { platform: 'web', event: 'nope' } })
    expectError(kind, 'unknown_event_type')
    expect((await test('always', { event: {}, extra: 1 })).status).to.equal(400)
    const missing = await test('ghost', { event: { platform: 'web', event: 'pageView' } })
    expectError(missing, 'campaign_not_found')
  })

  it('sends one test delivery to the webhook\'s target with its headers, template and signature, and stores nothing', async () => {
    const put = await admin(beacon.url, 'PUT', `/admin/accounts/${a.account}/webhooks/orders`, {
      name: 'Orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `${receiver.url}/hook/{{event}}`, headers: { 'X-Shop': 'one' }, signingSecret: SECRET, payload: '{"who":{{visitorId}},"kind":{{event}}}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    expect(put.status).to.equal(200)
    const res = await admin(beacon.url, 'POST', `/admin/accounts/${a.account}/webhooks/orders/test`)
    expect(res.status).to.equal(200)
    expect(res.body).to.include({ ok: true, status: 204 })
    expect(res.body.durationMs).to.be.a('number')
    expect(receiver.requests).to.have.length(1)
    const request = receiver.requests[0]!
    expect(request.url).to.equal('/hook/purchase')
    expect(request.headers['x-shop']).to.equal('one')
    expect(JSON.parse(request.body)).to.deep.equal({ who: '00000000-0000-4000-8000-000000000000', kind: 'purchase' })
    const headers = { 'webhook-id': String(request.headers['webhook-id']), 'webhook-timestamp': String(request.headers['webhook-timestamp']), 'webhook-signature': String(request.headers['webhook-signature']) }
    expect(() => new Webhook(SECRET).verify(request.body, headers)).not.to.throw()
    const log = await admin(beacon.url, 'GET', `/admin/accounts/${a.account}/webhooks/orders/deliveries`)
    expect(log.body.deliveries).to.deep.equal([])
  })

  it('reports a failing target as ok false with its status, or the connection error', async () => {
    const failing = await startReceiver(() => ({ status: 503, body: 'down' }))
    try {
      const put = await admin(beacon.url, 'PUT', `/admin/accounts/${a.account}/webhooks/down`, {
        name: 'Down', enabled: true, trigger: { kind: 'audience', segments: ['vip'], on: ['enter'] },
        request: { method: 'POST', url: failing.url }, delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
      })
      expect(put.status, JSON.stringify(put.body)).to.equal(200)
      const res = await admin(beacon.url, 'POST', `/admin/accounts/${a.account}/webhooks/down/test`)
      expect(res.body).to.include({ ok: false, status: 503 })
      expect(res.body.error).to.be.a('string')
      expect(JSON.parse(failing.requests[0]!.body)).to.include({ audience: 'vip' })
    } finally {
      await failing.close()
    }
    const gone = await admin(beacon.url, 'POST', `/admin/accounts/${a.account}/webhooks/down/test`)
    expect(gone.body).to.include({ ok: false, status: null })
    expect((await admin(beacon.url, 'POST', `/admin/accounts/${a.account}/webhooks/ghost/test`)).status).to.equal(404)
  })
})
