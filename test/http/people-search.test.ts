import { expect } from 'chai'
import { admin, createTenant, post, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { addUser, asUser, signIn } from '../helpers/panel.js'
import { expectError } from '../helpers/errors.js'

// The admin reads over many people (src/http/people-routes.ts): search by id prefix and attribute
// value, the recently active visitors (by activeMs), and the preview of an unsaved segment, each bounded
// by `scan` and saying how far it went.
const A = 'aaaaaaaa-0000-4000-8000-000000000001'
const B = 'bbbbbbbb-0000-4000-8000-000000000002'
const C = 'cccccccc-0000-4000-8000-000000000003'
const D = 'dddddddd-0000-4000-8000-000000000004'
const Z = 'aaaaaaaa-0000-4000-8000-000000000009'

describe('admin API: people search, recently active, segment preview', () => {
  let node: InProcess
  let tenant: Tenant
  let other: Tenant
  const cookies: Record<string, string> = {}
  const base = (): string => `/admin/accounts/${tenant.account}`

  async function attributes (visitorId: string, values: Record<string, unknown>, account = tenant): Promise<void> {
    const res = await post(node.url, '/visitors/attributes', { account: account.account, token: account.token, visitorId, attributes: values })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  async function event (visitorId: string, fields: Record<string, unknown>): Promise<void> {
    const res = await post(node.url, '/campaigns/query', { account: tenant.account, visitorId, platform: 'web', ...fields })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }

  before(async () => {
    node = await startInProcess()
    tenant = await createTenant(node.url, 'Shop')
    other = await createTenant(node.url, 'Other')
    // Activity in a known order: A first, then B, C, D; then A again (latest).
    await attributes(A, { email: 'Ann@Example.com', plan: 'pro' })
    node.clock.advance(1000)
    await attributes(B, { email: 'bob@example.com', plan: 'free' })
    node.clock.advance(1000)
    await attributes(C, { tags: ['x', 'VIP'], plan: 'pro' })
    node.clock.advance(1000)
    await event(D, { event: 'pageView', path: '/' })
    node.clock.advance(1000)
    await event(A, { event: 'pageView', path: '/' })
    await attributes(Z, { email: 'ann@example.com' }, other)
    const profile = await post(node.url, '/profiles/attributes', { account: tenant.account, token: tenant.token, profileId: 'person-1', attributes: { email: 'carol@example.com' } })
    expect(profile.status, JSON.stringify(profile.body)).to.equal(200)
    for (const role of ['viewer', 'editor']) {
      await addUser(node.url, tenant.account, `${role}@shop.example`, role)
      cookies[role] = (await signIn(node.url, `${role}@shop.example`)).signedIn!.cookie
    }
  })
  after(async () => { await node.close() })

  describe('search', () => {
    it('finds visitors by attribute value, case-insensitive, in this account only, saying it examined every row', async () => {
      const res = await admin(node.url, 'GET', `${base()}/people?attribute=email&value=ann%40example.com`)
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      expect(res.body.people.map((p: any) => p.id)).to.deep.equal([A])
      expect(res.body.people[0]).to.deep.include({ kind: 'visitor', profileId: null })
      expect(res.body.people[0].attributes).to.deep.equal({ email: 'Ann@Example.com', plan: 'pro' })
      expect(res.body.people[0].lastActive).to.be.a('string')
      expect(res.body).to.deep.include({ scanned: 4, complete: true, next: null })
    })

    it('matches an element of a list, an attribute without value, and an id prefix', async () => {
      expect((await admin(node.url, 'GET', `${base()}/people?attribute=tags&value=vip`)).body.people.map((p: any) => p.id)).to.deep.equal([C])
      expect((await admin(node.url, 'GET', `${base()}/people?attribute=plan`)).body.people.map((p: any) => p.id)).to.deep.equal([A, B, C])
      const byId = await admin(node.url, 'GET', `${base()}/people?id=BBBB`)
      expect(byId.body.people.map((p: any) => p.id)).to.deep.equal([B])
      expect(byId.body).to.deep.include({ scanned: 1, complete: true })
    })

    it('searches profiles by attribute', async () => {
      const res = await admin(node.url, 'GET', `${base()}/people?kind=profile&attribute=email&value=carol%40example.com`)
      expect(res.status).to.equal(200)
      expect(res.body.people.map((p: any) => [p.kind, p.id])).to.deep.equal([['profile', 'person-1']])
    })

    it('stops at the scan limit and continues from its cursor', async () => {
      const first = await admin(node.url, 'GET', `${base()}/people?attribute=plan&value=pro&scan=2`)
      expect(first.body).to.deep.include({ scanned: 2, complete: false, next: B })
      expect(first.body.people.map((p: any) => p.id)).to.deep.equal([A])
      const rest = await admin(node.url, 'GET', `${base()}/people?attribute=plan&value=pro&scan=2&cursor=${first.body.next as string}`)
      expect(rest.body.people.map((p: any) => p.id)).to.deep.equal([C])
      expect(rest.body).to.deep.include({ scanned: 2, complete: false, next: D })
      const last = await admin(node.url, 'GET', `${base()}/people?attribute=plan&value=pro&scan=2&cursor=${D}`)
      expect(last.body).to.deep.include({ people: [], scanned: 0, complete: true, next: null })
    })

    it('pages by limit', async () => {
      const page = await admin(node.url, 'GET', `${base()}/people?limit=2`)
      expect(page.body.people.map((p: any) => p.id)).to.deep.equal([A, B])
      expect(page.body).to.deep.include({ complete: false, next: B })
    })

    it('refuses bad input with 400', async () => {
      expectError(await admin(node.url, 'GET', `${base()}/people?kind=robot`), 'invalid_field', '/kind')
      expectError(await admin(node.url, 'GET', `${base()}/people?value=x`), 'invalid_field', '/value')
      expectError(await admin(node.url, 'GET', `${base()}/people?attribute=a%20b`), 'invalid_field', '/attribute')
      expectError(await admin(node.url, 'GET', `${base()}/people?scan=0`), 'invalid_field', '/scan')
      expectError(await admin(node.url, 'GET', `${base()}/people?limit=101`), 'invalid_field', '/limit')
      expectError(await admin(node.url, 'GET', `${base()}/people/recent?cursor=nonsense`), 'invalid_field', '/cursor')
      expectError(await admin(node.url, 'GET', '/admin/accounts/00000000-0000-4000-8000-000000000000/people'), 'account_not_found')
    })
  })

  describe('recently active', () => {
    it('lists visitors latest first by their last activity, paged by cursor', async () => {
      const res = await admin(node.url, 'GET', `${base()}/people/recent`)
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      expect(res.body.people.map((p: any) => p.id)).to.deep.equal([A, D, C, B])
      expect(res.body).to.deep.include({ scanned: 4, complete: true, next: null })
      const times = res.body.people.map((p: any) => Date.parse(p.lastActive))
      expect(times).to.deep.equal([...times].sort((x: number, y: number) => y - x))
      const first = await admin(node.url, 'GET', `${base()}/people/recent?limit=2`)
      expect(first.body.people.map((p: any) => p.id)).to.deep.equal([A, D])
      const second = await admin(node.url, 'GET', `${base()}/people/recent?limit=2&cursor=${encodeURIComponent(first.body.next as string)}`)
      expect(second.body.people.map((p: any) => p.id)).to.deep.equal([C, B])
    })

    it('says when it did not examine every visitor', async () => {
      const res = await admin(node.url, 'GET', `${base()}/people/recent?scan=2`)
      expect(res.body).to.deep.include({ scanned: 2, complete: false })
      expect(res.body.people.map((p: any) => p.id)).to.deep.equal([A, B])
    })
  })

  describe('segment preview', () => {
    const preview = (body: unknown, query = ''): Promise<any> => admin(node.url, 'POST', `${base()}/segments-preview${query}`, body)

    it('counts the visitors an unsaved rule matches now, with a sample, and saves nothing', async () => {
      const res = await preview({ description: 'Pro plan', rule: { fact: 'attribute.plan', op: 'eq', value: 'pro' } })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      expect(res.body).to.deep.include({ matches: 2, scanned: 4, complete: true, next: null, windowsRecorded: true })
      expect(res.body.sample.map((p: any) => p.id)).to.deep.equal([A, C])
      const behaviour = await preview({ rule: { all: [{ fact: 'visitor.pageViews', op: 'gte', value: 1 }, { fact: 'attribute.plan', op: 'exists', value: false }] } })
      expect(behaviour.body).to.deep.include({ matches: 1 })
      expect(behaviour.body.sample.map((p: any) => p.id)).to.deep.equal([D])
      expect((await admin(node.url, 'GET', `${base()}/segments`)).body.segments).to.deep.equal([])
    })

    it('reads window counters only where a saved segment records them', async () => {
      const rule = { fact: 'count', event: 'pageView', within: '7d', op: 'gte', value: 1 }
      const before = await preview({ rule })
      expect(before.body).to.deep.include({ matches: 0, windowsRecorded: false })
      expect((await admin(node.url, 'PUT', `${base()}/segments/viewers`, { rule })).status).to.equal(200)
      await event(D, { event: 'pageView', path: '/a' })
      const after = await preview({ rule })
      expect(after.body).to.deep.include({ matches: 1, windowsRecorded: true })
      expect(after.body.sample.map((p: any) => p.id)).to.deep.equal([D])
      expect((await admin(node.url, 'DELETE', `${base()}/segments/viewers`)).status).to.equal(200)
    })

    it('counts in parts with the scan limit', async () => {
      const rule = { fact: 'attribute.plan', op: 'eq', value: 'pro' }
      const first = await preview({ rule }, '?scan=3')
      expect(first.body).to.deep.include({ matches: 2, scanned: 3, complete: false, next: C })
      const rest = await preview({ rule }, `?scan=3&cursor=${first.body.next as string}`)
      expect(rest.body).to.deep.include({ matches: 0, scanned: 1, complete: true, next: null })
    })

    it('refuses a bad definition with 400 invalid_segment, as a segment PUT does', async () => {
      expectError(await preview({ rule: { fact: 'count', event: 'pageView', op: 'most', value: 1 } }), 'invalid_segment', '/rule/op')
      expectError(await preview({ rule: { fact: 'attribute.plan', op: 'eq', value: 'pro' }, extra: 1 }), 'invalid_segment', '/extra')
      expectError(await preview({ description: 'manual' }), 'invalid_segment', '/rule')
    })
  })

  describe('roles', () => {
    it('lets a viewer search and list, and only an editor preview', async () => {
      expect((await asUser(node.url, cookies.viewer!, 'GET', `${base()}/people?attribute=plan`)).status).to.equal(200)
      expect((await asUser(node.url, cookies.viewer!, 'GET', `${base()}/people/recent`)).status).to.equal(200)
      const body = { rule: { fact: 'attribute.plan', op: 'eq', value: 'pro' } }
      expectError(await asUser(node.url, cookies.viewer!, 'POST', `${base()}/segments-preview`, body), 'role_forbidden')
      const edited = await asUser(node.url, cookies.editor!, 'POST', `${base()}/segments-preview`, body)
      expect(edited.status, JSON.stringify(edited.body)).to.equal(200)
      expect(edited.body.matches).to.equal(2)
      expectError(await asUser(node.url, cookies.viewer!, 'GET', `/admin/accounts/${other.account}/people`), 'role_forbidden')
    })
  })
})
