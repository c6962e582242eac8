import { expect } from 'chai'
import { admin, createTenant, identified, post, signProfile, tempDir, visitorId, type Tenant } from '../helpers/beacon.js'
import { freshTenantEach, startInProcess, type InProcess } from '../helpers/in-process.js'
import { Store } from '../../src/store/store.js'
import { PREFLIGHT_MAX_AGE_SECONDS } from '../../src/http/public-routes.js'
import { expectError } from '../helpers/errors.js'

const SHOP = 'http://shop.test:8080'

async function options (base: string, path: string, origin: string | null): Promise<{ status: number, headers: Headers, body: any }> {
  const headers: Record<string, string> = { 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' }
  if (origin !== null) headers.origin = origin
  const res = await fetch(base + path, { method: 'OPTIONS', headers })
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: text === '' ? null : JSON.parse(text) }
}

describe('browser access: CORS per account', () => {
  let beacon: InProcess
  let tenant: Tenant
  const event = (extra: Record<string, unknown> = {}) => ({ account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'pageView', ...extra })
  const fromBrowser = (origin: string) => ({ headers: { origin } })

  before(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
    const set = await admin(beacon.url, 'PATCH', `/admin/accounts/${tenant.account}`, { allowedOrigins: [SHOP, 'https://*.shop.example', SHOP] })
    expect(set.status, JSON.stringify(set.body)).to.equal(200)
    expect(set.body.allowedOrigins).to.deep.equal([SHOP, 'https://*.shop.example'])
  })
  after(() => beacon.close())

  it('starts an account with no browser access, verification required and no secret in sight', async () => {
    const created = await admin(beacon.url, 'POST', '/admin/accounts', { name: 'Fresh' })
    expect(created.status).to.equal(201)
    expect(created.body).to.include({ identityVerification: 'required', allowBrowserTokens: false, previousIdentitySecretUntil: null })
    expect(created.body.allowedOrigins).to.deep.equal([])
    expect(created.body.identitySecret).to.match(/^bis_[A-Za-z0-9_-]{43}$/)
    for (const path of [`/admin/accounts/${created.body.account}`, '/admin/accounts']) {
      const text = JSON.stringify((await admin(beacon.url, 'GET', path)).body)
      expect(text).to.not.include('bis_')
      expect(text).to.not.include('identitySecret"')
    }
    const res = await post(beacon.url, `/campaigns/query?account=${created.body.account}`, { ...event(), account: created.body.account }, fromBrowser(SHOP))
    expectError(res, 'origin_not_allowed')
  })

  it('refuses malformed allowedOrigins with every problem at once, changing nothing', async () => {
    const res = await admin(beacon.url, 'PATCH', `/admin/accounts/${tenant.account}`, {
      allowedOrigins: ['https://ok.example', 'https://shop.example/', '*', 'HTTPS://SHOP.EXAMPLE', 'null', 'ftp://x.example', 'https://*.', 'https://x.example:99999'],
    })
    expect(res.status).to.equal(400)
    expect(res.body.errors.map((e: { field: string }) => e.field)).to.deep.equal([1, 2, 3, 4, 5, 6, 7].map(i => `/allowedOrigins/${i}`))
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}`)).body.allowedOrigins).to.deep.equal([SHOP, 'https://*.shop.example'])
  })

  it('answers the preflight of an allowed origin (exact or wildcard) from the account in the query string', async () => {
    for (const origin of [SHOP, 'https://a.shop.example', 'https://a.b.shop.example']) {
      const res = await options(beacon.url, `/campaigns/query?account=${tenant.account}`, origin)
      expect(res.status, origin).to.equal(204)
      expect(res.headers.get('access-control-allow-origin')).to.equal(origin)
      expect(res.headers.get('access-control-allow-methods')).to.equal('POST')
      expect(res.headers.get('access-control-allow-headers')).to.equal('content-type, idempotency-key, beacon-route')
      expect(res.headers.get('access-control-max-age')).to.equal(String(PREFLIGHT_MAX_AGE_SECONDS))
      expect(res.headers.get('vary')).to.equal('Origin')
    }
  })

  it('gives a disallowed origin, or a preflight without the account, a 403 and no CORS headers', async () => {
    for (const origin of ['https://shop.example', 'http://a.shop.example', 'https://evil-shop.example', 'https://a.shop.example.evil', 'https://a.shop.example:8443', 'http://shop.test', 'null']) {
      const res = await options(beacon.url, `/campaigns/query?account=${tenant.account}`, origin)
      expect(res.status, origin).to.equal(403)
      expectError(res, 'origin_not_allowed')
      expect(res.headers.get('access-control-allow-origin'), origin).to.equal(null)
    }
    const bare = await options(beacon.url, '/campaigns/query', SHOP)
    expect(bare.status).to.equal(403)
    expect(bare.body.message).to.include('?account=')
    expect((await options(beacon.url, `/campaigns/query?account=${visitorId()}`, SHOP)).status).to.equal(404)
  })

  it('answers a plain OPTIONS (no Origin) with Allow', async () => {
    const res = await options(beacon.url, '/campaigns/query', null)
    expect(res.status).to.equal(204)
    expect(res.headers.get('allow')).to.equal('POST, OPTIONS')
  })

  it('puts Access-Control-Allow-Origin and Vary on the answers to an allowed origin, refusals included', async () => {
    const ok = await post(beacon.url, `/campaigns/query?account=${tenant.account}`, event(), fromBrowser(SHOP))
    expect(ok.status).to.equal(200)
    expect(ok.headers.get('access-control-allow-origin')).to.equal(SHOP)
    expect(ok.headers.get('vary')).to.equal('Origin')
    const refused = await post(beacon.url, `/campaigns/query?account=${tenant.account}`, event({ event: 'nope' }), fromBrowser('https://x.shop.example'))
    expectError(refused, 'unknown_event_type')
    expect(refused.headers.get('access-control-allow-origin')).to.equal('https://x.shop.example')
    // Servers (no Origin) see no CORS headers.
    const server = await post(beacon.url, '/campaigns/query', event())
    expect(server.status).to.equal(200)
    expect(server.headers.get('access-control-allow-origin')).to.equal(null)
  })

  it('refuses a disallowed origin\'s request (even one without a preflight) and records nothing', async () => {
    const body = event()
    const res = await post(beacon.url, `/campaigns/query?account=${tenant.account}`, body, fromBrowser('https://evil.example'))
    expect(res.status).to.equal(403)
    expect(res.headers.get('access-control-allow-origin')).to.equal(null)
    const snapshot = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${body.visitorId}`)
    expect(snapshot.body.counts ?? {}).to.deep.equal({})
  })

  it('refuses a body whose account differs from the query string\'s with 400', async () => {
    const other = await createTenant(beacon.url, 'Other')
    const res = await post(beacon.url, `/campaigns/query?account=${tenant.account}`, { ...event(), account: other.account }, fromBrowser(SHOP))
    expectError(res, 'invalid_field', '/account')
    expect(res.headers.get('access-control-allow-origin')).to.equal(SHOP)
    // One spelling of an account id: upper case in the query string names the same account.
    const upper = await post(beacon.url, `/campaigns/query?account=${tenant.account.toUpperCase()}`, event(), fromBrowser(SHOP))
    expect(upper.status).to.equal(200)
  })

  it('keeps the token endpoints for servers unless the account allows browsers explicitly', async () => {
    const query = { account: tenant.account, token: tenant.token, visitorId: visitorId() }
    const path = `/visitors/query?account=${tenant.account}`
    const preflight = await options(beacon.url, path, SHOP)
    expectError(preflight, 'browser_token_forbidden')
    expect(preflight.headers.get('access-control-allow-origin')).to.equal(null)
    const refused = await post(beacon.url, path, query, fromBrowser(SHOP))
    expectError(refused, 'browser_token_forbidden')
    expect(refused.headers.get('access-control-allow-origin')).to.equal(null)
    expect((await post(beacon.url, '/visitors/query', query)).status).to.equal(200)

    await admin(beacon.url, 'PATCH', `/admin/accounts/${tenant.account}`, { allowBrowserTokens: true })
    try {
      expect((await options(beacon.url, path, SHOP)).status).to.equal(204)
      const allowed = await post(beacon.url, path, query, fromBrowser(SHOP))
      expect(allowed.status).to.equal(200)
      expect(allowed.headers.get('access-control-allow-origin')).to.equal(SHOP)
      expect((await post(beacon.url, path, query, fromBrowser('https://evil.example'))).status).to.equal(403)
    } finally {
      await admin(beacon.url, 'PATCH', `/admin/accounts/${tenant.account}`, { allowBrowserTokens: false })
    }
  })
})

describe('verified identity on /campaigns/query', () => {
  const each = freshTenantEach()
  const at = (path: string) => `/admin/accounts/${each.tenant.account}${path}`
  const fire = (visitor: string, extra: Record<string, unknown>) =>
    post(each.beacon.url, '/campaigns/query', { account: each.tenant.account, visitorId: visitor, platform: 'web', event: 'pageView', ...extra })
  const visitor = async (id: string) => (await admin(each.beacon.url, 'GET', at(`/visitors/${id}`))).body
  const profile = async (id: string) => (await admin(each.beacon.url, 'GET', at(`/profiles/${encodeURIComponent(id)}`))).body

  it('refuses a profileId without its signature, or with a wrong one, with 401 identity_unverified: nothing recorded, nothing linked', async () => {
    const device = visitorId()
    for (const extra of [{ profileId: 'ana@example.com' }, { profileId: 'ana@example.com', profileIdSignature: signProfile(each.tenant.identitySecret, 'bob@example.com') }]) {
      const res = await fire(device, extra)
      expectError(res, 'identity_unverified', '/profileIdSignature')
    }
    const v = await visitor(device)
    expect(v.profileId ?? null).to.equal(null)
    expect(v.counts ?? {}).to.deep.equal({})
    expect((await profile('ana@example.com')).visitors ?? []).to.deep.equal([])
    // A signature that is not 64 hex characters is malformed.
    expect((await fire(device, { profileId: 'ana@example.com', profileIdSignature: 'abc' })).status).to.equal(400)
  })

  it('links the visitor with a valid signature (any hex case) and never keeps the signature', async () => {
    const device = visitorId()
    const signed = identified(each.tenant, 'ana@example.com')
    const res = await fire(device, { ...signed, profileIdSignature: signed.profileIdSignature.toUpperCase() })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    const v = await visitor(device)
    expect(v.profileId).to.equal('ana@example.com')
    expect((await profile('ana@example.com')).visitors).to.deep.equal([device])
    expect(JSON.stringify(v) + JSON.stringify(await profile('ana@example.com'))).to.not.include(signed.profileIdSignature)
  })

  it('trusts a profileId as sent when the account turned verification off', async () => {
    await admin(each.beacon.url, 'PATCH', at(''), { identityVerification: 'off' })
    const device = visitorId()
    expect((await fire(device, { profileId: 'carol' })).status).to.equal(200)
    expect((await visitor(device)).profileId).to.equal('carol')
  })

  it('rotates the secret: the previous one holds for the grace period, then only the new one; an older one goes at once', async () => {
    const old = each.tenant.identitySecret
    const rotated = await admin(each.beacon.url, 'POST', at('/identity-secret/rotate'), { graceSeconds: 60 })
    expect(rotated.status).to.equal(200)
    const fresh = rotated.body.identitySecret as string
    expect(fresh).to.match(/^bis_/).and.not.equal(old)
    expect(rotated.body.previousIdentitySecretUntil).to.equal(new Date(each.beacon.clock.nowMs() + 60_000).toISOString())
    expect(JSON.stringify((await admin(each.beacon.url, 'GET', at(''))).body)).to.not.include(fresh)
    const tryWith = async (secret: string) => (await fire(visitorId(), { profileId: 'dan', profileIdSignature: signProfile(secret, 'dan') })).status
    expect(await tryWith(old)).to.equal(200)
    expect(await tryWith(fresh)).to.equal(200)
    each.beacon.clock.advance(60_001)
    expect(await tryWith(old)).to.equal(401)
    expect(await tryWith(fresh)).to.equal(200)

    const again = (await admin(each.beacon.url, 'POST', at('/identity-secret/rotate'), { graceSeconds: 0 })).body.identitySecret as string
    expect(await tryWith(fresh)).to.equal(401)
    expect(await tryWith(again)).to.equal(200)
    const bad = await admin(each.beacon.url, 'POST', at('/identity-secret/rotate'), { graceSeconds: -1 })
    expect(bad.status).to.equal(400)
    expect(await tryWith(again)).to.equal(200)
  })

  it('reads an account stored before verified identity as "required" with no secret until one is rotated', async () => {
    const dataDir = each.beacon.dataDir
    await each.beacon.beacon.stop()
    const store = new Store({ path: dataDir, durability: 'flushed', mapSizeBytes: 1 << 28 })
    const legacy = '0b6f3a52-93c4-4d6e-8f1a-2c3b4d5e6f70'
    await store.save(store.accounts, legacy, { account: legacy, name: 'Old shop', suspended: false, createdAt: '2025-01-01T00:00:00.000Z' })
    await store.close()
    each.beacon = await startInProcess(dataDir)
    const beacon = each.beacon
    const shown = await admin(beacon.url, 'GET', `/admin/accounts/${legacy}`)
    expect(shown.body).to.include({ identityVerification: 'required', allowBrowserTokens: false, identitySecretSince: null })
    const body = { account: legacy, visitorId: visitorId(), platform: 'web', event: 'pageView', profileId: 'p', profileIdSignature: signProfile('anything', 'p') }
    const refused = await post(beacon.url, '/campaigns/query', body)
    expect(refused.status).to.equal(401)
    expect(refused.body.errors[0].message).to.include('rotate')
    const secret = (await admin(beacon.url, 'POST', `/admin/accounts/${legacy}/identity-secret/rotate`, {})).body.identitySecret as string
    expect((await post(beacon.url, '/campaigns/query', { ...body, profileIdSignature: signProfile(secret, 'p') })).status).to.equal(200)
  })
})

describe('campaignView and campaignClick events', () => {
  let beacon: InProcess
  let tenant: Tenant
  before(async () => {
    beacon = await startInProcess(tempDir())
    tenant = await createTenant(beacon.url)
  })
  after(() => beacon.close())

  it('are built in, each requiring a campaignId string', async () => {
    const types = (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/event-types`)).body.eventTypes
    expect(types).to.deep.include({ name: 'campaignView', required: ['campaignId'] })
    expect(types).to.deep.include({ name: 'campaignClick', required: ['campaignId'] })
    const fire = (extra: Record<string, unknown>) => post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', ...extra })
    expect((await fire({ event: 'campaignView', campaignId: 'summer' })).status).to.equal(200)
    expect((await fire({ event: 'campaignClick', campaignId: 'summer' })).status).to.equal(200)
    const missing = await fire({ event: 'campaignView' })
    expectError(missing, 'invalid_field', '/campaignId')
    expect((await fire({ event: 'campaignClick', campaignId: 7 })).status).to.equal(400)
  })
})
