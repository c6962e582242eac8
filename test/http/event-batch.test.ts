// POST /events/batch (docs/events.md) on an in-process Beacon (real HTTP, real LMDB, a clock the test
// sets): each event's outcome in order, one bad event refusing no other; timestamps at most 7 days old
// and 1 hour ahead; a messageId applied once; the batch's own limits; the CORS rules of /campaigns/query;
// no campaign matched (no impression counted); and acknowledged events found after a restart.

import { expect } from 'chai'
import { admin, createTenant, identified, post, tempDir, removeDir, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'
import { BATCH_EVENTS_MAX } from '../../src/http/schemas.js'

const SHOP = 'https://shop.example'
const DAY_MS = 24 * 60 * 60 * 1000

describe('POST /events/batch', () => {
  let beacon: InProcess
  let tenant: Tenant

  before(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
    const set = await admin(beacon.url, 'PATCH', `/admin/accounts/${tenant.account}`, { allowedOrigins: [SHOP] })
    expect(set.status, JSON.stringify(set.body)).to.equal(200)
    const campaign = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/campaigns/capped`, {
      name: 'Capped', status: 'active', priority: 1, trigger: { events: ['pageView'] }, frequencyCap: { max: 5, per: 'day' }, content: { banner: 'a.png' },
    })
    expect(campaign.status, JSON.stringify(campaign.body)).to.be.oneOf([200, 201])
  })
  after(() => beacon.close())

  const pageView = (who: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ visitorId: who, platform: 'web', event: 'pageView', path: '/shoes', ...extra })
  const batch = (events: unknown[], init: { headers?: Record<string, string> } = {}, query = ''): Promise<{ status: number, headers: Headers, body: any }> =>
    post(beacon.url, `/events/batch${query}`, { account: tenant.account, events }, init)
  const visitor = async (who: string): Promise<any> => {
    const res = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${who}`)
    return res.status === 200 ? res.body : null
  }
  const iso = (offsetMs: number): string => new Date(beacon.clock.nowMs() + offsetMs).toISOString()

  it('applies every event and answers one outcome per event, in order, without campaigns', async () => {
    const [a, b] = [visitorId(), visitorId()]
    const res = await batch([pageView(a), pageView(b), pageView(a, { path: '/hats' }), { ...pageView(b), event: 'productView', sku: 'sku-1' }])
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    expect(res.body.results).to.deep.equal([{ status: 200 }, { status: 200 }, { status: 200 }, { status: 200 }])
    expect(res.body).to.not.have.property('campaigns')
    const first = await visitor(a)
    expect(first.counts).to.deep.equal({ pageView: 2 })
    expect(first.lastPath).to.equal('/hats')
    expect((await visitor(b)).counts).to.deep.equal({ pageView: 1, productView: 1 })
    // Nothing was shown, so nothing counts against the frequency cap.
    expect(first.impressions).to.deep.equal({})
  })

  it('refuses a bad event alone, with the status and error it would get alone, and applies the others', async () => {
    const who = visitorId()
    const res = await batch([
      pageView(who),
      { platform: 'web', event: 'pageView' },
      pageView(who, { event: 'noSuchKind' }),
      { ...pageView(who), event: 'productView' },
      pageView(who, { profileId: 'ana@example.com' }),
      'not an event',
      pageView(who, { path: '/last' }),
    ])
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    const results = res.body.results as { status: number, error?: { code: string, field?: string, message: string } }[]
    expect(results.map(r => r.status)).to.deep.equal([200, 400, 400, 400, 401, 400, 200])
    expect(results[1]!.error).to.include({ code: 'invalid_field', field: '/visitorId' })
    expect(results[2]!.error).to.include({ code: 'unknown_event_type', field: '/event' })
    expect(results[3]!.error).to.include({ code: 'invalid_field', field: '/sku' })
    expect(results[4]!.error).to.include({ code: 'identity_unverified', field: '/profileIdSignature' })
    expect(results[5]!.error).to.include({ code: 'invalid_field' })
    for (const result of results) if (result.status !== 200) expect(result.error!.message).to.be.a('string').that.is.not.empty
    const state = await visitor(who)
    expect(state.counts).to.deep.equal({ pageView: 2 })
    expect(state.lastPath).to.equal('/last')
    expect(state.profileId).to.equal(null)
  })

  it('links a profile when the event carries its signature, as /campaigns/query does', async () => {
    const who = visitorId()
    const res = await batch([pageView(who, identified(tenant, 'bea@example.com'))])
    expect(res.body.results, JSON.stringify(res.body)).to.deep.equal([{ status: 200 }])
    expect((await visitor(who)).profileId).to.equal('bea@example.com')
  })

  it('takes timestamps up to 7 days old and 1 hour ahead, and refuses the others alone', async () => {
    const who = visitorId()
    const res = await batch([
      pageView(who, { timestamp: iso(-7 * DAY_MS + 60_000) }),
      pageView(who, { timestamp: iso(-7 * DAY_MS - 60_000) }),
      pageView(who, { timestamp: iso(59 * 60_000) }),
      pageView(who, { timestamp: iso(61 * 60_000) }),
      pageView(who, { timestamp: 'yesterday' }),
      pageView(who, { timestamp: '2026-01-05T11:00:00' }),
      pageView(who, { timestamp: '2026-01-05T13:30:00+02:00' }),
    ])
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    const results = res.body.results as { status: number, error?: { code: string, field?: string } }[]
    expect(results.map(r => r.status)).to.deep.equal([200, 400, 200, 400, 400, 400, 200])
    expect(results[1]!.error).to.include({ code: 'timestamp_out_of_range', field: '/timestamp' })
    expect(results[3]!.error).to.include({ code: 'timestamp_out_of_range', field: '/timestamp' })
    expect(results[4]!.error).to.include({ code: 'invalid_field', field: '/timestamp' })
    expect(results[5]!.error).to.include({ code: 'invalid_field', field: '/timestamp' })
    expect((await visitor(who)).counts).to.deep.equal({ pageView: 3 })
  })

  it('applies a messageId once: again in the same batch, in a later batch, and refuses it with another event', async () => {
    const who = visitorId()
    const first = await batch([pageView(who, { messageId: 'm-1' }), pageView(who, { messageId: 'm-1' }), pageView(who, { messageId: 'm-2' })])
    expect(first.body.results, JSON.stringify(first.body)).to.deep.equal([{ status: 200 }, { status: 200, duplicate: true }, { status: 200 }])
    const again = await batch([pageView(who, { messageId: 'm-2' }), pageView(who, { messageId: 'm-1', path: '/other' }), pageView(who, { messageId: 'm-3' })])
    expect(again.body.results[0]).to.deep.equal({ status: 200, duplicate: true })
    expect(again.body.results[1]).to.deep.include({ status: 422 })
    expect(again.body.results[1].error).to.include({ code: 'idempotency_key_reused', field: '/messageId' })
    expect(again.body.results[2]).to.deep.equal({ status: 200 })
    expect((await visitor(who)).counts).to.deep.equal({ pageView: 3 })
    // Another visitor's messageId is its own.
    const other = visitorId()
    expect((await batch([pageView(other, { messageId: 'm-1' })])).body.results).to.deep.equal([{ status: 200 }])
    // A messageId is not an Idempotency-Key: the same text as a header of /campaigns/query is another key.
    const single = await post(beacon.url, '/campaigns/query', { account: tenant.account, ...pageView(who) }, { headers: { 'idempotency-key': 'm-1' } })
    expect(single.status, JSON.stringify(single.body)).to.equal(200)
    expect((await visitor(who)).counts).to.deep.equal({ pageView: 4 })
  })

  it(`refuses more than ${BATCH_EVENTS_MAX} events with 413, an empty batch and a bad envelope with 400, an unknown account with 404`, async () => {
    const who = visitorId()
    const tooMany = await batch(Array.from({ length: BATCH_EVENTS_MAX + 1 }, () => ({ visitorId: who, platform: 'web', event: 'pageView' })))
    expectError(tooMany, 'batch_too_large', '/events')
    expect(tooMany.body.errors[0].message).to.include(`${BATCH_EVENTS_MAX + 1}`)
    expect((await visitor(who))?.counts ?? {}).to.deep.equal({})
    expectError(await batch([]), 'invalid_field', '/events')
    expectError(await post(beacon.url, '/events/batch', { account: tenant.account }), 'invalid_field', '/events')
    expectError(await post(beacon.url, '/events/batch', { account: tenant.account, events: [], extra: 1 }), 'unknown_field')
    expectError(await post(beacon.url, '/events/batch', { account: '6f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f', events: [pageView(who)] }), 'account_not_found')
  })

  it('refuses a batch over the body limit with 413', async () => {
    const big = Array.from({ length: 400 }, () => pageView(visitorId(), { path: '/' + 'x'.repeat(200) }))
    const res = await batch(big)
    expectError(res, 'body_too_large')
  })

  it('answers browsers of allowed origins with CORS headers, like /campaigns/query, with no token', async () => {
    const who = visitorId()
    // Not a token endpoint: browsers are answered though the account does not allow browser tokens.
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}`)).body.allowBrowserTokens).to.equal(false)
    const preflight = await fetch(`${beacon.url}/events/batch?account=${tenant.account}`, { method: 'OPTIONS', headers: { origin: SHOP, 'access-control-request-method': 'POST' } })
    expect(preflight.status).to.equal(204)
    expect(preflight.headers.get('access-control-allow-origin')).to.equal(SHOP)
    const allowed = await batch([pageView(who)], { headers: { origin: SHOP } }, `?account=${tenant.account}`)
    expect(allowed.status, JSON.stringify(allowed.body)).to.equal(200)
    expect(allowed.headers.get('access-control-allow-origin')).to.equal(SHOP)
    expect(allowed.body.results).to.deep.equal([{ status: 200 }])
    const refused = await batch([pageView(who)], { headers: { origin: 'https://evil.example' } }, `?account=${tenant.account}`)
    expectError(refused, 'origin_not_allowed')
    expect(refused.headers.get('access-control-allow-origin')).to.equal(null)
    const refusedPreflight = await fetch(`${beacon.url}/events/batch?account=${tenant.account}`, { method: 'OPTIONS', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } })
    expect(refusedPreflight.status).to.equal(403)
    // The query string's account and the body's must agree.
    const other = await createTenant(beacon.url, 'Other')
    expectError(await batch([pageView(who)], { headers: { origin: SHOP } }, `?account=${other.account}`), 'origin_not_allowed')
    expect((await visitor(who)).counts).to.deep.equal({ pageView: 1 })
  })
})

describe('POST /events/batch: durability', () => {
  it('finds every acknowledged event after a restart on the same data folder', async () => {
    const dataDir = tempDir()
    let beacon = await startInProcess(dataDir)
    try {
      const tenant = await createTenant(beacon.url)
      const visitors = Array.from({ length: 20 }, () => visitorId())
      const events = visitors.flatMap(who => [{ visitorId: who, platform: 'web', event: 'pageView' }, { visitorId: who, platform: 'web', event: 'productView', sku: 's' }])
      const res = await post(beacon.url, '/events/batch', { account: tenant.account, events })
      expect(res.body.results.every((r: { status: number }) => r.status === 200), JSON.stringify(res.body)).to.equal(true)
      await beacon.beacon.stop()
      beacon = await startInProcess(dataDir)
      for (const who of visitors) {
        const state = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${who}`)
        expect(state.body.counts).to.deep.equal({ pageView: 1, productView: 1 })
      }
    } finally {
      await beacon.beacon.stop()
      removeDir(dataDir)
    }
  })
})
