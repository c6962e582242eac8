import { expect } from 'chai'
import { admin, discardBeacon, post, startWithTenant, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { expectError } from '../helpers/errors.js'

describe('public API', () => {
  let beacon: BeaconProcess
  let tenant: Tenant

  before(async () => { ({ beacon, tenant } = await startWithTenant()) })
  after(() => discardBeacon(beacon))

  const event = (fields: Record<string, unknown>): Record<string, unknown> =>
    ({ account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'pageView', ...fields })

  describe('POST /campaigns/query', () => {
    it('answers a page view with the seed shape and no token', async () => {
      const res = await post(beacon.url, '/campaigns/query', event({ device: 'mobile', path: '/home', referrer: null }))
      expect(res.status).to.equal(200)
      expect(res.body).to.deep.equal({ status: 200, message: 'Campaigns executed.', campaigns: [] })
    })

    it('accepts a product view with its fields and a purchase with its fields', async () => {
      const pv = await post(beacon.url, '/campaigns/query', event({ event: 'productView', sku: 'SKU-1', price: 19.9, brand: 'Acme', breadcrumb: 'Shoes > Running', category: 'shoes' }))
      expect(pv.status).to.equal(200)
      const buy = await post(beacon.url, '/campaigns/query', event({ event: 'purchase', orderId: 'o-1', orderTotal: 39.8, purchasedItems: ['SKU-1', 'SKU-2'] }))
      expect(buy.status).to.equal(200)
    })

    it('refuses a product view without sku with 400 invalid_field at /sku', async () => {
      const res = await post(beacon.url, '/campaigns/query', event({ event: 'productView' }))
      expect(res.status).to.equal(400)
      expect(res.body.errors).to.deep.include({ code: 'invalid_field', field: '/sku', message: 'sku is required for productView events.' })
    })

    it('refuses a purchase without orderId with 400', async () => {
      const res = await post(beacon.url, '/campaigns/query', event({ event: 'purchase' }))
      expectError(res, 'invalid_field', '/orderId')
    })

    it('refuses an event type never defined with 400 unknown_event_type', async () => {
      const res = await post(beacon.url, '/campaigns/query', event({ event: 'signup' }))
      expectError(res, 'unknown_event_type')
    })

    it('accepts a custom event type defined with the admin API and checks its required fields', async () => {
      const put = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/event-types/signup`, { required: ['plan'] })
      expect(put.status).to.equal(200)
      const missing = await post(beacon.url, '/campaigns/query', event({ event: 'signup' }))
      expectError(missing, 'invalid_field', '/plan')
      const ok = await post(beacon.url, '/campaigns/query', event({ event: 'signup', plan: 'pro', seats: 3 }))
      expect(ok.status).to.equal(200)
    })

    it('refuses a visitorId that is not a UUID v4 with 400', async () => {
      const res = await post(beacon.url, '/campaigns/query', event({ visitorId: '2b7e1b8e-7c0e-1c7e-9a4e-1b2c3d4e5f60' }))
      expectError(res, 'invalid_field', '/visitorId')
    })

    it('answers 404 account_not_found for an unknown account', async () => {
      const res = await post(beacon.url, '/campaigns/query', event({ account: '00000000-0000-4000-8000-000000000000' }))
      expect(res.status).to.equal(404)
      expect(res.body).to.deep.include({ status: 404 })
      expectError(res, 'account_not_found')
    })

    it('records behaviour: counts, recent SKUs, purchases deduplicated by orderId', async () => {
      const id = visitorId()
      const send = (fields: Record<string, unknown>) => post(beacon.url, '/campaigns/query', event({ visitorId: id, ...fields }))
      await send({ event: 'productView', sku: 'A', category: 'shoes' })
      await send({ event: 'productView', sku: 'B' })
      await send({ event: 'purchase', orderId: 'o-9', orderTotal: 10, purchasedItems: ['A'] })
      await send({ event: 'purchase', orderId: 'o-9', orderTotal: 10, purchasedItems: ['A'] })
      const state = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${id}`)
      expect(state.status).to.equal(200)
      expect(state.body).to.deep.include({
        counts: { productView: 2, purchase: 1 },
        viewedSkus: ['B', 'A'],
        viewedCategories: ['shoes'],
        purchasedSkus: ['A'],
        purchases: 1,
        totalSpent: 10,
        lastPlatform: 'web',
      })
      expect(Date.parse(state.body.firstSeen)).to.be.above(0)
    })
  })

  for (const kind of ['visitors', 'profiles'] as const) {
    const idField = kind === 'visitors' ? 'visitorId' : 'profileId'
    const newId = (): string => kind === 'visitors' ? visitorId() : `user-${visitorId()}@example.com`

    describe(`POST /${kind}/attributes and /${kind}/query`, () => {
      it('saves attributes and answers them as arrays of {value}', async () => {
        const id = newId()
        const saved = await post(beacon.url, `/${kind}/attributes`, { account: tenant.account, [idField]: id, token: tenant.token, attributes: { color: 'red', size: 42, vip: true, tags: ['a', 'b'] } })
        expect(saved.status).to.equal(200)
        expect(saved.body).to.deep.equal({ status: 200, [idField]: id, message: 'Attributes saved.', errors: [] })
        const q = await post(beacon.url, `/${kind}/query`, { account: tenant.account, [idField]: id, token: tenant.token, attributes: ['color', 'tags', 'missing'] })
        expect(q.status).to.equal(200)
        expect(q.body).to.deep.equal({ status: 200, message: 'OK', errors: [], attributes: { color: [{ value: 'red' }], tags: [{ value: 'a' }, { value: 'b' }] }, segments: [] })
      })

      it('answers every allowed attribute when none are named, and null deletes one', async () => {
        const id = newId()
        await post(beacon.url, `/${kind}/attributes`, { account: tenant.account, [idField]: id, token: tenant.token, attributes: { a: '1', b: '2' } })
        await post(beacon.url, `/${kind}/attributes`, { account: tenant.account, [idField]: id, token: tenant.token, attributes: { a: null } })
        const q = await post(beacon.url, `/${kind}/query`, { account: tenant.account, [idField]: id, token: tenant.token })
        expect(q.body.attributes).to.deep.equal({ b: [{ value: '2' }] })
      })

      it('answers an entity never seen with empty attributes and segments', async () => {
        const q = await post(beacon.url, `/${kind}/query`, { account: tenant.account, [idField]: newId(), token: tenant.token })
        expect(q.status).to.equal(200)
        expect(q.body).to.deep.equal({ status: 200, message: 'OK', errors: [], attributes: {}, segments: [] })
      })

      it('refuses a request without token with 401 token_missing', async () => {
        const res = await post(beacon.url, `/${kind}/query`, { account: tenant.account, [idField]: newId() })
        expectError(res, 'token_missing')
      })

      it('refuses an unknown token with 401 token_invalid', async () => {
        const res = await post(beacon.url, `/${kind}/attributes`, { account: tenant.account, [idField]: newId(), token: 'bk_0000_nope', attributes: { a: 'x' } })
        expectError(res, 'token_invalid')
      })
    })

    describe(`POST /${kind}/segments`, () => {
      it('assigns and removes segments and answers the segments after the change', async () => {
        const id = newId()
        const first = await post(beacon.url, `/${kind}/segments`, { account: tenant.account, [idField]: id, token: tenant.token, assignees: ['vip', 'newsletter'] })
        expect(first.status).to.equal(200)
        expect(first.body).to.deep.equal({ status: 200, [idField]: id, message: 'Segments saved.', errors: [], segments: ['vip', 'newsletter'] })
        const second = await post(beacon.url, `/${kind}/segments`, { account: tenant.account, [idField]: id, token: tenant.token, removes: ['vip'] })
        expect(second.body.segments).to.deep.equal(['newsletter'])
        const q = await post(beacon.url, `/${kind}/query`, { account: tenant.account, [idField]: id, token: tenant.token, segments: ['vip', 'newsletter', 'other'] })
        expect(q.body.segments).to.deep.equal(['newsletter'])
      })
    })
  }

  describe('HTTP rules', () => {
    it('answers 415 unsupported_media_type for a body that is not application/json', async () => {
      const res = await post(beacon.url, '/campaigns/query', 'a=b', { raw: true, contentType: 'application/x-www-form-urlencoded' })
      expectError(res, 'unsupported_media_type')
    })

    it('accepts application/json with a charset parameter', async () => {
      const res = await post(beacon.url, '/campaigns/query', event({}), { contentType: 'application/json; charset=utf-8' })
      expect(res.status).to.equal(200)
    })

    it('answers 413 body_too_large over the body limit', async () => {
      const res = await post(beacon.url, '/campaigns/query', event({ path: 'x'.repeat(70_000) }))
      expectError(res, 'body_too_large')
    })

    it('answers 400 invalid_json for malformed JSON', async () => {
      const res = await post(beacon.url, '/campaigns/query', '{"account":', { raw: true })
      expectError(res, 'invalid_json')
    })

    it('answers 400 with one error per bad field', async () => {
      const res = await post(beacon.url, '/campaigns/query', { account: 'nope', visitorId: 12, platform: 'web', event: 'pageView', device: 'tv' })
      expect(res.status).to.equal(400)
      const fields = res.body.errors.map((e: { field: string }) => e.field)
      expect(fields).to.include.members(['/account', '/visitorId', '/device'])
    })

    it('answers 400 forbidden_key for a __proto__ key', async () => {
      const res = await post(beacon.url, '/visitors/attributes', `{"account":"${tenant.account}","visitorId":"${visitorId()}","token":"${tenant.token}","attributes":{"__proto__":{"x":1}}}`, { raw: true })
      expectError(res, 'forbidden_key', '/attributes/__proto__')
    })

    it('answers 404 not_found for an unknown path', async () => {
      const res = await post(beacon.url, '/nope', {})
      expectError(res, 'not_found')
    })

    it('answers 405 with Allow for a wrong method', async () => {
      const res = await fetch(beacon.url + '/visitors/query')
      expect(res.status).to.equal(405)
      expect(res.headers.get('allow')).to.equal('POST, OPTIONS')
      expect(((await res.json()) as any).errors[0].code).to.equal('method_not_allowed')
    })

    it('answers GET /healthz', async () => {
      const res = await fetch(beacon.url + '/healthz')
      expect(res.status).to.equal(200)
      expect(await res.json()).to.deep.equal({ status: 'ok' })
    })
  })
})
