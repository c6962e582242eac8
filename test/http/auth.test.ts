import { expect } from 'chai'
import { admin, createTenant, createToken, discardBeacon, post, startBeacon, tokenSecret, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { expectError } from '../helpers/errors.js'

describe('tokens and tenants', () => {
  let beacon: BeaconProcess
  let a: Tenant
  let b: Tenant

  before(async () => {
    beacon = await startBeacon()
    a = await createTenant(beacon.url, 'Site A')
    b = await createTenant(beacon.url, 'Site B')
  })
  after(() => discardBeacon(beacon))

  describe('per-attribute access', () => {
    it('lets a token write only the attributes it allows, refusing others with 403 attribute_forbidden', async () => {
      const token = await createToken(beacon.url, a.account, { name: 'email only', attributes: ['email'], access: 'read-write' })
      const id = visitorId()
      const ok = await post(beacon.url, '/visitors/attributes', { account: a.account, visitorId: id, token, attributes: { email: 'x@example.com' } })
      expect(ok.status).to.equal(200)
      const refused = await post(beacon.url, '/visitors/attributes', { account: a.account, visitorId: id, token, attributes: { email: 'y@example.com', score: 5 } })
      expect(refused.status).to.equal(403)
      expect(refused.body.errors).to.deep.equal([{ code: 'attribute_forbidden', field: '/attributes/score', message: 'The token does not allow the attribute "score".' }])
      // Nothing of the refused request was written, not even the allowed attribute.
      const q = await post(beacon.url, '/visitors/query', { account: a.account, visitorId: id, token: a.token })
      expect(q.body.attributes).to.deep.equal({ email: [{ value: 'x@example.com' }] })
    })

    it('lets a token read only the attributes it allows: named ones are refused, unnamed ones filtered', async () => {
      const id = visitorId()
      await post(beacon.url, '/visitors/attributes', { account: a.account, visitorId: id, token: a.token, attributes: { email: 'x@example.com', score: 5 } })
      const token = await createToken(beacon.url, a.account, { name: 'reader', attributes: ['email'], access: 'read' })
      const refused = await post(beacon.url, '/visitors/query', { account: a.account, visitorId: id, token, attributes: ['score'] })
      expectError(refused, 'attribute_forbidden', '/attributes/score')
      const all = await post(beacon.url, '/visitors/query', { account: a.account, visitorId: id, token })
      expect(all.status).to.equal(200)
      expect(all.body.attributes).to.deep.equal({ email: [{ value: 'x@example.com' }] })
    })

    it('refuses a read-only token on a write with 403 token_read_only', async () => {
      const token = await createToken(beacon.url, a.account, { name: 'ro', attributes: ['*'], access: 'read' })
      const res = await post(beacon.url, '/profiles/segments', { account: a.account, profileId: 'p1', token, assignees: ['x'] })
      expectError(res, 'token_read_only')
    })

    it('refuses a write-only token on a read with 403 token_write_only', async () => {
      const token = await createToken(beacon.url, a.account, { name: 'wo', attributes: ['*'], access: 'write' })
      const res = await post(beacon.url, '/profiles/query', { account: a.account, profileId: 'p1', token })
      expectError(res, 'token_write_only')
    })
  })

  describe('account isolation', () => {
    it('never lets a token of account A read or write account B', async () => {
      const id = visitorId()
      await post(beacon.url, '/visitors/attributes', { account: b.account, visitorId: id, token: b.token, attributes: { secret: 'b' } })
      for (const [path, body] of [
        ['/visitors/query', { account: b.account, visitorId: id, token: a.token }],
        ['/visitors/attributes', { account: b.account, visitorId: id, token: a.token, attributes: { secret: 'a' } }],
        ['/visitors/segments', { account: b.account, visitorId: id, token: a.token, assignees: ['x'] }],
        ['/profiles/query', { account: b.account, profileId: 'p', token: a.token }],
        ['/profiles/attributes', { account: b.account, profileId: 'p', token: a.token, attributes: { secret: 'a' } }],
        ['/profiles/segments', { account: b.account, profileId: 'p', token: a.token, removes: ['x'] }],
      ] as const) {
        const res = await post(beacon.url, path, body)
        expect(res.status, path).to.equal(403)
        expect(res.body.errors[0].code, path).to.equal('token_wrong_account')
      }
      const q = await post(beacon.url, '/visitors/query', { account: b.account, visitorId: id, token: b.token })
      expect(q.body).to.deep.include({ attributes: { secret: [{ value: 'b' }] }, segments: [] })
    })

    it('keeps the same visitorId apart in two accounts', async () => {
      const id = visitorId()
      await post(beacon.url, '/visitors/attributes', { account: a.account, visitorId: id, token: a.token, attributes: { site: 'a' } })
      await post(beacon.url, '/visitors/attributes', { account: b.account, visitorId: id, token: b.token, attributes: { site: 'b' } })
      const qa = await post(beacon.url, '/visitors/query', { account: a.account, visitorId: id, token: a.token })
      const qb = await post(beacon.url, '/visitors/query', { account: b.account, visitorId: id, token: b.token })
      expect(qa.body.attributes).to.deep.equal({ site: [{ value: 'a' }] })
      expect(qb.body.attributes).to.deep.equal({ site: [{ value: 'b' }] })
    })
  })

  describe('revocation and suspension', () => {
    it('answers 401 token_invalid at once for a revoked token', async () => {
      const created = await admin(beacon.url, 'POST', `/admin/accounts/${a.account}/tokens`, { name: 'temp', attributes: ['*'], access: 'read-write' })
      const token = created.body.token as string
      const before = await post(beacon.url, '/profiles/query', { account: a.account, profileId: 'p', token })
      expect(before.status).to.equal(200)
      const revoked = await admin(beacon.url, 'DELETE', `/admin/accounts/${a.account}/tokens/${created.body.id}`)
      expect(revoked.status).to.equal(200)
      expect(revoked.body.revokedAt).to.be.a('string')
      const after = await post(beacon.url, '/profiles/query', { account: a.account, profileId: 'p', token })
      expectError(after, 'token_invalid')
    })

    it('answers 401 for a token whose secret is wrong but whose id exists', async () => {
      const forged = a.token.slice(0, -4) + 'AAAA'
      const res = await post(beacon.url, '/profiles/query', { account: a.account, profileId: 'p', token: forged })
      expect(res.status).to.equal(401)
    })

    it('answers 404 for every public endpoint of a suspended account, and serves it again once resumed', async () => {
      const c = await createTenant(beacon.url, 'Site C')
      const suspended = await admin(beacon.url, 'PATCH', `/admin/accounts/${c.account}`, { suspended: true })
      expect(suspended.body.suspended).to.equal(true)
      const id = visitorId()
      for (const [path, body] of [
        ['/campaigns/query', { account: c.account, visitorId: id, platform: 'web', event: 'pageView' }],
        ['/visitors/query', { account: c.account, visitorId: id, token: c.token }],
        ['/profiles/attributes', { account: c.account, profileId: 'p', token: c.token, attributes: { x: '1' } }],
      ] as const) {
        const res = await post(beacon.url, path, body)
        expect(res.status, path).to.equal(404)
        expect(res.body.errors[0].code, path).to.equal('account_not_found')
      }
      await admin(beacon.url, 'PATCH', `/admin/accounts/${c.account}`, { suspended: false })
      const res = await post(beacon.url, '/visitors/query', { account: c.account, visitorId: id, token: c.token })
      expect(res.status).to.equal(200)
    })
  })

  describe('rate limit', () => {
    it('answers 429 rate_limited with Retry-After once a token exceeds its rate', async () => {
      // One request a second: a burst of one, then one more at most while the 20 are answered.
      const token = await createToken(beacon.url, a.account, { name: 'slow', attributes: ['*'], access: 'read', ratePerSecond: 1 })
      const answers = await Promise.all(Array.from({ length: 20 }, () =>
        post(beacon.url, '/profiles/query', { account: a.account, profileId: 'p', token })))
      const limited = answers.filter(r => r.status === 429)
      expect(answers.filter(r => r.status === 200).length).to.be.within(1, 2)
      expect(limited.length).to.be.at.least(18)
      expect(limited[0]!.body.errors[0].code).to.equal('rate_limited')
      expect(Number(limited[0]!.headers.get('retry-after'))).to.be.at.least(1)
    })
  })
})

describe('admin API', () => {
  let beacon: BeaconProcess

  before(async () => { beacon = await startBeacon() })
  after(() => discardBeacon(beacon))

  it('refuses a missing or wrong admin key with 401 admin_unauthorized', async () => {
    const missing = await fetch(beacon.url + '/admin/accounts')
    expect(missing.status).to.equal(401)
    const wrong = await admin(beacon.url, 'GET', '/admin/accounts', undefined, 'wrong-key-wrong-key')
    expectError(wrong, 'admin_unauthorized')
  })

  it('creates, reads, renames and lists accounts', async () => {
    const created = await admin(beacon.url, 'POST', '/admin/accounts', { name: 'Shop' })
    expect(created.status).to.equal(201)
    expect(created.body).to.include({ name: 'Shop', suspended: false })
    expect(created.body.account).to.match(/^[0-9a-f-]{36}$/)
    const read = await admin(beacon.url, 'GET', `/admin/accounts/${created.body.account}`)
    // The identity secret is shown at creation only.
    const { identitySecret: _secret, ...shown } = created.body
    expect(read.body).to.deep.equal(shown)
    const renamed = await admin(beacon.url, 'PATCH', `/admin/accounts/${created.body.account}`, { name: 'Shop 2' })
    expect(renamed.body.name).to.equal('Shop 2')
    const list = await admin(beacon.url, 'GET', '/admin/accounts')
    expect(list.body.accounts.map((x: { account: string }) => x.account)).to.include(created.body.account)
  })

  it('answers 404 for an unknown account', async () => {
    const res = await admin(beacon.url, 'GET', '/admin/accounts/00000000-0000-4000-8000-000000000000')
    expectError(res, 'account_not_found')
  })

  it('shows a token secret once, lists tokens without secrets, and revokes by id', async () => {
    const { account } = (await admin(beacon.url, 'POST', '/admin/accounts', { name: 'T' })).body
    const created = await admin(beacon.url, 'POST', `/admin/accounts/${account}/tokens`, { name: 'k', attributes: ['a', 'b'], access: 'read', ratePerSecond: 10 })
    expect(created.status).to.equal(201)
    expect(created.body.token).to.match(/^bk_[0-9a-f]{16}_/)
    expect(created.body).to.include({ name: 'k', access: 'read', ratePerSecond: 10, revokedAt: null })
    expect(created.body).not.to.have.property('hash')
    const list = await admin(beacon.url, 'GET', `/admin/accounts/${account}/tokens`)
    expect(list.body.tokens).to.have.length(1)
    expect(list.body.tokens[0]).not.to.have.any.keys('token', 'hash')
    expect(JSON.stringify(list.body)).not.to.include(tokenSecret(created.body.token))
    const unknown = await admin(beacon.url, 'DELETE', `/admin/accounts/${account}/tokens/ffff`)
    expectError(unknown, 'token_not_found')
  })

  it('refuses an invalid token spec with 400', async () => {
    const { account } = (await admin(beacon.url, 'POST', '/admin/accounts', { name: 'T' })).body
    const res = await admin(beacon.url, 'POST', `/admin/accounts/${account}/tokens`, { name: 'k', attributes: ['*', 'a'], access: 'all' })
    expectError(res, 'invalid_field', '/access')
  })

  it('puts, gets, lists and deletes event types, and protects the built-in ones', async () => {
    const { account } = (await admin(beacon.url, 'POST', '/admin/accounts', { name: 'E' })).body
    const base = `/admin/accounts/${account}/event-types`
    expect((await admin(beacon.url, 'PUT', `${base}/signup`, { required: ['plan'] })).body).to.deep.equal({ name: 'signup', required: ['plan'] })
    expect((await admin(beacon.url, 'GET', `${base}/signup`)).body).to.deep.equal({ name: 'signup', required: ['plan'] })
    const list = await admin(beacon.url, 'GET', base)
    expect(list.body.eventTypes.map((t: { name: string }) => t.name)).to.deep.equal(['pageView', 'productView', 'purchase', 'campaignView', 'campaignClick', 'consent', 'signup'])
    expect((await admin(beacon.url, 'PUT', `${base}/pageView`, { required: [] })).status).to.equal(409)
    expect((await admin(beacon.url, 'DELETE', `${base}/signup`)).status).to.equal(200)
    expect((await admin(beacon.url, 'GET', `${base}/signup`)).status).to.equal(404)
    expect((await admin(beacon.url, 'DELETE', `${base}/signup`)).status).to.equal(404)
  })

  it('keeps accounts, tokens and event types across a restart', async () => {
    const tenant = await createTenant(beacon.url, 'Persisted')
    await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/event-types/signup`, { required: [] })
    await beacon.stop()
    beacon = await startBeacon({ dataDir: beacon.dataDir })
    const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'signup' })
    expect(res.status).to.equal(200)
    const q = await post(beacon.url, '/profiles/query', { account: tenant.account, profileId: 'p', token: tenant.token })
    expect(q.status).to.equal(200)
  })
})
